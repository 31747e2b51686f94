package sshhost

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/activities/sshpool"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
)

func TestQuoteSurvivesTheShell(t *testing.T) {
	for _, s := range []string{"plain", "with space", `it's "quoted"`, "$HOME `x` $(id)", "new\nline", ""} {
		out, err := exec.Command("sh", "-c", "printf %s "+quote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("quote(%q) came back as %q (%v)", s, out, err)
		}
	}
}

func TestTailBufferKeepsTheTail(t *testing.T) {
	b := &tailBuffer{limit: 10}
	for range 100 {
		b.Write([]byte("0123456789"))
	}
	b.Write([]byte("END"))
	if got := b.String(); got != "3456789END" || !b.truncated() || b.total() != 1003 {
		t.Errorf("got %q truncated=%v total=%d", got, b.truncated(), b.total())
	}
}

func TestParseOutputs(t *testing.T) {
	got := parseOutputs("a=1\nnot a pair\nb=x=y\n\nempty=\n")
	if len(got) != 3 || got["a"] != "1" || got["b"] != "x=y" || got["empty"] != "" {
		t.Errorf("got %v", got)
	}
	if parseOutputs("") != nil {
		t.Error("no outputs should be nil")
	}
}

func TestErrorsAreClassifiedOnce(t *testing.T) {
	cases := []struct {
		err          error
		typ          string
		nonRetryable bool
	}{
		{&sshpool.HostKeyError{Node: "w1", Presented: "SHA256:a", Expected: []string{"SHA256:b"}}, errtype.HostKeyMismatch, true},
		{errors.Join(errors.New("x"), sshpool.ErrHostUnknown), errtype.HostUnknown, true},
		{errors.Join(errors.New("x"), sshpool.ErrAuthFailed), errtype.AuthFailed, true},
		{errors.Join(errors.New("x"), sshpool.ErrUnreachable), errtype.HostUnreachable, false},
		{errors.Join(errors.New("x"), sshpool.ErrConnectionLost), errtype.ConnectionLost, false},
		{errors.Join(errors.New("x"), sshpool.ErrPrivilege), errtype.PrivilegeEscalationFailed, true},
		{errors.Join(errors.New("x"), sshpool.ErrConfig), errtype.InvalidInput, true},
		{errors.New("read: broken pipe"), errtype.ConnectionLost, false},
		{invalid("bad"), errtype.InvalidInput, true},
		{&typedError{typ: errtype.CommandFailed, msg: "exit 1"}, errtype.CommandFailed, false},
	}
	for _, c := range cases {
		var app *temporal.ApplicationError
		err := toTemporal(c.err)
		if !errors.As(err, &app) || !errtype.Is(err, c.typ) || app.NonRetryable() != c.nonRetryable {
			t.Errorf("%v: got %v", c.err, app)
		}
	}
	mismatch := (&sshpool.HostKeyError{Node: "w1", Address: "10.0.0.1:22", Presented: "SHA256:new", Expected: []string{"SHA256:old"}, File: "kh"}).Error()
	for _, want := range []string{"w1", "SHA256:new", "SHA256:old"} {
		if !strings.Contains(mismatch, want) {
			t.Errorf("mismatch message %q lacks %q", mismatch, want)
		}
	}
}

func TestBackupNamesAreFlatAndDistinct(t *testing.T) {
	a := backupName("/etc/systemd/system/kubelet.service.d/10-image.conf", "0123456789abcdef0123")
	b := backupName("/etc/systemd/system/kubelet.service.d/10-image.conf", "fedcba9876543210ffff")
	if strings.Contains(a, "/") || a == b {
		t.Errorf("backup names %q %q", a, b)
	}
}

func TestInputValidation(t *testing.T) {
	a := &Activities{}
	if _, err := a.run(t.Context(), host.RunInput{}); err == nil || !strings.Contains(err.Error(), "exactly one of command and script") {
		t.Errorf("run without command: %v", err)
	}
	if _, err := a.run(t.Context(), host.RunInput{Command: "x", Env: map[string]string{"BAD-NAME": "1"}}); err == nil {
		t.Error("bad env name accepted")
	}
	if _, err := a.writeFile(t.Context(), host.WriteFileInput{Path: "relative"}); err == nil {
		t.Error("relative path accepted")
	}
	if _, err := a.writeFile(t.Context(), host.WriteFileInput{Path: "/x", Mode: "0999"}); err == nil {
		t.Error("bad mode accepted")
	}
	if _, err := a.systemd(t.Context(), host.SystemdInput{Unit: "x; rm -rf /"}); err == nil {
		t.Error("unit name with shell metacharacters accepted")
	}
}

func TestParseFacts(t *testing.T) {
	out := `@unit kubelet.service
LoadState=loaded
ActiveState=active
UnitFileState=disabled
FragmentPath=/etc/systemd/system/kubelet.service
DropInPaths=/etc/systemd/system/kubelet.service.d/10-image.conf /etc/systemd/system/kubelet.service.d/20-x.conf
Environment=KUBELET_IMAGE=quay.io/poseidon/kubelet:v1.36.1 "EXTRA=a b"
@unit kubelet.path
LoadState=loaded
ActiveState=active
UnitFileState=enabled
FragmentPath=/etc/systemd/system/kubelet.path
DropInPaths=
Environment=
@unit etcd-member.service
LoadState=not-found
ActiveState=inactive
UnitFileState=
FragmentPath=
DropInPaths=
Environment=
@hostname
node1.mercury.example
`
	f, err := parseFacts(out)
	if err != nil {
		t.Fatal(err)
	}
	k := f.Units["kubelet.service"]
	if f.Hostname != "node1.mercury.example" || !k.Loaded() || k.UnitFileState != "disabled" ||
		len(k.DropInPaths) != 2 || k.DropInPaths[1] != "/etc/systemd/system/kubelet.service.d/20-x.conf" ||
		len(k.Environment) != 2 || k.Environment[1] != "EXTRA=a b" {
		t.Errorf("facts %+v", f)
	}
	if f.Units["etcd-member.service"].Loaded() || f.Units["kubelet.path"].UnitFileState != "enabled" {
		t.Errorf("facts %+v", f)
	}
	if _, err := parseFacts(strings.SplitN(out, "@unit etcd-member.service", 2)[0]); err == nil {
		t.Error("a unit missing from the output was accepted")
	}
}
