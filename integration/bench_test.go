package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"kedge.dev/kedge/activities/sshhost"
	"kedge.dev/kedge/activities/sshpool"
	"kedge.dev/kedge/integration/lab"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runbooks/inventory"
	"kedge.dev/kedge/workflows"

	"kedge.dev/kedge/actions/host"
)

// Per-step overhead: N sequential host.run steps on one host through Kedge
// (workflow + activity + pooled SSH), against N sequential execs over one raw
// SSH connection. Run with `make bench`.

const sequentialSteps = 50

func BenchmarkKedgeSequentialHostRun(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("apiVersion: kedge/v1\nkind: Runbook\nmetadata: {name: bench-seq}\nsteps:\n")
	for i := range sequentialSteps {
		fmt.Fprintf(&sb, "  - id: s%d\n    action: host.run\n    on: worker-1\n    with: {command: \"true\"}\n", i)
		if i > 0 {
			fmt.Fprintf(&sb, "    needs: [s%d]\n", i-1)
		}
	}
	in := compileFor(b, sb.String(), world.inventory)
	runDirect(b, in) // warm the pool and the task queue
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		runDirect(b, in)
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N*sequentialSteps), "ms/step")
}

func BenchmarkRawSSHSequentialExec(b *testing.B) {
	h := labHost(nil, "worker-1")
	conn := dialRaw(b, h, world.lab)
	defer conn.Close()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		for range sequentialSteps {
			s, err := conn.NewSession()
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Run("true"); err != nil {
				b.Fatal(err)
			}
			s.Close()
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N*sequentialSteps), "ms/step")
}

// Fan-out: one step on 50 hosts through Kedge, against parallel-ssh (pssh)
// running the same command on the same 50 hosts with 50 parallel
// connections.

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

func BenchmarkKedgeFanOut50(b *testing.B) {
	fanOutLab(b)
	in := compileFor(b, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: bench-fanout}
steps:
  - id: all
    action: host.run
    on: all
    with: {command: "true"}
`, fanOut.inventory)
	runDirect(b, in) // connect the pool once, as a long-lived worker would be
	b.ResetTimer()
	for range b.N {
		runDirect(b, in)
	}
}

func BenchmarkPSSHFanOut50(b *testing.B) {
	fanOutLab(b)
	hosts := filepath.Join(b.TempDir(), "hosts")
	var lines []string
	for _, h := range fanOut.lab.Hosts {
		lines = append(lines, fmt.Sprintf("%s@%s:%d", fanOut.lab.User, h.Address, h.Port))
	}
	if err := os.WriteFile(hosts, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		cmd := exec.Command("parallel-ssh", "-h", hosts, "-p", fmt.Sprint(fanOutHosts), "-t", "60",
			"-O", "IdentityFile="+fanOut.lab.IdentityFile,
			"-O", "UserKnownHostsFile="+fanOut.lab.KnownHostsFile,
			"-O", "StrictHostKeyChecking=yes", "-O", "BatchMode=yes", "true")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("parallel-ssh: %v\n%s", err, out)
		}
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
func runDirect(b *testing.B, in workflows.RunbookInput) {
	ctx := context.Background()
	run, err := world.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: "kedge"}, workflows.RunbookWorkflow, workflows.Admit(in, time.Now()))
	if err != nil {
		b.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		b.Fatal(err)
	}
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

// BenchmarkHostRunActivityDirect calls the host.run activity directly (no
// Temporal) over the pooled connection: the wrapper's own cost, between the
// raw exec and the full Kedge step.
func BenchmarkHostRunActivityDirect(b *testing.B) {
	pool := sshpool.New(sshpool.Options{})
	defer pool.Close()
	acts := &sshhost.Activities{Pool: pool}
	cluster, err := inventory.LoadFile(world.inventory)
	if err != nil {
		b.Fatal(err)
	}
	target, err := cluster.Target("worker-1")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	in := host.RunInput{Target: target, Command: "true"}
	if _, err := acts.Run(ctx, in); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		for range sequentialSteps {
			if _, err := acts.Run(ctx, in); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N*sequentialSteps), "ms/step")
}
