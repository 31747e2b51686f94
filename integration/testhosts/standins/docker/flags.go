package main

import (
	"fmt"
	"strings"
)

// flagSpec is a subcommand's flags: long name -> takes a value; shorts
// maps a one-letter flag to its long name.
type flagSpec struct {
	valued map[string]bool
	shorts map[string]string
	// interspersed: flags may follow positional arguments (ps, rm, ...);
	// run stops at the image.
	interspersed bool
}

// flags is what was given: long name -> values in order (bools: "true" or
// "false").
type flags map[string][]string

func (f flags) has(name string) bool { return len(f[name]) > 0 && f.last(name) != "false" }
func (f flags) last(name string) string {
	if v := f[name]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

// errUnknownFlag is a flag the subcommand does not have.
type errUnknownFlag string

func (e errUnknownFlag) Error() string { return "unknown flag: " + string(e) }

// errFlagValue is a flag that needs a value and has none.
type errFlagValue string

func (e errFlagValue) Error() string { return "flag needs an argument: " + string(e) }

// parse parses args the way the real programs' flag library does.
func (s flagSpec) parse(args []string) (flags, []string, error) {
	got := flags{}
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return got, append(pos, args[i+1:]...), nil
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			valued, ok := s.valued[name]
			if !ok {
				return nil, nil, errUnknownFlag("--" + name)
			}
			if valued && !hasVal {
				if i+1 >= len(args) {
					return nil, nil, errFlagValue("--" + name)
				}
				i++
				val = args[i]
			}
			if !valued {
				if !hasVal {
					val = "true"
				} else if val != "true" && val != "false" {
					return nil, nil, fmt.Errorf("invalid argument %q for %q flag: strconv.ParseBool: parsing %q: invalid syntax", val, "--"+name, val)
				}
			}
			got[name] = append(got[name], val)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			// -d, -dit, -e VAL, -eVAL
			for j := 1; j < len(a); j++ {
				name, ok := s.shorts[a[j:j+1]]
				if !ok {
					return nil, nil, fmt.Errorf("unknown shorthand flag: %q in %s", a[j:j+1], a)
				}
				if !s.valued[name] {
					got[name] = append(got[name], "true")
					continue
				}
				val := a[j+1:]
				val = strings.TrimPrefix(val, "=")
				if val == "" {
					if i+1 >= len(args) {
						return nil, nil, errFlagValue("-" + a[j:j+1])
					}
					i++
					val = args[i]
				}
				got[name] = append(got[name], val)
				break
			}
		default:
			if !s.interspersed {
				return got, append(pos, args[i:]...), nil
			}
			pos = append(pos, a)
		}
	}
	return got, pos, nil
}

// The run flags: what the stand-in does with each is in run.go. Flags
// Kedge's and Typhoon's units use, and the common ones a unit might.
var runSpec = flagSpec{
	valued: map[string]bool{
		"name": true, "volume": true, "env": true, "env-file": true, "entrypoint": true,
		"network": true, "net": true, "pid": true, "ulimit": true, "workdir": true, "user": true,
		"hostname": true, "log-driver": true, "log-opt": true, "label": true, "restart": true,
		"security-opt": true, "cap-add": true, "cap-drop": true, "stop-timeout": true,
		"stop-signal": true, "tmpfs": true, "cgroupns": true, "ipc": true, "pull": true,
		"rm": false, "detach": false, "privileged": false, "interactive": false, "tty": false,
		"init": false, "read-only": false, "quiet": false,
	},
	shorts: map[string]string{
		"v": "volume", "e": "env", "d": "detach", "w": "workdir", "u": "user", "h": "hostname",
		"l": "label", "i": "interactive", "t": "tty", "q": "quiet",
	},
}

var (
	psSpec = flagSpec{interspersed: true,
		valued: map[string]bool{"all": false, "quiet": false, "no-trunc": false, "format": true},
		shorts: map[string]string{"a": "all", "q": "quiet"}}
	logsSpec = flagSpec{interspersed: true,
		valued: map[string]bool{"follow": false, "tail": true, "timestamps": false},
		shorts: map[string]string{"f": "follow", "n": "tail", "t": "timestamps"}}
	stopSpec = flagSpec{interspersed: true,
		valued: map[string]bool{"time": true, "timeout": true},
		shorts: map[string]string{"t": "time"}}
	killSpec = flagSpec{interspersed: true,
		valued: map[string]bool{"signal": true},
		shorts: map[string]string{"s": "signal"}}
	rmSpec = flagSpec{interspersed: true,
		valued: map[string]bool{"force": false, "volumes": false, "ignore": false},
		shorts: map[string]string{"f": "force", "v": "volumes", "i": "ignore"}}
	pullSpec = flagSpec{interspersed: true,
		valued: map[string]bool{"quiet": false, "all-tags": false, "platform": true},
		shorts: map[string]string{"q": "quiet", "a": "all-tags"}}
	imagesSpec = flagSpec{interspersed: true,
		valued: map[string]bool{"quiet": false, "digests": false, "no-trunc": false, "all": false},
		shorts: map[string]string{"q": "quiet", "a": "all"}}
	inspectSpec = flagSpec{interspersed: true,
		valued: map[string]bool{"format": true},
		shorts: map[string]string{"f": "format"}}
	noFlags = flagSpec{interspersed: true, valued: map[string]bool{}, shorts: map[string]string{}}
)
