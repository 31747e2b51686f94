package inventory

import "testing"

// A node's Kubernetes Node name is its nodeName when given (bare-metal
// Typhoon registers Nodes under the machine's domain), else its name.
func TestKubeNameIsNodeNameElseName(t *testing.T) {
	c, err := decodeString(t, `apiVersion: kedge/v1
kind: Cluster
metadata: {name: mercury}
ssh: {knownHostsFile: kh, agent: true}
controllers:
  - {name: node1, address: 10.0.0.1, nodeName: node1.mercury.example}
workers:
  - {name: w-1, address: 10.0.0.2}
`)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"node1": "node1.mercury.example", "w-1": "w-1", "elsewhere": "elsewhere"} {
		if got := c.KubeName(name); got != want {
			t.Errorf("KubeName(%s) = %s, want %s", name, got, want)
		}
	}
}
