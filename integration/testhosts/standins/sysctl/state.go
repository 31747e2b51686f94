package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// state is the host's recorded settings (stateFile): what this host set,
// which its reads answer instead of the machine's /proc/sys.
type state struct {
	keys   []string // in the order first set
	values map[string]string
	locked *os.File // held from the first write until close
	dirty  bool
}

const stateHeader = "# Settings made on this test host by the sysctl stand-in, which never\n# writes /proc/sys (the machine's). Reads answer these.\n"

// loadState reads the state file (missing: empty).
func loadState() (*state, error) {
	s := &state{values: map[string]string{}}
	b, err := os.ReadFile(stateFile)
	if os.IsNotExist(err) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, " = ")
		if !ok {
			return nil, fmt.Errorf("%s: %q is not KEY = VALUE", stateFile, line)
		}
		s.set(k, v)
	}
	return s, nil
}

func (s *state) set(k, v string) {
	if _, ok := s.values[k]; !ok {
		s.keys = append(s.keys, k)
	}
	s.values[k] = v
}

// recorded is the value this host set for key, if any.
func (c *ctl) recorded(key string) (string, bool) {
	if c.state == nil {
		s, err := loadState()
		if err != nil {
			c.warnx("%v", err)
			return "", false
		}
		c.state = s
	}
	v, ok := c.state.values[key]
	return v, ok
}

// record sets key on the host: under the state file's lock, read afresh
// at the first write of the run; written when the run ends (close).
func (c *ctl) record(key, value string) error {
	if c.state == nil || c.state.locked == nil {
		if err := os.MkdirAll(filepath.Dir(stateFile), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(stateFile+".lock", os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC, 0o644)
		if err != nil {
			return err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return err
		}
		s, err := loadState()
		if err != nil {
			f.Close()
			return err
		}
		s.locked = f
		c.state = s
	}
	c.state.set(key, value)
	c.state.dirty = true
	return nil
}

// close writes the settings recorded in this run and releases the lock.
func (s *state) close() error {
	if s == nil || s.locked == nil {
		return nil
	}
	defer s.locked.Close()
	if !s.dirty {
		return nil
	}
	var b strings.Builder
	b.WriteString(stateHeader)
	for _, k := range s.keys {
		fmt.Fprintf(&b, "%s = %s\n", k, s.values[k])
	}
	tmp := fmt.Sprintf("%s.%d", stateFile, os.Getpid())
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, stateFile)
}
