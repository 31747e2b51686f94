package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"syscall"

	"kedge.dev/kedge/integration/testhosts/standins/getopt"
)

// Where the stand-in reads and records (variables for its tests).
var (
	procSys        = "/proc/sys/"
	stateFile      = "/var/lib/kedge-lab/sysctl.conf"
	defaultPreload = "/etc/sysctl.conf"
	systemDirs     = []string{"/etc/sysctl.d", "/run/sysctl.d", "/usr/local/lib/sysctl.d", "/usr/lib/sysctl.d", "/lib/sysctl.d"}
	geteuid        = os.Geteuid
)

// options are procps-ng sysctl's ("bneNwfp::qoxaAXr:Vdh" and its long
// options).
var options = []getopt.Option{
	{ID: "all", Short: 'a', Long: []string{"all"}},
	{ID: "all", Short: 'A'},
	{ID: "all", Short: 'X'},
	{ID: "deprecated", Long: []string{"deprecated"}},
	{ID: "dry-run", Long: []string{"dry-run"}},
	{ID: "binary", Short: 'b', Long: []string{"binary"}},
	{ID: "ignore", Short: 'e', Long: []string{"ignore"}},
	{ID: "names", Short: 'N', Long: []string{"names"}},
	{ID: "values", Short: 'n', Long: []string{"values"}},
	{ID: "load", Short: 'p', Long: []string{"load"}, Arg: getopt.Optional},
	{ID: "load", Short: 'f'},
	{ID: "quiet", Short: 'q', Long: []string{"quiet"}},
	{ID: "write", Short: 'w', Long: []string{"write"}},
	{ID: "system", Long: []string{"system"}},
	{ID: "pattern", Short: 'r', Long: []string{"pattern"}, Arg: getopt.Required},
	{ID: "help", Short: 'h', Long: []string{"help"}},
	{ID: "help", Short: 'd'},
	{ID: "version", Short: 'V', Long: []string{"version"}},
	{ID: "nothing", Short: 'o'},
	{ID: "nothing", Short: 'x'},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr) & 0xff)
}

// ctl is one run: procps's globals.
type ctl struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	printName      bool
	printNewline   bool
	ignoreError    bool
	quiet          bool
	dryRun         bool
	nameOnly       bool
	deprecated     bool
	pattern        *regexp.Regexp
	patternSet     bool
	state          *state
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) (rc int) {
	c := &ctl{stdin: stdin, stdout: stdout, stderr: stderr, printName: true, printNewline: true}
	defer func() {
		if err := c.state.close(); err != nil {
			c.warnx("recording the settings in %s: %v", stateFile, err)
			rc |= 1
		}
	}()
	if len(args) == 0 {
		c.usage(stderr)
		return 1
	}
	items, operands := getopt.Parse(args, options)
	writeMode, displayAll, load := false, false, false
	loadFile, hasLoadFile := "", false
	for _, it := range items {
		if it.Err != "" {
			fmt.Fprintf(stderr, "sysctl: %s\n", it.Err)
			c.usage(stdout)
			return 0
		}
		switch it.ID {
		case "binary":
			c.printNewline = false
			c.printName = false
		case "values":
			c.printName = false
		case "ignore":
			c.ignoreError = true
		case "names":
			c.nameOnly = true
		case "write":
			writeMode = true
		case "load":
			load = true
			if it.HasArg {
				loadFile, hasLoadFile = it.Value, true
			}
		case "quiet":
			c.quiet = true
		case "all":
			displayAll = true
		case "deprecated":
			c.deprecated = true
		case "system":
			// As procps: at once, with the options before it.
			c.ignoreError = true
			var list settings
			rc := c.system(&list)
			return rc | c.writeList(list)
		case "dry-run":
			c.dryRun = true
		case "pattern":
			c.patternSet = true
			c.pattern, _ = regexp.CompilePOSIX(it.Value) // one that does not compile matches nothing
		case "version":
			fmt.Fprintln(stdout, "sysctl from procps-ng 4.0 (the Kedge test world's stand-in: it never writes /proc/sys)")
			return 0
		case "help":
			c.usage(stdout)
			return 0
		}
	}
	if displayAll {
		return c.displayAll(procSys)
	}
	if load {
		var list settings
		ret := 0
		switch {
		case hasLoadFile:
			ret |= c.preload(&list, loadFile)
		case len(operands) == 0:
			ret |= c.preload(&list, defaultPreload)
		}
		for _, f := range operands {
			ret |= c.preload(&list, f)
		}
		return ret | c.writeList(list)
	}
	if len(operands) == 0 {
		c.warnx("no variables specified\nTry `sysctl --help' for more information.")
		return 1
	}
	if c.nameOnly && c.quiet {
		c.warnx("options -N and -q cannot coexist\nTry `sysctl --help' for more information.")
		return 1
	}
	for _, a := range operands {
		if writeMode || strings.Contains(a, "=") {
			if s := c.parseLine("command line", 0, a); s != nil {
				rc |= c.write(s.path, s.value, s.ignoreFailure)
			} else {
				rc |= 1
			}
		} else {
			rc += c.read(a)
		}
	}
	return rc
}

func (c *ctl) usage(w io.Writer) {
	fmt.Fprint(w, `
Usage:
 sysctl [options] [variable[=value] ...]

The Kedge test world's stand-in for procps-ng's sysctl: settings are
recorded on this host (`+stateFile+`), never written to /proc/sys.

Options: -a -A -X --deprecated --dry-run -b -e -N -n -p[FILE] -f --system
         -r EXPRESSION -q -w -o -x -d -h -V (as procps-ng's sysctl)
`)
}

// warnx prints a message as procps's xwarnx.
func (c *ctl) warnx(format string, a ...any) {
	fmt.Fprintf(c.stderr, "sysctl: "+format+"\n", a...)
}

// warn prints a message and the error's description, as procps's xwarn
// (strerror's words).
func (c *ctl) warn(err error, format string, a ...any) {
	fmt.Fprintf(c.stderr, "sysctl: %s: %s\n", fmt.Sprintf(format, a...), strerror(err))
}

func strerror(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		s := errno.Error()
		return strings.ToUpper(s[:1]) + s[1:]
	}
	return err.Error()
}

func (c *ctl) matches(name string) bool {
	return c.pattern != nil && c.pattern.MatchString(name)
}

// slashdot turns a key's separators as procps does: when its first
// separator is old, every old becomes new and every new old (so the other
// separator stands for itself: net.ipv4.conf.eth0/1.rp_filter is
// net/ipv4/conf/eth0.1/rp_filter); when it is new already, nothing
// changes. It warns of a repeated separator.
func (c *ctl) slashdot(s string, old, new byte) string {
	i := strings.IndexAny(s, "/.")
	if i < 0 || s[i] == new {
		return s
	}
	b := []byte(s)
	warned := false
	for ; i < len(b); i++ {
		ch := b[i]
		if ch != '/' && ch != '.' {
			continue
		}
		if !warned && i+1 < len(b) && (b[i+1] == '/' || b[i+1] == '.') {
			c.warnx("separators should not be repeated: %s", s[i:])
			warned = true
		}
		switch ch {
		case old:
			b[i] = new
		case new:
			b[i] = old
		}
	}
	return string(b)
}
