package inventory

import (
	"strings"
	"testing"

	"kedge.dev/kedge/runbooks/source"
)

func decodeString(t *testing.T, body string) (*Cluster, error) {
	t.Helper()
	docs, err := source.Parse("cluster.yaml", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return Decode(docs[0])
}

const twoSites = `apiVersion: kedge/v1
kind: Cluster
metadata: {name: mercury}
taskQueue: site-a
ssh: {knownHostsFile: kh, agent: true}
controllers:
  - {name: cp-1, address: 10.0.0.1}
workers:
  - {name: w-1, address: 10.0.0.2}
  - {name: w-2, address: 10.1.0.2, taskQueue: site-b}
`

func TestTaskQueueForNodeThenCluster(t *testing.T) {
	c, err := decodeString(t, twoSites)
	if err != nil {
		t.Fatal(err)
	}
	for node, want := range map[string]string{"cp-1": "site-a", "w-1": "site-a", "w-2": "site-b", "": "site-a", "gone": "site-a"} {
		if got := c.TaskQueueFor(node); got != want {
			t.Errorf("TaskQueueFor(%q) = %q, want %q", node, got, want)
		}
	}
	// A node's runbook in a rollout keeps the node's site.
	if f := c.Focus("w-2"); f.TaskQueueFor("w-2") != "site-b" || f.TaskQueueFor("cp-1") != "site-a" {
		t.Errorf("Focus lost the task queues: %+v", f)
	}
	none, err := decodeString(t, strings.Replace(twoSites, "taskQueue: site-a\n", "", 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := none.TaskQueueFor("w-1"); got != "" {
		t.Errorf("no taskQueue in the inventory: TaskQueueFor(w-1) = %q, want the runbook's own (\"\")", got)
	}
}

func TestValidateTaskQueue(t *testing.T) {
	for _, ok := range []string{"kedge", "site-a", "eu-west-1.kedge", "sites/paris:1", "A_1"} {
		if err := ValidateTaskQueue(ok); err != nil {
			t.Errorf("ValidateTaskQueue(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "site a", "/_sys/x", "-a", strings.Repeat("a", 201), "site\n"} {
		if err := ValidateTaskQueue(bad); err == nil {
			t.Errorf("ValidateTaskQueue(%q) accepted", bad)
		}
	}
}
