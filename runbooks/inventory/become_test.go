package inventory

import (
	"strings"
	"testing"

	"kedge.dev/kedge/actions/target"
)

const becomeCluster = `apiVersion: kedge/v1
kind: Cluster
metadata: {name: mercury}
ssh: {user: core, become: sudo, knownHostsFile: kh, agent: true}
controllers:
  - {name: cp-1, address: 10.0.0.1}
workers:
  - {name: w-1, address: 10.0.0.2}
  - {name: w-2, address: 10.0.0.3, user: root, become: none}
`

func TestBecomeClusterWideAndPerNode(t *testing.T) {
	c, err := decodeString(t, becomeCluster)
	if err != nil {
		t.Fatal(err)
	}
	for node, want := range map[string][2]string{
		"cp-1": {"core", target.BecomeSudo},
		"w-1":  {"core", target.BecomeSudo},
		"w-2":  {"root", ""},
	} {
		tg, err := c.Target(node)
		if err != nil {
			t.Fatal(err)
		}
		if tg.User != want[0] || tg.Become != want[1] {
			t.Errorf("%s: user %q become %q, want %q %q", node, tg.User, tg.Become, want[0], want[1])
		}
	}
	// A node can ask for sudo when the cluster does not.
	c, err = decodeString(t, strings.Replace(strings.Replace(becomeCluster, "become: sudo, ", "", 1), "become: none", "become: sudo", 1))
	if err != nil {
		t.Fatal(err)
	}
	if tg, _ := c.Target("w-2"); tg.Become != target.BecomeSudo {
		t.Errorf("w-2 asks for sudo: become %q", tg.Become)
	}
	if tg, _ := c.Target("w-1"); tg.Become != "" {
		t.Errorf("w-1 asks for nothing: become %q", tg.Become)
	}
}

func TestBecomeRefusesOtherValues(t *testing.T) {
	_, err := decodeString(t, strings.Replace(becomeCluster, "become: sudo", "become: doas", 1))
	if err == nil || !strings.Contains(err.Error(), `cluster.yaml:4:`) || !strings.Contains(err.Error(), `ssh.become must be sudo or none, got "doas"`) {
		t.Fatalf("want a positioned error for ssh.become, got %v", err)
	}
	_, err = decodeString(t, strings.Replace(becomeCluster, "become: none", "become: true", 1))
	if err == nil || !strings.Contains(err.Error(), `cluster.yaml:9:`) || !strings.Contains(err.Error(), `become must be sudo or none`) {
		t.Fatalf("want a positioned error for a node's become, got %v", err)
	}
}
