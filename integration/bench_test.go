package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"kedge.dev/kedge/integration/lab"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runbooks/inventory"
	"kedge.dev/kedge/workflows"
)

// The worlds and helpers of `make bench` (BenchmarkTable): the rows'
// sizes, the 50 fan-out hosts, a runbook run as the CLI prepares it, a
// raw SSH client.

// sequentialSteps is the step-overhead row's run of sequential host.run
// steps on one host.
const sequentialSteps = 50

// fanOutHosts is the fan-out rows' host count.
const fanOutHosts = 50

var fanOut struct {
	once      sync.Once
	lab       *testhosts.Lab
	inventory string
	err       error
}

func fanOutLab(b *testing.B) {
	fanOut.once.Do(func() {
		dir := filepath.Join(world.dir, "fanout")
		names := lab.Names(fanOutHosts)
		fanOut.lab, fanOut.err = testhosts.Start(context.Background(), testhosts.Options{
			Count: fanOutHosts, Names: names, BaseIP: "127.0.21.", Dir: dir,
		})
		if fanOut.err != nil {
			return
		}
		fanOut.inventory = filepath.Join(dir, "inventory.yaml")
		fanOut.err = os.WriteFile(fanOut.inventory, []byte(lab.Inventory("fanout", fanOut.lab, fanOut.lab.KnownHostsFile)), 0o644)
	})
	if fanOut.err != nil {
		b.Fatal(fanOut.err)
	}
}

// compileFor loads runbook YAML against an inventory exactly as the CLI does.
func compileFor(b *testing.B, body, inv string) workflows.RunbookInput {
	p := filepath.Join(b.TempDir(), "bench.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		b.Fatal(err)
	}
	cluster, err := inventory.LoadFile(inv)
	if err != nil {
		b.Fatal(err)
	}
	world.clusters.Put(cluster)
	l, err := (&runbooks.Library{}).LoadFile(p, cluster)
	if err != nil {
		b.Fatal(err)
	}
	params, err := runbooks.ResolveParams(l.Runbook, nil, cluster)
	if err != nil {
		b.Fatal(err)
	}
	return workflows.RunbookInput{Runbook: *l.Runbook, Params: params, Cluster: *cluster}
}

// runDirect starts a runbook with the SDK client and waits for it, without
// the CLI's progress polling.
func runDirect(b *testing.B, in workflows.RunbookInput) client.WorkflowRun {
	ctx := context.Background()
	run, err := world.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: "kedge"}, workflows.RunbookWorkflow, workflows.Admit(in, time.Now()))
	if err != nil {
		b.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		b.Fatal(err)
	}
	return run
}

func dialRaw(b *testing.B, h *testhosts.Host, l *testhosts.Lab) *ssh.Client {
	c, err := ssh.Dial("tcp", fmt.Sprintf("%s:%d", h.Address, h.Port), rawConfig(b, l))
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// rawConfig is how a plain Go SSH client logs in to the lab's hosts: the
// lab's key, its known_hosts.
func rawConfig(b *testing.B, l *testhosts.Lab) *ssh.ClientConfig {
	key, err := os.ReadFile(l.IdentityFile)
	if err != nil {
		b.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(key)
	if err != nil {
		b.Fatal(err)
	}
	hk, err := knownhosts.New(l.KnownHostsFile)
	if err != nil {
		b.Fatal(err)
	}
	return &ssh.ClientConfig{User: l.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: hk}
}
