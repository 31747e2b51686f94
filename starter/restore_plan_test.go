package starter

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
)

// etcd-restore, as planned: every check (the controllers' layouts and
// members, etcd's CA, the lost quorum, the snapshot) comes before the
// gate, and the gate before any change; then the control plane stops
// everywhere, the members are restored, etcd starts and must be healthy
// with every controller's member before the API servers start; every
// Node is waited for last.
func TestEtcdRestorePlan(t *testing.T) {
	out, errOut, code := runCLI(t, "plan", "etcd-restore", "--inventory", "testdata/replace-inventory.yaml", "--set", "destination=local", "--output", "json")
	if code != 0 {
		t.Fatalf("kedge plan etcd-restore: exit %d: %s", code, errOut)
	}
	var p struct {
		Steps []struct {
			ID    string   `json:"id"`
			Wave  int      `json:"wave"`
			Hosts []string `json:"hosts"`
			Calls []struct {
				Input map[string]any `json:"input"`
			} `json:"calls"`
		}
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	wave := map[string]int{}
	hosts := map[string][]string{}
	inputs := map[string]map[string]any{}
	for _, s := range p.Steps {
		wave[s.ID], hosts[s.ID] = s.Wave, s.Hosts
		if len(s.Calls) == 1 {
			inputs[s.ID] = s.Calls[0].Input
		}
	}
	for _, c := range []string{"preflight", "layout", "members", "etcd-ca", "quorum-lost", "plan"} {
		if wave[c] == 0 || wave[c] >= wave["approve"] {
			t.Errorf("check %s in wave %d, the gate in %d", c, wave[c], wave["approve"])
		}
	}
	order := []string{"approve", "stop", "restore", "start-etcd", "etcd-healthy", "start-apiserver", "apiserver", "nodes-ready"}
	for i := 1; i < len(order); i++ {
		if wave[order[i]] <= wave[order[i-1]] {
			t.Errorf("%s in wave %d, not after %s in %d", order[i], wave[order[i]], order[i-1], wave[order[i-1]])
		}
	}
	controllers := []string{"tyc1", "tyc2", "tyc3", "tyc4"}
	for _, s := range []string{"preflight", "layout", "stop", "restore", "start-etcd", "start-apiserver"} {
		if !slices.Equal(hosts[s], controllers) {
			t.Errorf("%s on %v", s, hosts[s])
		}
	}
	if !slices.Equal(hosts["nodes-ready"], append(controllers, "tyw1")) {
		t.Errorf("nodes-ready on %v", hosts["nodes-ready"])
	}
	if in := inputs["quorum-lost"]; fmt.Sprint(in["endpoints"]) != "[https://127.0.21.1:2379 https://127.0.21.2:2379 https://127.0.21.3:2379 https://127.0.21.4:2379]" {
		t.Errorf("the quorum is asked of %v", in["endpoints"])
	}
	if in := inputs["plan"]; in["destination"] != "local" || in["snapshot"] != "latest" {
		t.Errorf("the snapshot planned: %v", in)
	}
	if in := inputs["etcd-healthy"]; fmt.Sprint(in["expectMembers"]) != "4" || in["wait"] != "5m" {
		t.Errorf("etcd's health after the restore: %v", in)
	}
}
