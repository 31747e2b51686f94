package starter

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kedge.dev/kedge/internal/codec"
)

// TestMain gives the CLI a payload key, as `kedge dev` or an operator would.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kedge-starter-")
	if err != nil {
		panic(err)
	}
	key := filepath.Join(dir, "codec.key")
	if _, err := codec.Generate(key); err != nil {
		panic(err)
	}
	os.Setenv(codec.EnvKeyFile, key)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb strings.Builder
	code := Main(append([]string{"kedge"}, args...), IO{In: strings.NewReader(""), Out: &out, Err: &errb})
	return out.String(), errb.String(), code
}

const inv = "../runbooks/testdata/inventory.yaml"

func TestValidateRejectsEveryClassWithPositions(t *testing.T) {
	files, _ := filepath.Glob("../runbooks/testdata/bad/*.yaml")
	for _, f := range files {
		if strings.HasSuffix(f, "restart-demo.yaml") || strings.HasSuffix(f, "bad-inventory.yaml") {
			continue
		}
		out, _, code := runCLI(t, "validate", "--inventory", inv, f)
		if code != ExitFailed {
			t.Errorf("%s: exit %d, want %d", f, code, ExitFailed)
		}
		want, err := os.ReadFile(strings.TrimSuffix(f, ".yaml") + ".golden")
		if err != nil {
			t.Fatal(err)
		}
		// The goldens name files relative to runbooks/; the CLI prints the path it was given.
		if got := strings.ReplaceAll(out, "../runbooks/", ""); got != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", f, got, want)
		}
	}
}

