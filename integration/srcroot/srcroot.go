package srcroot

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// Module is the module path of Kedge's go.mod.
const Module = "kedge.dev/kedge"

var (
	once sync.Once
	dir  string
	err  error
)

// Dir is the directory of the go.mod that declares Module: the working
// directory or the nearest of its parents with one (go test runs in the
// package's directory, make in the root), else where this file was built
// from when the build kept its path.
func Dir() (string, error) {
	once.Do(func() { dir, err = find() })
	return dir, err
}

func find() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if declares(filepath.Join(d, "go.mod")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	if _, self, _, ok := runtime.Caller(0); ok && filepath.IsAbs(self) {
		d := filepath.Join(filepath.Dir(self), "..", "..")
		if declares(filepath.Join(d, "go.mod")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("srcroot: no go.mod of module %s in %s or above it: run from Kedge's source tree", Module, wd)
}

// declares says whether the go.mod at path declares Module.
func declares(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if line := strings.TrimSpace(s.Text()); strings.HasPrefix(line, "module ") {
			return strings.Trim(strings.TrimSpace(strings.TrimPrefix(line, "module")), `"`) == Module
		}
	}
	return false
}
