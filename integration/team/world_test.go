package team

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.temporal.io/sdk/client"

	"kedge.dev/kedge/integration/controlplane"
	"kedge.dev/kedge/integration/gobin"
	"kedge.dev/kedge/integration/lab"
	"kedge.dev/kedge/integration/teamlab"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/integration/watchdog"
	"kedge.dev/kedge/internal/codec"
)

// nodes is the size of the cluster the tests roll.
const nodes = 20

// world is shared by the package's tests: a control plane, twenty-one
// SSH hosts (a controller and twenty kubelet nodes of cluster "twenty"),
// and the team install serving that cluster.
var world struct {
	dir      string
	cp       *controlplane.ControlPlane
	lab      *testhosts.Lab
	inv      string   // the cluster's inventory, as the workers have it (KEDGE_DIR/clusters)
	workers  []string // node names
	team     *teamlab.Team
	client   client.Client
	tlsFlags []string
	codecKey string
}

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("team: skipped in -short mode")
		os.Exit(0)
	}
	// The team's processes die with this one (Pdeathsig); a network
	// fault's iptables chain would not.
	disarm := watchdog.Start("kedge.dev/kedge/integration/team", os.Stderr, func() {
		if iptables("-n", "-L", chaosChain) == nil {
			_ = dropChaosChain()
		}
	})
	code, err := runWorld(m)
	disarm()
	if err != nil {
		fmt.Fprintln(os.Stderr, "team world:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s team world: "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func runWorld(m *testing.M) (int, error) {
	if err := testhosts.RequireTools(); err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "kedge-team-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	world.dir = dir
	ctx := context.Background()
	start := time.Now()

	kedgeBin, err := gobin.Build("kedge.dev/kedge/cmd/kedge")
	if err != nil {
		return 0, err
	}
	if world.cp, err = controlplane.Start(ctx, controlplane.Options{Dir: filepath.Join(dir, "kube")}); err != nil {
		return 0, fmt.Errorf("control plane: %w", err)
	}
	defer world.cp.Stop()
	world.lab, err = testhosts.Start(ctx, testhosts.Options{Count: nodes + 1, Names: lab.Names(nodes + 1), BaseIP: "127.0.51.", Dir: filepath.Join(dir, "hosts")})
	if err != nil {
		return 0, fmt.Errorf("start ssh hosts: %w", err)
	}
	defer world.lab.Close()
	text := strings.Replace(lab.Inventory("twenty", world.lab, world.lab.KnownHostsFile), "controllers:\n", "kubernetes:\n  kubeconfig: "+world.cp.AdminKubeconfig+"\ncontrollers:\n", 1)
	text = strings.ReplaceAll(text, "name: worker-", "name: twenty-worker-")
	for _, h := range world.lab.Hosts[1:] {
		name := "twenty-" + h.Name
		world.workers = append(world.workers, name)
		kc, err := world.cp.NodeKubeconfig(name)
		if err != nil {
			return 0, err
		}
		if err := lab.InstallKubelet(ctx, h, kc, name, "quay.io/poseidon/kubelet:v1.35.3"); err != nil {
			return 0, err
		}
	}
	if err := waitReady(ctx, 2*time.Minute); err != nil {
		return 0, err
	}
	logf("%d nodes Ready in %s", nodes, time.Since(start).Round(time.Millisecond))

	root, err := filepath.Abs("../..")
	if err != nil {
		return 0, err
	}
	teamStart := time.Now()
	world.team, err = teamlab.Start(ctx, teamlab.Options{
		Repo: root, Dir: filepath.Join(dir, "team"), Kedge: kedgeBin, Net: "127.0.50",
		Scale:    map[string]int{"kedge-worker": 2},
		Progress: logf,
		Setup:    func(kedgeDir string) error { return setup(kedgeDir, text) },
	})
	if err != nil {
		return 0, fmt.Errorf("the team install did not start: %w", err)
	}
	defer world.team.Close()
	logf("team install up in %s", time.Since(teamStart).Round(time.Millisecond))
	kd := world.team.KedgeDir()
	world.inv = filepath.Join(kd, "clusters", "twenty.yaml")
	world.codecKey = filepath.Join(kd, "codec.key")
	world.tlsFlags = []string{"--tls-cert-path", filepath.Join(kd, "tls", "operator.pem"), "--tls-key-path", filepath.Join(kd, "tls", "operator.key"),
		"--tls-ca-path", filepath.Join(kd, "tls", "ca.pem"), "--tls-server-name", "temporal"}
	if world.client, err = dialTeam(kd); err != nil {
		return 0, err
	}
	defer world.client.Close()
	return m.Run(), nil
}

// setup fills the operator's directory: the cluster's inventory and a
// webhook config.
func setup(kedgeDir, inventory string) error {
	for _, d := range []string{"clusters", "webhook"} {
		if err := os.MkdirAll(filepath.Join(kedgeDir, d), 0o700); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(kedgeDir, "clusters", "twenty.yaml"), []byte(inventory), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(kedgeDir, "webhook", "slack-signing-secret"), []byte("team-test-signing-secret\n"), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(kedgeDir, "webhook", "webhook.yaml"), []byte(`apiVersion: kedge/v1
kind: ChatOps
clusters:
  twenty: {inventory: ../clusters/twenty.yaml}
allow:
  - slackUsers: [U0SRE]
    clusters: [twenty]
    start: [kubelet-image-swap]
`), 0o600)
}

// dialTeam is the operator's client: their certificate, the codec key.
// Lazy, so it rides out a server restart.
func dialTeam(kd string) (client.Client, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(kd, "tls", "operator.pem"), filepath.Join(kd, "tls", "operator.key"))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(filepath.Join(kd, "tls", "ca.pem"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cd, err := codec.Load(filepath.Join(kd, "codec.key"))
	if err != nil {
		return nil, err
	}
	opts := client.Options{HostPort: world.team.Address(), Namespace: "default",
		ConnectionOptions: client.ConnectionOptions{TLS: &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, ServerName: "temporal", MinVersion: tls.VersionTLS12}}}
	cd.Apply(&opts)
	return client.NewLazyClient(opts)
}

func waitReady(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		ready := 0
		for _, w := range world.workers {
			n, err := world.cp.Client.CoreV1().Nodes().Get(ctx, w, metav1.GetOptions{})
			if err == nil && nodeReady(n) {
				ready++
			}
		}
		if ready == len(world.workers) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d nodes Ready after %s", ready, len(world.workers), within)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
