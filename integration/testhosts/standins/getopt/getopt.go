// Package getopt parses a command line as glibc's getopt_long does, for
// the test world's stand-ins of C programs (modprobe, sysctl), so they
// accept and refuse options exactly as the real programs' parser does:
// options and operands in any order (GNU permutation), "--" ending the
// options, short options clustered (-qn), a short option's argument
// attached or next (-w5, -w 5), an optional one only attached (-pFILE),
// long options abbreviated to any unambiguous prefix, with =VALUE or (a
// required argument) the next word. Errors carry glibc's messages.
//
// It is test infrastructure only.
package getopt

import (
	"fmt"
	"strings"
)

// Arg says whether an option takes an argument.
type Arg int

const (
	// None: no argument.
	None Arg = iota
	// Required: an argument, attached or the next word.
	Required
	// Optional: an argument only when attached (-pFILE, --load=FILE).
	Optional
)

// Option is one option of a program: a short letter, long names, or both;
// options with the same ID are the same option (aliases).
type Option struct {
	ID    string
	Short byte
	Long  []string
	Arg   Arg
}

// Item is one option found on the command line, in order; Err is set
// instead when the word was not a valid option (getopt's '?'), with the
// message glibc prints (without the program name).
type Item struct {
	ID string
	// Name is the option as written (-q, --quiet), for messages.
	Name   string
	Value  string
	HasArg bool
	Err    string
}

// Parse reads args (without the program's name) as getopt_long does:
// the options in order (errors among them, at their place) and the
// operands.
func Parse(args []string, opts []Option) (items []Item, operands []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return items, append(operands, args[i+1:]...)
		case strings.HasPrefix(a, "--"):
			it, used := parseLong(a[2:], args[i+1:], opts)
			items = append(items, it)
			i += used
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				o := findShort(a[j], opts)
				if o == nil {
					items = append(items, Item{Err: fmt.Sprintf("invalid option -- '%c'", a[j])})
					continue
				}
				it := Item{ID: o.ID, Name: "-" + string(a[j])}
				rest := a[j+1:]
				switch {
				case o.Arg == None:
				case rest != "":
					it.Value, it.HasArg = rest, true
					j = len(a)
				case o.Arg == Required && i+1 < len(args):
					i++
					it.Value, it.HasArg = args[i], true
				case o.Arg == Required:
					it = Item{Err: fmt.Sprintf("option requires an argument -- '%c'", a[j])}
				}
				items = append(items, it)
			}
		default:
			operands = append(operands, a)
		}
	}
	return items, operands
}

func findShort(c byte, opts []Option) *Option {
	for i := range opts {
		if opts[i].Short == c && c != 0 {
			return &opts[i]
		}
	}
	return nil
}

// parseLong reads one long option (word without its "--"); used is how
// many of the following words it took (its argument).
func parseLong(word string, next []string, opts []Option) (Item, int) {
	name, value, hasValue := strings.Cut(word, "=")
	type match struct {
		o    *Option
		long string
	}
	var exact *match
	var prefix []match
	for i := range opts {
		for _, l := range opts[i].Long {
			switch {
			case l == name:
				exact = &match{&opts[i], l}
			case strings.HasPrefix(l, name) && name != "":
				prefix = append(prefix, match{&opts[i], l})
			}
		}
	}
	m := exact
	if m == nil && len(prefix) > 0 {
		same := true
		for _, p := range prefix[1:] {
			same = same && p.o.ID == prefix[0].o.ID
		}
		if !same {
			var b strings.Builder
			fmt.Fprintf(&b, "option '--%s' is ambiguous; possibilities:", name)
			for _, p := range prefix {
				fmt.Fprintf(&b, " '--%s'", p.long)
			}
			return Item{Err: b.String()}, 0
		}
		m = &prefix[0]
	}
	if m == nil {
		return Item{Err: fmt.Sprintf("unrecognized option '--%s'", word)}, 0
	}
	it := Item{ID: m.o.ID, Name: "--" + m.long}
	switch {
	case m.o.Arg == None && hasValue:
		return Item{Err: fmt.Sprintf("option '--%s' doesn't allow an argument", m.long)}, 0
	case hasValue:
		it.Value, it.HasArg = value, true
	case m.o.Arg == Required && len(next) > 0:
		it.Value, it.HasArg = next[0], true
		return it, 1
	case m.o.Arg == Required:
		return Item{Err: fmt.Sprintf("option '--%s' requires an argument", m.long)}, 0
	}
	return it, 0
}
