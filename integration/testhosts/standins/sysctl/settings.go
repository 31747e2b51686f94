package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// setting is one line of a sysctl.conf file or of the command line.
type setting struct {
	path          string // under procSys, separators turned; may be a glob
	value         string
	ignoreFailure bool // -KEY = VALUE
	globExclude   bool // -KEY alone
}

type settings []*setting

func (l settings) hasPath(p string) bool {
	for _, s := range l {
		if s.path == p {
			return true
		}
	}
	return false
}

func isSpace(b byte) bool { return strings.IndexByte(" \t\n\v\f\r", b) >= 0 }

func lstrip(s string) string {
	for len(s) > 0 && isSpace(s[0]) {
		s = s[1:]
	}
	return s
}

func rstrip(s string) string {
	for len(s) > 1 && isSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

// parseLine reads one setting as procps does: KEY = VALUE, -KEY = VALUE
// (its failure ignored), -KEY (excluded from globs); comments and lines
// shorter than two characters are nothing; anything else is invalid, with
// a warning naming file and line.
func (c *ctl) parseLine(file string, n int, line string) *setting {
	key := lstrip(line)
	if len(key) < 2 || key[0] == '#' || key[0] == ';' {
		return nil
	}
	if c.patternSet && !c.matches(key) {
		return nil
	}
	s := &setting{}
	k, v, ok := strings.Cut(key, "=")
	switch {
	case !ok && key[0] == '-':
		s.globExclude = true
		k = rstrip(key[1:])
	case !ok:
		c.warnx("%s(%d): invalid syntax, continuing...", file, n)
		return nil
	default:
		if strings.HasPrefix(k, "-") {
			s.ignoreFailure = true
			k = k[1:]
		}
		s.value = rstrip(lstrip(v))
		k = rstrip(k)
	}
	s.path = procSys + c.slashdot(k, '.', '/')
	return s
}

// dottedKey is the key a path under procSys names, as procps prints it.
func (c *ctl) dottedKey(p string) string {
	return c.slashdot(strings.TrimPrefix(p, procSys), '/', '.')
}

// isProcPath reports whether p resolves under procSys, warning when it
// does not.
func (c *ctl) isProcPath(p string) bool {
	resolved, err := filepath.EvalSymlinks(p)
	if err != nil {
		return false
	}
	root, err := filepath.EvalSymlinks(procSys)
	if err != nil {
		return false
	}
	if strings.HasPrefix(resolved+"/", strings.TrimSuffix(root, "/")+"/") && resolved != root {
		return true
	}
	c.warnx("Path is not under %s: %s", procSys, p)
	return false
}

// read prints one key (a directory: every key under it); its result adds
// to the exit code (-1 for an empty name or a path outside procSys).
func (c *ctl) read(name string) int {
	if name == "" {
		c.warnx("\"%s\" is an unknown key", name)
		return -1
	}
	p := procSys + c.slashdot(name, '.', '/')
	out := c.slashdot(name, '/', '.')
	fi, err := os.Stat(p)
	if err != nil {
		if !c.ignoreError {
			c.warn(err, "cannot stat %s", p)
			return 1
		}
		return 0
	}
	if fi.Mode().Perm()&0o400 == 0 {
		return 0
	}
	if !c.isProcPath(p) {
		return -1
	}
	if fi.IsDir() {
		return c.displayAll(p + "/")
	}
	if c.patternSet && !c.matches(out) {
		return 0
	}
	if c.nameOnly {
		fmt.Fprintf(c.stdout, "%s\n", out)
		return 0
	}
	value, ok := c.recorded(c.dottedKey(p))
	if ok {
		value += "\n"
	} else {
		b, err := os.ReadFile(p)
		switch {
		case errors.Is(err, syscall.ENOENT):
			if !c.ignoreError {
				c.warnx("\"%s\" is an unknown key", out)
				return 1
			}
			return 0
		case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
			c.warnx("permission denied on key '%s'", out)
			return 1
		case errors.Is(err, syscall.EIO): // stable_secret under net.ipv6.conf
			return 1
		case errors.Is(err, syscall.EISDIR):
			return c.displayAll(p + "/")
		case err != nil:
			c.warnx("reading key \"%s\"", out)
			return 1
		}
		value = string(b)
	}
	for _, line := range strings.SplitAfter(value, "\n") {
		if line == "" {
			continue
		}
		switch {
		case c.printName:
			fmt.Fprintf(c.stdout, "%s = %s", out, line)
			if !strings.HasSuffix(line, "\n") {
				fmt.Fprintln(c.stdout)
			}
		case !c.printNewline:
			fmt.Fprint(c.stdout, strings.Replace(line, "\n", "", 1))
		default:
			fmt.Fprint(c.stdout, line)
		}
	}
	return 0
}

// deprecatedNames are left out of listings unless --deprecated.
var deprecatedNames = map[string]bool{"base_reachable_time": true, "retrans_time": true}

// displayAll reads every key under dir (ending in /).
func (c *ctl) displayAll(dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		c.warnx("unable to open directory \"%s\"", dir)
		return 1
	}
	rc := 0
	for _, e := range entries {
		if !c.deprecated && deprecatedNames[e.Name()] {
			continue
		}
		p := dir + e.Name()
		fi, err := os.Stat(p)
		switch {
		case err != nil:
			c.warn(err, "cannot stat %s", p)
		case fi.IsDir():
			c.displayAll(p + "/")
		default:
			rc |= c.read(strings.TrimPrefix(p, procSys))
		}
	}
	return rc
}

