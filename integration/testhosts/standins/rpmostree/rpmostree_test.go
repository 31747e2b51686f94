package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kedge.dev/kedge/integration/testhosts/standins/osstate"
)

func TestStatusJSONIsJSONGlibsLayout(t *testing.T) {
	root := t.TempDir()
	booted := osstate.Booted{Family: osstate.FedoraCoreOS, Deployment: osstate.NewDeployment(osstate.FedoraCoreOS, "40.20240416.3.1")}
	if err := osstate.WriteJSON(filepath.Join(root, osstate.StateDir, osstate.BootedName), booted); err != nil {
		t.Fatal(err)
	}
	if err := osstate.WriteJSON(filepath.Join(root, osstate.WorldDir, osstate.OfferName), osstate.Offer{Version: "40.20240504.3.0"}); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	a := &app{stdout: &out, stderr: &errOut, now: time.Now, root: root, euid: 1500}
	if rc := a.run([]string{"upgrade"}); rc != 1 || !strings.HasPrefix(errOut.String(), "error: ") {
		t.Errorf("upgrade as a user: %d %q", rc, errOut.String())
	}
	a.euid = 0
	if rc := a.run([]string{"upgrade"}); rc != 0 {
		t.Fatalf("upgrade: %d %s", rc, errOut.String())
	}
	out.Reset()
	if rc := a.run([]string{"status", "--json"}); rc != 0 {
		t.Fatal(errOut.String())
	}
	if !strings.Contains(out.String(), "\n  \"deployments\" : [\n    {\n      \"unlocked\" : \"none\",") || !strings.Contains(out.String(), `"staged" : true`) {
		t.Errorf("layout:\n%s", out.String())
	}
	var st struct {
		Deployments []map[string]any `json:"deployments"`
	}
	if err := json.Unmarshal(out.Bytes(), &st); err != nil || len(st.Deployments) != 2 || st.Deployments[0]["version"] != "40.20240504.3.0" || st.Deployments[1]["booted"] != true {
		t.Errorf("%v %+v", err, st)
	}
	if _, ok := st.Deployments[1]["staged"]; ok {
		t.Error("the booted deployment has a staged key")
	}
}

// TestUpgradeRefusedWhileZincatiDrives: registered and active, the
// driver makes upgrade (--check too) fail with rpm-ostree's words, and
// nothing is staged; --bypass-driver, or the driver's unit stopped, lets
// it through.
func TestUpgradeRefusedWhileZincatiDrives(t *testing.T) {
	root := t.TempDir()
	booted := osstate.Booted{Family: osstate.FedoraCoreOS, Deployment: osstate.NewDeployment(osstate.FedoraCoreOS, "40.20240416.3.1")}
	if err := osstate.WriteJSON(filepath.Join(root, osstate.StateDir, osstate.BootedName), booted); err != nil {
		t.Fatal(err)
	}
	if err := osstate.WriteJSON(filepath.Join(root, osstate.WorldDir, osstate.OfferName), osstate.Offer{Version: "40.20240504.3.0"}); err != nil {
		t.Fatal(err)
	}
	if err := osstate.WriteJSON(filepath.Join(root, driverDir, driverName), driver{Name: "Zincati", Unit: "zincati.service"}); err != nil {
		t.Fatal(err)
	}
	active := true
	var out, errOut bytes.Buffer
	a := &app{stdout: &out, stderr: &errOut, now: time.Now, root: root, euid: 0, active: func(u string) bool { return u == "zincati.service" && active }}
	staged := func() bool {
		var s osstate.Staged
		return osstate.ReadJSON(filepath.Join(root, osstate.StateDir, osstate.StagedName), &s) == nil
	}
	for _, args := range [][]string{{"upgrade"}, {"upgrade", "--check"}, {"update", "--unchanged-exit-77"}} {
		errOut.Reset()
		if rc := a.run(args); rc != 1 || !strings.HasPrefix(errOut.String(), "error: Updates and deployments are driven by Zincati (zincati.service)\n") || !strings.Contains(errOut.String(), "--bypass-driver") {
			t.Errorf("%v while Zincati drives: %d %q", args, rc, errOut.String())
		}
	}
	if staged() {
		t.Fatal("a refused upgrade staged a deployment")
	}
	if rc := a.run([]string{"upgrade", "--bypass-driver"}); rc != 0 || !staged() {
		t.Fatalf("upgrade --bypass-driver: %d %s", rc, errOut.String())
	}
	active = false
	errOut.Reset()
	if rc := a.run([]string{"upgrade", "--check"}); rc == 1 {
		t.Errorf("upgrade --check with zincati.service stopped: %q", errOut.String())
	}
}
