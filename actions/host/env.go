package host

import (
	"fmt"
	"regexp"
	"strings"
)

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// codeEnv are variables the shell, sudo's child or the dynamic loader
// read to run code or to change what a command means: a runbook that sets
// one from a value hands whoever shapes the value (a chat user, a webhook
// caller, a host's output) a way to run code as root.
var codeEnv = map[string]bool{
	"BASH_ENV": true, "ENV": true, "PS4": true, "PS1": true, "PROMPT_COMMAND": true,
	"SHELLOPTS": true, "BASHOPTS": true, "IFS": true, "PATH": true, "CDPATH": true,
	"GLOBIGNORE": true, "BASH_XTRACEFD": true, "HOSTALIASES": true, "GCONV_PATH": true,
	"LOCPATH": true, "NLSPATH": true, "PERL5OPT": true, "PERL5LIB": true, "PYTHONSTARTUP": true,
	"PYTHONPATH": true, "NODE_OPTIONS": true, "RUBYOPT": true,
}

// CheckEnvName refuses a name host.run's env may not set: one that is no
// variable name, KEDGE_OUTPUT (host.run's own), and the variables the
// shell or the loader read to run code (LD_*, BASH_FUNC_*, BASH_ENV, ENV,
// PS4, SHELLOPTS, IFS, PATH and the like).
func CheckEnvName(name string) error {
	switch {
	case !envNameRE.MatchString(name):
		return fmt.Errorf("env name %q is not a variable name", name)
	case name == "KEDGE_OUTPUT":
		return fmt.Errorf("env cannot set KEDGE_OUTPUT: host.run sets it")
	case codeEnv[name] || strings.HasPrefix(name, "LD_") || strings.HasPrefix(name, "BASH_FUNC_"):
		return fmt.Errorf("env cannot set %s: the shell or the loader reads it to run code (a value there runs as root)", name)
	}
	return nil
}
