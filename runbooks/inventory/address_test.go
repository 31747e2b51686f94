package inventory

import (
	"strings"
	"testing"
)

const addressCluster = `apiVersion: kedge/v1
kind: Cluster
metadata: {name: mercury}
ssh: {user: core, become: sudo, knownHostsFile: kh, agent: true}
controllers:
  - {name: c1, address: 10.0.0.10}
  - {name: c2, address: c2.mercury.example}
workers:
  - {name: w1, address: "fd00::21"}
  - {name: w2, address: ADDRESS}
`

// An address is dialled and named in the host's certificates: an IP or a
// DNS name, anything else refused at its line before anything starts.
func TestAddressIsAnIPOrADNSName(t *testing.T) {
	c, err := decodeString(t, strings.Replace(addressCluster, "ADDRESS", "w2.mercury.example", 1))
	if err != nil {
		t.Fatal(err)
	}
	if c.Controllers[1].Address != "c2.mercury.example" || c.Workers[0].Address != "fd00::21" {
		t.Errorf("addresses %q %q", c.Controllers[1].Address, c.Workers[0].Address)
	}
	for _, bad := range []string{`"w2.example,evil.example"`, "w2_host.example", `"10.0.0.1 evil"`, "-w2.example"} {
		_, err := decodeString(t, strings.Replace(addressCluster, "ADDRESS", bad, 1))
		if err == nil || !strings.Contains(err.Error(), "cluster.yaml:10:") || !strings.Contains(err.Error(), "worker w2: address") ||
			!strings.Contains(err.Error(), "is neither an IP address nor a DNS name") {
			t.Errorf("address %s: %v", bad, err)
		}
	}
}