func TestValidateInventory(t *testing.T) {
	out, _, code := runCLI(t, "validate", "--inventory", "../runbooks/testdata/bad/bad-inventory.yaml")
	if code != ExitFailed || !strings.Contains(out, "bad-inventory.yaml:11:13: controller controller-1: labels are only allowed on workers") {
		t.Errorf("exit %d: %s", code, out)
	}
	out, _, code = runCLI(t, "validate", "--inventory", inv, "../runbooks/testdata/good/deploy.yaml", "--output", "json")
	var res struct {
		Valid  bool  `json:"valid"`
		Errors []any `json:"errors"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || !res.Valid || len(res.Errors) != 0 {
		t.Errorf("good runbook: exit %d %s", code, out)
	}
}

func TestValidateJSONErrors(t *testing.T) {
	out, _, code := runCLI(t, "validate", "../runbooks/testdata/bad/cycle.yaml", "-o", "json")
	var res struct {
		Valid  bool `json:"valid"`
		Errors []struct {
			Pos struct {
				File      string
				Line, Col int
			} `json:"pos"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if code != ExitFailed || res.Valid || len(res.Errors) != 1 || res.Errors[0].Pos.Line != 6 || !strings.Contains(res.Errors[0].Message, "a -> b -> c -> a") {
		t.Errorf("exit %d: %+v", code, res)
	}
}

func TestPlanNeedsNoServer(t *testing.T) {
	out, errOut, code := runCLI(t, "plan", "../runbooks/testdata/good/deploy.yaml", "--inventory", inv, "--set", "message=hi", "--set", "nodes=worker-2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"wave 1", "probe", "on worker-2", "runbook restart-demo"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	_, errOut, code = runCLI(t, "plan", "../runbooks/testdata/good/deploy.yaml", "--inventory", inv)
	if code != ExitFailed || !strings.Contains(errOut, `needs param "message"`) {
		t.Errorf("missing param: exit %d %s", code, errOut)
	}
}

func TestUsageAndUnreachableExitCodes(t *testing.T) {
	if _, _, code := runCLI(t, "plan", "../runbooks/testdata/good/deploy.yaml"); code != ExitUsage {
		t.Errorf("plan without --inventory: exit %d", code)
	}
	if _, _, code := runCLI(t, "run", "x.yaml", "--set", "novalue", "--inventory", inv); code != ExitUsage {
		t.Errorf("bad --set: exit %d", code)
	}
	// Nothing listens: the CLI says it waits, retries, then gives up.
	start := time.Now()
	_, errOut, code := runCLI(t, "list", "--address", "127.0.0.1:1", "--connect-timeout", "3s")
	if code != ExitUnreachable || !strings.Contains(errOut, "cannot reach Temporal at 127.0.0.1:1") ||
		!strings.Contains(errOut, "retrying for up to 3s") {
		t.Errorf("unreachable: exit %d %s", code, errOut)
	}
	if waited := time.Since(start); waited < 2*time.Second {
		t.Errorf("gave up after %s, before --connect-timeout", waited)
	}
}

func TestActionsJSON(t *testing.T) {
	out, _, code := runCLI(t, "actions", "--output", "json")
	var actions []struct{ Name string }
	if code != 0 || json.Unmarshal([]byte(out), &actions) != nil || len(actions) < 5 {
		t.Errorf("exit %d: %s", code, out)
	}
}

func TestNoCodecKeyStartsNothing(t *testing.T) {
	t.Setenv(codec.EnvKeyFile, filepath.Join(t.TempDir(), "missing.key"))
	_, errOut, code := runCLI(t, "run", "../examples/hello.yaml", "--inventory", inv, "--address", "127.0.0.1:1")
	if code != 2 || !strings.Contains(errOut, "no payload encryption key") || !strings.Contains(errOut, "kedge codec keygen") {
		t.Errorf("exit %d: %s", code, errOut)
	}
}

func TestCodecKeygen(t *testing.T) {
	out := filepath.Join(t.TempDir(), "k", "codec.key")
	stdout, errOut, code := runCLI(t, "codec", "keygen", "--out", out, "--output", "json")
	var res struct{ File, KeyID string }
	if code != 0 || json.Unmarshal([]byte(stdout), &res) != nil || res.File != out || res.KeyID == "" {
		t.Fatalf("exit %d: %s %s", code, stdout, errOut)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v", fi, err)
	}
	if _, errOut, code := runCLI(t, "codec", "keygen", "--out", out); code == 0 || !strings.Contains(errOut, "exists") {
		t.Errorf("a second keygen overwrote the key: exit %d %s", code, errOut)
	}
}

// A run's ID names its runbook and cluster (status, approvals, chat and
// the one-run rule read them there): an --id elsewhere is refused before
// anything is dialled or started.
func TestRunIDMustNameItsRunbookAndCluster(t *testing.T) {
	for _, id := range []string{"my-run", "deploy/mercury", "deploy/mercury/", "deploy/venus/x", "other/mercury/x"} {
		_, errOut, code := runCLI(t, "run", "../runbooks/testdata/good/deploy.yaml", "--inventory", inv, "--set", "message=hi", "--id", id, "--address", "127.0.0.1:1")
		if code != ExitUsage || !strings.Contains(errOut, "must start with deploy/mercury/") {
			t.Errorf("--id %s: exit %d: %s", id, code, errOut)
		}
	}
}

// A list param through --set: the flag library splits the value at its
// commas, and the parts without "=" are put back together.
func TestSetOfAListParam(t *testing.T) {
	got, err := parseSets([]string{"cas=cluster", "etcd", "caLabel=2027", "restartNamespaces=kube-system", "apps"})
	if err != nil || got["cas"] != "cluster,etcd" || got["caLabel"] != "2027" || got["restartNamespaces"] != "kube-system,apps" || len(got) != 3 {
		t.Errorf("parseSets: %v %v", got, err)
	}
	if _, err := parseSets([]string{"etcd"}); err == nil {
		t.Error("a first item without NAME= accepted")
	}
	out, errOut, code := runCLI(t, "plan", "ca-rotation", "--inventory", labInventory, "--set", "cas=cluster,etcd", "--output", "json")
	if code != 0 {
		t.Fatalf("kedge plan ca-rotation --set cas=cluster,etcd: exit %d: %s", code, errOut)
	}
	var p struct {
		Params map[string]any `json:"params"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil || fmt.Sprint(p.Params["cas"]) != "[cluster etcd]" {
		t.Errorf("the plan's cas: %v (%v)", p.Params["cas"], err)
	}
}

// The runbooks that change controllers take an etcd snapshot first: into
// the inventory's destination called default, else its first, unless the
// run names one or none; skipped when the inventory defines none; and for
// node-remove only when the node is a controller.
func TestSnapshotFirst(t *testing.T) {
	const backups = "testdata/lab-inventory-backups.yaml"
	snapshotStep := func(t *testing.T, args ...string) (skipped bool, destination any) {
		t.Helper()
		out, errOut, code := runCLI(t, append(append([]string{"plan"}, args...), "--output", "json")...)
		if code != 0 {
			t.Fatalf("kedge plan %v: exit %d: %s", args, code, errOut)
		}
		var p struct {
			Steps []struct {
				ID      string `json:"id"`
				Skipped bool   `json:"skipped"`
				Child   *struct {
					Params map[string]any `json:"params"`
				} `json:"child"`
			} `json:"steps"`
		}
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatal(err)
		}
		for _, s := range p.Steps {
			if s.ID == "etcd-snapshot" {
				if s.Child == nil {
					return s.Skipped, nil
				}
				if s.Child.Params["requireHealthy"] != true {
					t.Errorf("%v: the snapshot does not require a healthy etcd: %v", args, s.Child.Params)
				}
				return s.Skipped, s.Child.Params["destination"]
			}
		}
		t.Fatalf("kedge plan %v: no etcd-snapshot step", args)
		return false, nil
	}
	for _, rb := range [][]string{{"ca-rotation"}, {"cert-renewal"}, {"node-remove", "--set", "node=lab-1"}} {
		if skipped, d := snapshotStep(t, append(rb, "--inventory", backups)...); skipped || d != "local" {
			t.Errorf("%s, two destinations: skipped %v, into %v (want local, the first)", rb[0], skipped, d)
		}
		if skipped, d := snapshotStep(t, append(rb, "--inventory", backups, "--set", "snapshot=offsite")...); skipped || d != "offsite" {
			t.Errorf("%s, snapshot=offsite: skipped %v, into %v", rb[0], skipped, d)
		}
		if skipped, _ := snapshotStep(t, append(rb, "--inventory", backups, "--set", "snapshot=none")...); !skipped {
			t.Errorf("%s, snapshot=none: not skipped", rb[0])
		}
		if skipped, _ := snapshotStep(t, append(rb, "--inventory", labInventory)...); !skipped {
			t.Errorf("%s, no destination defined: not skipped", rb[0])
		}
	}
	if skipped, _ := snapshotStep(t, "node-remove", "--set", "node=lab-2", "--inventory", backups); !skipped {
		t.Error("node-remove of a worker takes a snapshot")
	}
}

// controller-replace, as planned: every check (the new host known, a
// reference, the lost member answering nowhere and the quorum, dry) comes
// before the snapshot, which comes before any change; the snapshot does
// not need etcd whole; the lost member is asked at its address while the
// new host is not; the Node deleted is the lost host's; a new host that is
// not a controller, or no controller left to join through, is refused.
func TestControllerReplacePlan(t *testing.T) {
	const replaceInv = "testdata/replace-inventory.yaml"
	type call struct {
		Input map[string]any `json:"input"`
	}
	type step struct {
		ID      string `json:"id"`
		Wave    int    `json:"wave"`
		Skipped bool   `json:"skipped"`
		Calls   []call `json:"calls"`
		Child   *struct {
			Params map[string]any `json:"params"`
		} `json:"child"`
	}
	plan := func(t *testing.T, sets ...string) map[string]step {
		t.Helper()
		args := []string{"plan", "controller-replace", "--inventory", replaceInv, "--output", "json"}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		out, errOut, code := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("kedge plan %v: exit %d: %s", sets, code, errOut)
		}
		var p struct{ Steps []step }
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatal(err)
		}
		steps := map[string]step{}
		for _, s := range p.Steps {
			steps[s.ID] = s
		}
		return steps
	}
	input := func(t *testing.T, s step) map[string]any {
		t.Helper()
		if len(s.Calls) != 1 {
			t.Fatalf("step %s: %d calls", s.ID, len(s.Calls))
		}
		return s.Calls[0].Input
	}
	p := plan(t, "lost=tyc2", "node=tyc4")
	checks := []string{"known", "others", "preflight", "layout", "reference", "reference-is-controller", "typhoon-host", "kedge-host", "etcd-check", "lost-known", "not-a-member"}
	changes := []string{"remove-member", "delete-node", "add-member", "join-kedge", "join-typhoon", "etcd-healthy"}
	for _, c := range checks {
		if p[c].Wave == 0 || p[c].Wave >= p["etcd-snapshot"].Wave {
			t.Errorf("check %s in wave %d, the snapshot in %d", c, p[c].Wave, p["etcd-snapshot"].Wave)
		}
	}
	for _, c := range changes {
		if p[c].Wave <= p["etcd-snapshot"].Wave {
			t.Errorf("change %s in wave %d, the snapshot in %d", c, p[c].Wave, p["etcd-snapshot"].Wave)
		}
	}
	if in := input(t, p["known"]); in["that"] != true {
		t.Errorf("known: %v", in)
	}
	if c := p["etcd-snapshot"].Child; c == nil || c.Params["requireHealthy"] != false || c.Params["destination"] != "local" {
		t.Errorf("the snapshot: %+v", c)
	}
	check := input(t, p["etcd-check"])
	if check["lost"] != true || check["dryRun"] != true || check["member"] != "tyc2" ||
		fmt.Sprint(check["endpoints"]) != "[https://127.0.21.1:2379 https://127.0.21.2:2379 https://127.0.21.3:2379]" {
		t.Errorf("the lost member's check: %v", check)
	}
	if rm := input(t, p["remove-member"]); rm["lost"] != true || rm["dryRun"] != nil {
		t.Errorf("the removal: %v", rm)
	}
	if add := input(t, p["add-member"]); fmt.Sprint(add["endpoints"]) != "[https://127.0.21.1:2379 https://127.0.21.3:2379]" || add["name"] != "tyc4" {
		t.Errorf("the add: %v", add)
	}
	if del := input(t, p["delete-node"]); del["name"] != "tyc2.lab.test" {
		t.Errorf("the lost Node: %v", del)
	}
	if del := input(t, plan(t, "lost=tyc9", "node=tyc4")["delete-node"]); del["name"] != "tyc9" {
		t.Errorf("the lost Node of a host the inventory does not list: %v", del)
	}
	if del := input(t, plan(t, "lost=tyc2", "node=tyc4", "lostNode=old-tyc2")["delete-node"]); del["name"] != "old-tyc2" {
		t.Errorf("the lost Node given: %v", del)
	}
	if !plan(t, "lost=tyc2", "node=tyc4", "snapshot=none")["etcd-snapshot"].Skipped {
		t.Error("snapshot=none: the snapshot is not skipped")
	}
	if in := input(t, plan(t, "lost=tyc2", "node=tyw1")["known"]); in["that"] != false || !strings.Contains(fmt.Sprint(in["message"]), "tyw1 is not a controller of the inventory") {
		t.Errorf("a worker as the new host: %v", in)
	}
	// A host rebuilt under the lost one's name: asked as the lost member.
	same := plan(t, "lost=tyc2", "node=tyc2")
	if in := input(t, same["etcd-check"]); fmt.Sprint(in["endpoints"]) != "[https://127.0.21.1:2379 https://127.0.21.2:2379 https://127.0.21.3:2379 https://127.0.21.4:2379]" {
		t.Errorf("tyc2 rebuilt: the check asks %v", in["endpoints"])
	}
	if in := input(t, same["others"]); in["that"] != true {
		t.Errorf("tyc2 rebuilt: others %v", in)
	}
}
