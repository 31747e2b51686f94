package starter

import (
	"strings"
	"testing"

	"kedge.dev/kedge/actions/check"
)

// Kedge's layout gives a host's address to its kubelet (--node-ip), etcd
// and API server, which take an IP: an inventory naming a host by DNS
// name is refused with the host and what to do, before any other action
// (no CA made in Vault, no host reached).
func TestKedgeLayoutRefusesHostsNamedByDNSBeforeAnything(t *testing.T) {
	for _, c := range []struct {
		runbook string
		sets    map[string]string
		want    string
	}{
		{"bootstrap", map[string]string{"image": "quay.io/poseidon/kubelet:v1.35.5"}, "lab-3 (lab-3.example.com): Kedge's layout gives a host's address to its kubelet (--node-ip)"},
		{"node-join", map[string]string{"node": "lab-3", "image": "quay.io/poseidon/kubelet:v1.35.5"}, "lab-3's address lab-3.example.com is a DNS name"},
	} {
		t.Run(c.runbook, func(t *testing.T) {
			kedgeLayout := func(action string, _ map[string]any) map[string]any {
				if action == "host.layout" {
					return map[string]any{"kind": "kedge"}
				}
				return nil
			}
			ran, _, _, err := runRecordedOn(t, "testdata/named-inventory.yaml", c.runbook, c.sets, kedgeLayout)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("run error %v, want %q", err, c.want)
			}
			for _, r := range ran {
				if r.Action != check.Action && !readOnly[r.Action] {
					t.Errorf("%s ran %s before the refusal", c.runbook, r.Action)
				}
			}
		})
	}
}

// readOnly are the actions node-join runs before its address check: they
// read the reference host and the cluster and change nothing.
var readOnly = map[string]bool{"host.preflight": true, "host.layout": true}
