package runbooks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The attacker is a runbook author whose runbook a chat user or webhook
// may start: every way of building host.run's shell text from a value is
// refused at validation, and run-command (granted by name only) may not be
// handed a command built from one either.
func TestShellTextIsLiteral(t *testing.T) {
	cluster := testCluster(t)
	dir := t.TempDir()
	write := func(name, steps string) string {
		p := filepath.Join(dir, name+".yaml")
		doc := "apiVersion: kedge/v1\nkind: Runbook\nmetadata: {name: " + name + "}\nparams:\n  message: {type: string, required: true}\nsteps:\n" + steps
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	lib := &Library{Builtin: Builtin}
	for _, c := range []struct {
		name, steps, want string
	}{
		{"one-expression", `  - {id: say, action: host.run, on: worker-1, with: {command: "${ 'echo ' + params.message }"}}
`, `one-expression.yaml:7:63: step say: host.run command interpolates ${ 'echo ' + params.message } into shell text`},
		{"via-run-command", `  - {id: say, runbook: run-command, with: {nodes: worker-1, command: "${ 'echo ' + params.message }"}}
`, `via-run-command.yaml:7:70: step say: runbook run-command runs its param command as a root shell: pass it literal text, not "${ 'echo ' + params.message }"`},
		{"env-names-from-a-value", `  - {id: say, action: host.run, on: worker-1, with: {command: 'echo "$MESSAGE"', env: "${ {'BASH_ENV': params.message} }"}}
`, `env-names-from-a-value.yaml:7:87: step say: host.run env must be a map written out (NAME: value), not "${ {'BASH_ENV': params.message} }": an expression would choose the variables' names`},
		{"env-name-an-expression", `  - {id: say, action: host.run, on: worker-1, with: {command: 'echo "$MESSAGE"', env: {"${ params.message }": x}}}
`, `env-name-an-expression.yaml:7:88: step say: host.run env name "${ params.message }" is an expression`},
		{"env-bash-env", `  - {id: say, action: host.run, on: worker-1, with: {command: 'echo hi', env: {BASH_ENV: "${ params.message }"}}}
`, `env-bash-env.yaml:7:80: step say: host.run env: env cannot set BASH_ENV: the shell or the loader reads it to run code`},
		{"env-ld-preload", `  - {id: say, action: host.run, on: worker-1, with: {command: 'echo hi', env: {LD_PRELOAD: "${ params.message }"}}}
`, `env-ld-preload.yaml:7:80: step say: host.run env: env cannot set LD_PRELOAD`},
		{"env-ps4", `  - {id: say, action: host.run, on: worker-1, with: {command: 'set -x; true', env: {PS4: "${ params.message }"}}}
`, `env-ps4.yaml:7:85: step say: host.run env: env cannot set PS4`},
		{"param-file-run", `  - {id: write, action: host.write-file, on: worker-1, with: {path: /tmp/say.sh, content: "${ params.message }"}}
  - {id: say, needs: [write], action: host.run, on: worker-1, with: {command: "sh /tmp/say.sh"}}
`, `param-file-run.yaml:7:91: step write: writes params.message into /tmp/say.sh, which a host.run of this runbook runs as shell text`},
		{"param-unit", `  - {id: write, action: host.write-file, on: worker-1, with: {path: /etc/systemd/system/say.service, content: "[Service]\nExecStart=${ params.message }"}}
`, `param-unit.yaml:7:111: step write: writes params.message into /etc/systemd/system/say.service, where files run as code`},
		{"rollout-run-command", `  - {id: say, runbook: run-command, rollout: {over: "${ ['worker-1'] }"}, with: {nodes: "${ item }", command: "echo ${ item }"}}
`, `rollout-run-command.yaml:7:111: step say: runbook run-command runs its param command as a root shell: pass it literal text, not "echo ${ item }"`},
	} {
		_, err := lib.LoadFile(write(c.name, c.steps), cluster)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\nwant %s", c.name, err, c.want)
		}
	}
	// Literal text in run-command's command, values in env elsewhere: fine.
	for name, steps := range map[string]string{
		"literal-run-command": `  - {id: say, runbook: run-command, with: {nodes: worker-1, command: "uptime"}}
`,
		"env": `  - {id: say, action: host.run, on: worker-1, with: {command: 'echo "$MESSAGE"', env: {MESSAGE: "${ params.message }"}}}
`,
	} {
		if _, err := lib.LoadFile(write(name, steps), cluster); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// run-command itself passes its param through whole: it is the one
	// root shell by design.
	if _, err := lib.Load("run-command", cluster); err != nil {
		t.Errorf("run-command: %v", err)
	}
	// A runbook of the author's that takes run-command's name gets none
	// of its exception: passing its own param whole into shell text (say,
	// a "message" a chat user types) is refused like anywhere else.
	own := t.TempDir()
	ownDoc := "apiVersion: kedge/v1\nkind: Runbook\nmetadata: {name: run-command}\nparams:\n  message: {type: string, required: true}\nsteps:\n" +
		`  - {id: say, action: host.run, on: worker-1, with: {command: "${ params.message }"}}` + "\n"
	if err := os.WriteFile(filepath.Join(own, "run-command.yaml"), []byte(ownDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Library{Dirs: []string{own}}).Load("run-command", cluster); err == nil || !strings.Contains(err.Error(), "interpolates ${ params.message } into shell text") {
		t.Errorf("an author's runbook named run-command passing a param whole into shell text: %v", err)
	}
	// A byte-for-byte copy of the shipped file is the shipped runbook.
	shipped, err := os.ReadFile("builtin/run-command.yaml")
	if err != nil {
		t.Fatal(err)
	}
	copyDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(copyDir, "run-command.yaml"), shipped, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Library{Dirs: []string{copyDir}}).Load("run-command", cluster); err != nil {
		t.Errorf("a copy of the shipped run-command: %v", err)
	}
	// Nor may such a runbook build its command from a param.
	shadow := t.TempDir()
	doc := "apiVersion: kedge/v1\nkind: Runbook\nmetadata: {name: run-command}\nparams:\n  message: {type: string, required: true}\nsteps:\n" +
		`  - {id: say, action: host.run, on: worker-1, with: {command: "${ 'echo ' + params.message }"}}` + "\n"
	if err := os.WriteFile(filepath.Join(shadow, "run-command.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = (&Library{Dirs: []string{shadow}}).Load("run-command", cluster)
	if err == nil || !strings.Contains(err.Error(), "interpolates ${ 'echo ' + params.message } into shell text") {
		t.Errorf("a run-command building its command: %v", err)
	}
}

// The examples shipped with Kedge validate.
func TestExamplesAreValid(t *testing.T) {
	files, _ := filepath.Glob("../examples/*.yaml")
	if len(files) == 0 {
		t.Fatal("no examples")
	}
	for _, f := range files {
		if _, err := (&Library{Builtin: Builtin}).LoadFile(f, nil); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
