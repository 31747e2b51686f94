package starter

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// interspersed moves a subcommand's flags before its arguments, so
// `kedge run FILE --inventory X` works as operators type it (urfave/cli v2
// stops parsing flags at the first argument).
func interspersed(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	cmd := app.Command(args[1])
	if cmd == nil {
		return args
	}
	prefix := []string{args[0], args[1]}
	rest := args[2:]
	for len(rest) > 0 && len(cmd.Subcommands) > 0 {
		sub := cmd.Command(rest[0])
		if sub == nil {
			break
		}
		cmd, prefix, rest = sub, append(prefix, rest[0]), rest[1:]
	}
	takesValue := map[string]bool{}
	for _, f := range cmd.Flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			takesValue[n] = !isBool
		}
	}
	var flags, positional []string
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			positional = append(positional, rest[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			positional = append(positional, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if takesValue[name] && i+1 < len(rest) {
			i++
			flags = append(flags, rest[i])
		}
	}
	out := append(prefix, flags...)
	if len(positional) > 0 {
		out = append(out, "--")
		out = append(out, positional...)
	}
	return out
}