// write sets the key at p: checked as the kernel would take it, recorded
// on the host, never written.
func (c *ctl) write(p, value string, ignoreFailure bool) int {
	fi, err := os.Stat(p)
	if err != nil {
		if !c.ignoreError {
			c.warn(err, "cannot stat %s", p)
			return 1
		}
		return 0
	}
	if !c.isProcPath(p) {
		return 1
	}
	key := c.dottedKey(p)
	if fi.Mode().Perm()&0o200 == 0 {
		c.warn(syscall.EPERM, "setting key \"%s\"", key)
		return 0
	}
	if fi.IsDir() {
		c.warn(syscall.EISDIR, "setting key \"%s\"", key)
		return 0
	}
	ignoring := ""
	if ignoreFailure {
		ignoring = ", ignoring"
	}
	rc := 0
	if !c.dryRun {
		if geteuid() != 0 {
			c.warnx("permission denied on key \"%s\"%s", key, ignoring)
			if !ignoreFailure {
				rc = 1
			}
		} else {
			v, ok := kernelValue(p, value)
			if !ok {
				c.warn(syscall.EINVAL, "setting key \"%s\"", key)
				return 1
			}
			if err := c.record(key, v); err != nil {
				c.warn(err, "setting key \"%s\"", key)
				return 1
			}
		}
	}
	if rc == 0 && !c.quiet || c.dryRun {
		switch {
		case c.nameOnly:
			fmt.Fprintf(c.stdout, "%s\n", key)
		case c.printName:
			fmt.Fprintf(c.stdout, "%s = %s\n", key, value)
		case c.printNewline:
			fmt.Fprintf(c.stdout, "%s\n", value)
		default:
			fmt.Fprint(c.stdout, value)
		}
	}
	return rc
}

// kernelValue is value as the kernel would keep it for the key at p, and
// whether it would take it: a key whose value is a list of integers takes
// one to as many integers as it has, printed back tab-separated; any
// other (text, or a key that cannot be read) takes the value as it is,
// but not a second line.
func kernelValue(p, value string) (string, bool) {
	if strings.Contains(value, "\n") {
		return "", false
	}
	cur, err := os.ReadFile(p)
	if err != nil {
		return value, true
	}
	have := strings.Fields(string(cur))
	if len(have) == 0 {
		return value, true
	}
	for _, f := range have {
		if _, err := strconv.ParseInt(f, 10, 64); err != nil {
			return value, true
		}
	}
	given := strings.Fields(value)
	if len(given) == 0 || len(given) > len(have) {
		return "", false
	}
	for i, f := range given {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return "", false
		}
		given[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(given, "\t"), true
}

// preload reads the settings of the files name matches (a glob; no
// match: name itself; - is standard input).
func (c *ctl) preload(list *settings, name string) int {
	files, err := filepath.Glob(name)
	if err != nil || len(files) == 0 {
		files = []string{name}
	}
	n := 0
	for _, f := range files {
		var r io.Reader = c.stdin
		if f != "-" {
			fh, err := os.Open(f)
			if err != nil {
				c.warn(err, "cannot open \"%s\"", f)
				return 1
			}
			defer fh.Close()
			r = fh
		}
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				n++
				if len(line) >= 2 {
					if s := c.parseLine(f, n, line); s != nil {
						*list = append(*list, s)
					}
				}
			}
			if err != nil {
				break
			}
		}
	}
	return 0
}

// system reads every system directory's *.conf (the first of a name
// winning), in name order, then /etc/sysctl.conf.
func (c *ctl) system(list *settings) int {
	found := map[string]string{}
	for _, d := range systemDirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if n := e.Name(); len(n) >= 5 && strings.HasSuffix(n, ".conf") && found[n] == "" {
				found[n] = filepath.Join(d, n)
			}
		}
	}
	names := make([]string, 0, len(found))
	for n := range found {
		names = append(names, n)
	}
	sort.Strings(names)
	rc := 0
	for _, n := range names {
		if !c.quiet {
			fmt.Fprintf(c.stdout, "* Applying %s ...\n", found[n])
		}
		rc |= c.preload(list, found[n])
	}
	if fi, err := os.Stat(defaultPreload); err == nil && fi.Mode().IsRegular() {
		if !c.quiet {
			fmt.Fprintf(c.stdout, "* Applying %s ...\n", defaultPreload)
		}
		rc |= c.preload(list, defaultPreload)
	}
	return rc
}

// writeList sets the settings read, in order: a glob on every key it
// matches that no setting names (set or excluded), matching nothing
// silently.
func (c *ctl) writeList(list settings) int {
	rc := 0
	for _, s := range list {
		if s.globExclude {
			continue
		}
		if !strings.ContainsAny(s.path, "*?[") {
			rc |= c.write(s.path, s.value, s.ignoreFailure)
			continue
		}
		matches, err := filepath.Glob(s.path)
		if err != nil {
			continue
		}
		for _, m := range matches {
			if !list.hasPath(m) {
				rc |= c.write(m, s.value, s.ignoreFailure)
			}
		}
	}
	return rc
}
