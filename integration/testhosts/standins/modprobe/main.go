package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"kedge.dev/kedge/integration/testhosts/standins/getopt"
)

// Where the stand-in looks and writes (variables for its tests).
var (
	modulesDir   = "/lib/modules"
	sysModule    = "/sys/module"
	procModules  = "/proc/modules"
	kernelConfig = "/proc/config.gz"
	logFile      = "/var/log/kedge-lab/modprobe.log"
	release      = kernelRelease
	now          = time.Now
)

// options are kmod modprobe's; supported says which the stand-in does.
var options = []getopt.Option{
	{ID: "all", Short: 'a', Long: []string{"all"}},
	{ID: "remove", Short: 'r', Long: []string{"remove"}},
	{ID: "remove-holders", Long: []string{"remove-dependencies", "remove-holders"}},
	{ID: "wait", Short: 'w', Long: []string{"wait"}, Arg: getopt.Required},
	{ID: "resolve-alias", Short: 'R', Long: []string{"resolve-alias"}},
	{ID: "first-time", Long: []string{"first-time"}},
	{ID: "ignore-install", Short: 'i', Long: []string{"ignore-install", "ignore-remove"}},
	{ID: "use-blacklist", Short: 'b', Long: []string{"use-blacklist"}},
	{ID: "force", Short: 'f', Long: []string{"force"}},
	{ID: "force-modversion", Long: []string{"force-modversion"}},
	{ID: "force-vermagic", Long: []string{"force-vermagic"}},
	{ID: "show-depends", Short: 'D', Long: []string{"show-depends"}},
	{ID: "showconfig", Short: 'c', Long: []string{"showconfig", "show-config"}},
	{ID: "show-modversions", Long: []string{"show-modversions", "dump-modversions"}},
	{ID: "show-exports", Long: []string{"show-exports"}},
	{ID: "dry-run", Short: 'n', Long: []string{"dry-run", "show"}},
	{ID: "config", Short: 'C', Long: []string{"config"}, Arg: getopt.Required},
	{ID: "dirname", Short: 'd', Long: []string{"dirname"}, Arg: getopt.Required},
	{ID: "set-version", Short: 'S', Long: []string{"set-version"}, Arg: getopt.Required},
	{ID: "syslog", Short: 's', Long: []string{"syslog"}},
	{ID: "quiet", Short: 'q', Long: []string{"quiet"}},
	{ID: "verbose", Short: 'v', Long: []string{"verbose"}},
	{ID: "version", Short: 'V', Long: []string{"version"}},
	{ID: "help", Short: 'h', Long: []string{"help"}},
}

var supported = map[string]bool{"all": true, "first-time": true, "dry-run": true, "quiet": true, "verbose": true}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// flags are the options given.
type flags struct {
	all, dryRun, quiet, verbose, firstTime bool
}

func run(args []string, stdout, stderr io.Writer) int {
	items, names := getopt.Parse(args, options)
	var f flags
	for _, it := range items {
		switch {
		case it.Err != "":
			fmt.Fprintf(stderr, "modprobe: %s\n", it.Err)
			return 1
		case !supported[it.ID]:
			fmt.Fprintf(stderr, "modprobe: ERROR: %s: the test world's modprobe stand-in does not do this (it only checks and records loads)\n", it.Name)
			return 1
		}
		switch it.ID {
		case "all":
			f.all = true
		case "dry-run":
			f.dryRun = true
		case "quiet":
			f.quiet = true
		case "verbose":
			f.verbose = true
		case "first-time":
			f.firstTime = true
		}
	}
	logf := func(level, format string, a ...any) {
		if !f.quiet {
			fmt.Fprintf(stderr, "modprobe: "+level+": "+format+"\n", a...)
		}
	}
	if len(names) == 0 {
		logf("ERROR", "missing parameters. See -h.")
		return 1
	}
	if !f.all && len(names) > 1 {
		logf("ERROR", "%s: the test world's modprobe stand-in takes no module parameters", strings.Join(names[1:], " "))
		return 1
	}
	k := newKernel()
	rc := 0
	for _, name := range names {
		m, ok := k.lookup(name)
		if !ok {
			logf("FATAL", "Module %s not found in directory %s", name, k.dir)
			rc = 1
			continue
		}
		if f.firstTime && m.state != stateModule {
			logf("ERROR", "could not insert '%s': Module already in kernel", m.name)
			rc = 1
			continue
		}
		if f.verbose && m.state == stateModule {
			// As modprobe -v: a module already in the kernel (built in
			// or loaded) is not inserted, and not shown.
			fmt.Fprintf(stdout, "insmod %s\n", m.path)
		}
		if f.dryRun {
			continue
		}
		if err := record(m); err != nil {
			logf("ERROR", "could not insert '%s': the stand-in cannot record it: %v", m.name, err)
			rc = 1
		}
	}
	return rc
}

