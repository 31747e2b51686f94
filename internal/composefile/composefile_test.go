package composefile

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestInterpolate(t *testing.T) {
	vars := map[string]string{"SET": "value", "EMPTY": "", "DOLLAR": "a$b"}
	for in, want := range map[string]string{
		"${SET}":             "value",
		"${SET:-default}":    "value",
		"${EMPTY:-default}":  "default",
		"${UNSET:-default}":  "default",
		"${UNSET}":           "",
		"x-${SET}/${UNSET}y": "x-value/y",
		"$$HOME":             "$HOME",
		"${DOLLAR}":          "a$b",
	} {
		got, err := Interpolate(in, vars)
		if err != nil || got != want {
			t.Errorf("Interpolate(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"$HOME", "${lower}", "${SET:?required}"} {
		if got, err := Interpolate(bad, vars); err == nil {
			t.Errorf("Interpolate(%q) = %q, want an error", bad, got)
		}
	}
}

func TestMountsAndUnder(t *testing.T) {
	ms, err := Mounts(&Service{Volumes: []string{
		"./deploy/compose:/kedge-setup:ro",
		"${KEDGE_DIR:-./kedge}/tls/ca.pem:/etc/kedge/tls/ca.pem:ro",
		"kedge-state:/var/lib/kedge",
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Mount{
		{Source: "./deploy/compose", Target: "/kedge-setup", Repo: true, ReadOnly: true},
		{Source: "${KEDGE_DIR:-./kedge}/tls/ca.pem", Target: "/etc/kedge/tls/ca.pem", ReadOnly: true},
		{Source: "kedge-state", Target: "/var/lib/kedge", Named: true},
	}
	if !reflect.DeepEqual(ms, want) {
		t.Errorf("Mounts = %+v\nwant %+v", ms, want)
	}
	if m, rel, ok := Under(ms, "/kedge-setup/setup-postgres.sh"); !ok || !m.Repo || rel != "setup-postgres.sh" {
		t.Errorf("Under(script) = %+v %q %v", m, rel, ok)
	}
	if _, _, ok := Under(ms, "/kedge-setupx/file"); ok {
		t.Error("a path beside a mount's target is not under it")
	}
	for _, bad := range []string{"only-one-part", "a:relative/target", "a:/b:rx"} {
		if _, err := Mounts(&Service{Volumes: []string{bad}}); err == nil {
			t.Errorf("volume %q accepted", bad)
		}
	}
}

func TestLoadIsStrictAndOrders(t *testing.T) {
	write := func(text string) string {
		p := filepath.Join(t.TempDir(), "compose.yml")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	f, err := Load(write(`services:
  web: {image: a, depends_on: {db: {condition: service_healthy}, job: {condition: service_completed_successfully}}}
  job: {image: b, depends_on: {db: {condition: service_started}}}
  db: {image: c}
`))
	if err != nil {
		t.Fatal(err)
	}
	order, _ := f.Order()
	if !reflect.DeepEqual(order, []string{"db", "job", "web"}) {
		t.Errorf("order %v", order)
	}
	for text, want := range map[string]string{
		"services:\n  a: {image: x, imagee: y}\n":                                                                                 "imagee",
		"services:\n  a: {image: x, depends_on: {b: {condition: service_started}}}\n":                                             "not a service",
		"services:\n  a: {image: x, depends_on: {a: {condition: service_ready}}}\n":                                               "unknown condition",
		"services:\n  a: {depends_on: {b: {condition: service_started}}}\n  b: {depends_on: {a: {condition: service_started}}}\n": "cycle",
		"name: x\n": "no services",
	} {
		if _, err := Load(write(text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error about %s", text, err, want)
		}
	}
}
