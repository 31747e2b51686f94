package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
// sizes, the fan-out labs, a runbook run as the CLI prepares it, a
// raw SSH client.

// sequentialSteps is the step-overhead row's run of sequential host.run
// steps on one host.
const sequentialSteps = 50

// fanOutBases are the loopback networks of the fan-out labs, by size:
// each lab has its own (a /24 holds 254 hosts), so one does not wait for
// another's addresses.
var fanOutBases = map[int]string{50: "127.0.21.", 200: "127.0.26."}

// fanOutWorld is a lab of plain hosts for the fan-out rows, its inventory
// (cluster fanout-N), and what starting it cost.
type fanOutWorld struct {
	lab       *testhosts.Lab
	inventory string
	started   time.Duration // testhosts.Start, every sshd answering
	mib       float64       // the hosts' processes' proportional RSS (Pss), summed
	err       error
}

var fanOuts struct {
	sync.Mutex
	labs map[int]*fanOutWorld
}

// fanOutLab starts (once per size) a lab of n hosts, closed at the
// world's end.
func fanOutLab(b *testing.B, n int) *fanOutWorld {
	fanOuts.Lock()
	defer fanOuts.Unlock()
	if w := fanOuts.labs[n]; w != nil {
		if w.err != nil {
			b.Fatal(w.err)
		}
		return w
	}
	base, ok := fanOutBases[n]
	if !ok {
		b.Fatalf("no loopback network for a fan-out lab of %d hosts (fanOutBases)", n)
	}
	w := &fanOutWorld{}
	if fanOuts.labs == nil {
		fanOuts.labs = map[int]*fanOutWorld{}
	}
	fanOuts.labs[n] = w
	w.err = w.start(n, base)
	if w.err != nil {
		b.Fatal(w.err)
	}
	return w
}

func (w *fanOutWorld) start(n int, base string) error {
	dir := filepath.Join(world.dir, fmt.Sprintf("fanout-%d", n))
	began := time.Now()
	l, err := testhosts.Start(context.Background(), testhosts.Options{Count: n, Names: lab.Names(n), BaseIP: base, Dir: dir})
	if err != nil {
		return err
	}
	w.started = time.Since(began)
	w.lab = l
	atWorldEnd(func() { _ = l.Close() })
	if w.mib, err = labPssMiB(l); err != nil {
		return err
	}
	w.inventory = filepath.Join(dir, "inventory.yaml")
	return os.WriteFile(w.inventory, []byte(lab.Inventory(fmt.Sprintf("fanout-%d", n), l, l.KnownHostsFile)), 0o644)
}

// labPssMiB is the memory a lab's hosts hold: each host's sshd and the
// unshare process that keeps its namespaces (sshd's parent), by their
// proportional set size, which shares the pages they share.
func labPssMiB(l *testhosts.Lab) (float64, error) {
	var kb float64
	for _, h := range l.Hosts {
		parent, err := procField(h.PID(), "status", "PPid:")
		if err != nil {
			return 0, err
		}
		for _, pid := range []int{h.PID(), int(parent)} {
			pss, err := procField(pid, "smaps_rollup", "Pss:")
			if err != nil {
				return 0, err
			}
			kb += pss
		}
	}
	return kb / 1024, nil
}

// procField reads the number after label in /proc/PID/FILE.
func procField(pid int, file, label string) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, label); ok {
			var n float64
			_, err := fmt.Sscanf(strings.TrimSpace(v), "%f", &n)
			return n, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/%s", label, pid, file)
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