// A module's state in the running kernel.
const (
	stateBuiltin = "builtin"
	stateLoaded  = "loaded"
	stateModule  = "insmod"
)

type module struct {
	name  string // with '_' for '-'
	state string
	path  string // stateModule: the file the real modprobe would insert
}

// kernel is what the stand-in knows of the running kernel's modules.
type kernel struct {
	dir     string // /lib/modules/RELEASE
	hasDir  bool
	builtin map[string]bool
	modules map[string]string // name: path
	aliases [][2]string       // pattern, module
	loaded  map[string]bool
	config  map[string]string // CONFIG_X: y, m (only without dir)
}

func newKernel() *kernel {
	k := &kernel{dir: filepath.Join(modulesDir, release()), builtin: map[string]bool{}, modules: map[string]string{}, loaded: map[string]bool{}}
	if fi, err := os.Stat(k.dir); err == nil && fi.IsDir() {
		k.hasDir = true
		eachLine(filepath.Join(k.dir, "modules.builtin"), func(l string) {
			k.builtin[moduleName(l)] = true
		})
		eachLine(filepath.Join(k.dir, "modules.dep"), func(l string) {
			p, _, _ := strings.Cut(l, ":")
			if p = strings.TrimSpace(p); p != "" {
				if !filepath.IsAbs(p) {
					p = filepath.Join(k.dir, p)
				}
				k.modules[moduleName(p)] = p
			}
		})
		eachLine(filepath.Join(k.dir, "modules.alias"), func(l string) {
			if f := strings.Fields(l); len(f) == 3 && f[0] == "alias" {
				k.aliases = append(k.aliases, [2]string{normalize(f[1]), normalize(f[2])})
			}
		})
	} else {
		k.config = readConfig(kernelConfig)
	}
	eachLine(procModules, func(l string) {
		if f := strings.Fields(l); len(f) > 0 {
			k.loaded[normalize(f[0])] = true
		}
	})
	return k
}

// lookup finds name as modprobe would: a module, then an alias.
func (k *kernel) lookup(name string) (module, bool) {
	n := normalize(name)
	if m, ok := k.find(n); ok {
		return m, true
	}
	for _, a := range k.aliases {
		if ok, _ := path.Match(a[0], n); ok {
			if m, ok := k.find(a[1]); ok {
				return m, true
			}
		}
	}
	return module{}, false
}

func (k *kernel) find(n string) (module, bool) {
	switch {
	case k.loaded[n]:
		return module{name: n, state: stateLoaded}, true
	case k.builtin[n]:
		return module{name: n, state: stateBuiltin}, true
	case k.modules[n] != "":
		return module{name: n, state: stateModule, path: k.modules[n]}, true
	case k.hasDir:
		return module{}, false
	}
	// No modules directory for the running kernel: what the kernel itself
	// shows.
	if fi, err := os.Stat(filepath.Join(sysModule, n)); err == nil && fi.IsDir() {
		return module{name: n, state: stateBuiltin}, true
	}
	if opt, ok := builtinOption[n]; ok && k.config[opt] == "y" {
		return module{name: n, state: stateBuiltin}, true
	}
	return module{}, false
}

// normalize is kmod's: '-' and '_' are the same in module names.
func normalize(name string) string { return strings.ReplaceAll(name, "-", "_") }

// moduleName is the module a modules.dep or modules.builtin path names:
// kernel/net/bridge/br_netfilter.ko.xz is br_netfilter.
func moduleName(p string) string {
	b := path.Base(strings.TrimSpace(p))
	if i := strings.Index(b, ".ko"); i >= 0 {
		b = b[:i]
	}
	return normalize(b)
}

func eachLine(file string, fn func(string)) {
	f, err := os.Open(file)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && l[0] != '#' {
			fn(l)
		}
	}
}

func kernelRelease() string {
	var u syscall.Utsname
	if syscall.Uname(&u) != nil {
		return ""
	}
	var b strings.Builder
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return b.String()
}

// record appends the load to the host's log.
func record(m module) error {
	state := m.state
	if m.state == stateModule {
		state += ":" + m.path
	}
	if err := os.MkdirAll(filepath.Dir(logFile), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(logFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s %s %s\n", now().UTC().Format(time.RFC3339), m.name, state)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
