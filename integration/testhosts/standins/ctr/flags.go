package main

import (
	"errors"
	"flag"
	"io"
	"strconv"
	"strings"
	"time"
)

// kind is how a flag takes its value.
type kind int

const (
	boolFlag     kind = iota // -q, -q=false
	stringFlag               // -n k8s.io, -n=k8s.io
	durationFlag             // --timeout 5s
	sliceFlag                // --platform P, repeatable
)

// cliFlag is one flag of a ctr command as urfave/cli declares it: its
// names (the long one first), how it takes a value, and whether the
// stand-in does anything with it. An unsupported flag is one real ctr has
// and the stand-in refuses.
type cliFlag struct {
	names     []string
	kind      kind
	supported bool
}

// given is what the command line set: a flag's first name -> its values
// in order ("true"/"false" for a bool).
type given map[string][]string

func (g given) has(name string) bool {
	v := g[name]
	return len(v) > 0 && v[len(v)-1] == "true"
}

func (g given) last(name, def string) string {
	if v := g[name]; len(v) > 0 {
		return v[len(v)-1]
	}
	return def
}

// errUnsupported is a flag real ctr has and the stand-in does not.
type errUnsupported string

func (e errUnsupported) Error() string {
	return "flag -" + string(e) + " is not supported by the Kedge test world's ctr stand-in"
}

// value records one name's values into given.
type value struct {
	f    *cliFlag
	into given
}

func (v value) String() string { return "" }

func (v value) IsBoolFlag() bool { return v.f.kind == boolFlag }

func (v value) Set(s string) error {
	switch v.f.kind {
	case boolFlag:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return errors.New("parse error")
		}
		s = strconv.FormatBool(b)
	case durationFlag:
		if _, err := time.ParseDuration(s); err != nil {
			return errors.New("parse error")
		}
	}
	v.into[v.f.names[0]] = append(v.into[v.f.names[0]], s)
	return nil
}

// parseFlags parses args as urfave/cli (v1 and v2) parses a command's
// flags, with Go's flag package: flags end at the first other word, and
// the errors are the package's ("flag provided but not defined: -x").
func parseFlags(defs []cliFlag, args []string) (given, []string, error) {
	got := given{}
	fs := flag.NewFlagSet("ctr", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for i := range defs {
		for _, name := range defs[i].names {
			fs.Var(value{f: &defs[i], into: got}, name, "")
		}
	}
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	visited := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { visited[f.Name] = true })
	for _, d := range defs {
		// urfave/cli refuses a flag given by two of its names.
		var seen []string
		for i := len(d.names) - 1; i >= 0; i-- {
			if visited[d.names[i]] {
				seen = append(seen, d.names[i])
			}
		}
		if len(seen) > 1 {
			return nil, nil, errors.New("Cannot use two forms of the same flag: " + strings.Join(seen[:2], " "))
		}
		if len(seen) == 1 && !d.supported {
			return nil, nil, errUnsupported(seen[0])
		}
	}
	return got, fs.Args(), nil
}

// The flags of each command: what real ctr (1.6 to 2.x) has, and which of
// them the stand-in supports.
var (
	globalFlags = []cliFlag{
		{names: []string{"debug"}, kind: boolFlag, supported: true},
		{names: []string{"address", "a"}, kind: stringFlag, supported: true},
		{names: []string{"timeout"}, kind: durationFlag, supported: true},
		{names: []string{"connect-timeout"}, kind: durationFlag, supported: true},
		{names: []string{"namespace", "n"}, kind: stringFlag, supported: true},
		{names: []string{"help", "h"}, kind: boolFlag},
		{names: []string{"version", "v"}, kind: boolFlag},
	}
	imagesFlags = []cliFlag{
		{names: []string{"help", "h"}, kind: boolFlag},
	}
	lsFlags = []cliFlag{
		{names: []string{"quiet", "q"}, kind: boolFlag, supported: true},
		{names: []string{"help", "h"}, kind: boolFlag},
	}
	pullFlags = []cliFlag{
		{names: []string{"platform"}, kind: sliceFlag, supported: true},
		{names: []string{"all-platforms"}, kind: boolFlag, supported: true},
		{names: []string{"skip-verify", "k"}, kind: boolFlag},
		{names: []string{"plain-http"}, kind: boolFlag},
		{names: []string{"user", "u"}, kind: stringFlag},
		{names: []string{"refresh"}, kind: stringFlag},
		{names: []string{"hosts-dir"}, kind: stringFlag},
		{names: []string{"tlscacert"}, kind: stringFlag},
		{names: []string{"tlscert"}, kind: stringFlag},
		{names: []string{"tlskey"}, kind: stringFlag},
		{names: []string{"http-dump"}, kind: boolFlag},
		{names: []string{"http-trace"}, kind: boolFlag},
		{names: []string{"snapshotter"}, kind: stringFlag},
		{names: []string{"label"}, kind: sliceFlag},
		{names: []string{"all-metadata"}, kind: boolFlag},
		{names: []string{"print-chainid"}, kind: boolFlag},
		{names: []string{"max-concurrent-downloads"}, kind: stringFlag},
		{names: []string{"local"}, kind: boolFlag},
		{names: []string{"help", "h"}, kind: boolFlag},
	}
)
