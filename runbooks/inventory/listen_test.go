package inventory

import (
	"strings"
	"testing"
)

// kubernetes.controlPlaneListen is kubeadm or node; anything else is an
// error at its line.
func TestControlPlaneListen(t *testing.T) {
	const doc = `apiVersion: kedge/v1
kind: Cluster
metadata: {name: mercury}
ssh: {knownHostsFile: kh, agent: true}
kubernetes:
  controlPlaneListen: %s
controllers:
  - {name: cp-1, address: 10.0.0.1}
`
	for _, v := range []string{"kubeadm", "node"} {
		c, err := decodeString(t, strings.Replace(doc, "%s", v, 1))
		if err != nil || c.Kubernetes.ControlPlaneListen != v {
			t.Errorf("controlPlaneListen %s: %+v %v", v, c, err)
		}
	}
	_, err := decodeString(t, strings.Replace(doc, "%s", "0.0.0.0", 1))
	if err == nil || !strings.Contains(err.Error(), `cluster.yaml:6:23: kubernetes.controlPlaneListen must be kubeadm or node, got "0.0.0.0"`) {
		t.Errorf("controlPlaneListen 0.0.0.0: %v", err)
	}
}
