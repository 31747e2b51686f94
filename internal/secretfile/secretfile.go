package secretfile

import (
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
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

// OwnerError is a secret file owned by an account that is neither the
// one reading it nor root: that account could replace the secret (a
// key of its own in place of the worker's) without anyone noticing.
type OwnerError struct {
	Path string
	UID  int // the file's owner
	Want int // the running user
}

func (e *OwnerError) Error() string {
	return fmt.Sprintf("%s is owned by %s: a secret must be owned by the user reading it (%s) or root, or its owner could replace it: chown %d %s",
		e.Path, describeUID(e.UID), describeUID(e.Want), e.Want, e.Path)
}

// describeUID names an account: "nobody, uid 65534", or the number
// alone when the system does not know it.
func describeUID(uid int) string {
	s := "uid " + strconv.Itoa(uid)
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		s = u.Username + ", " + s
	}
	return s
}

// Read returns the content of the secret file at path, refusing a file
// group or other may access (*ModeError), one owned by someone other
// than the running user or root (*OwnerError), one that is not a regular
// file, and one over MaxBytes.
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
	if err := check(path, fi); err != nil {
		return nil, err
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

// check says whether fi, the open file at path, may hold a secret: a
// regular file, its owner's alone (no group or other bits), owned by the
// running user or root. Read calls it on the file it opened (not on the
// name, which could be swapped in between).
func check(path string, fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return &ModeError{Path: path, Mode: fi.Mode()}
	}
	if uid, ok := owner(fi); ok && uid != 0 && uid != os.Geteuid() {
		return &OwnerError{Path: path, UID: uid, Want: os.Geteuid()}
	}
	return nil
}
