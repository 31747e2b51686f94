package secretfile

import (
	"fmt"
	"io"
	"os"
)

// MaxBytes bounds what Read reads: secrets are small.
const MaxBytes = 1 << 20

// ModeError is a secret file that group or other may access.
type ModeError struct {
	Path string
	Mode os.FileMode
}

func (e *ModeError) Error() string {
	return fmt.Sprintf("%s is open to other users (mode %04o): a secret must be readable by its owner only: chmod 600 %s", e.Path, e.Mode.Perm(), e.Path)
}

// Read returns the content of the secret file at path, refusing a file
// group or other may access (*ModeError), one that is not a regular file,
// and one over MaxBytes.
func Read(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, &ModeError{Path: path, Mode: fi.Mode()}
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("%s is over %d bytes: not a secret file", path, MaxBytes)
	}
	return data, nil
}
