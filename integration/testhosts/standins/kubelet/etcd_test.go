package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"

	"kedge.dev/kedge/integration/controlplane"
)

// etcdManifest is etcd's static pod as render.StaticPods writes it (see
// etcd.yaml.golden), on plain http and with its data in dataDir.
func etcdManifest(dataDir string, extra ...string) string {
	url := func(port int) string { return fmt.Sprintf("http://%s:%d", etcdIP, port) }
	command := append([]string{
		"etcd",
		"--name=sim-controller",
		"--data-dir=" + dataDir,
		"--listen-client-urls=" + url(2379),
		"--advertise-client-urls=" + url(2379),
		"--listen-peer-urls=" + url(2380),
		"--initial-advertise-peer-urls=" + url(2380),
		"--initial-cluster=sim-controller=" + url(2380),
		"--initial-cluster-state=new",
		"--listen-metrics-urls=" + url(2381),
		"--unsafe-no-fsync",
	}, extra...)
	return `apiVersion: v1
kind: Pod
metadata:
  labels: {component: etcd, tier: control-plane}
  name: etcd
  namespace: kube-system
spec:
  containers:
  - command: ["` + strings.Join(command, `", "`) + `"]
    image: images.example/etcd:3.6.16-0
    name: etcd
  hostNetwork: true
  priorityClassName: system-node-critical
`
}

func etcdReady() error {
	c := &http.Client{Timeout: time.Second}
	resp, err := c.Get(fmt.Sprintf("http://%s:2381/readyz", etcdIP))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s", resp.Status)
	}
	return nil
}

func TestStaticEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs etcd")
	}
	tools, err := controlplane.Tools()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeletDir := filepath.Join(dir, "var/lib/kubelet")
	t.Cleanup(func() { killStaticPods(kubeletDir) })
	manifests := filepath.Join(dir, "etc/kubernetes/manifests")
	manifest := filepath.Join(manifests, "etcd.yaml")
	writeFile(t, manifest, etcdManifest(filepath.Join(dir, "var/lib/etcd")), 0o644)
	images := writeImages(t, "images.example/etcd "+filepath.Join(tools, "etcd"))
	caFile := filepath.Join(dir, "etc/kubernetes/ca.crt")
	ca, _, err := certutil.GenerateSelfSignedCertKey("sim-ca", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, caFile, string(ca), 0o644)
	config := kubeletConfig(t, dir, caFile, "", "")
	// The API server is not there (it would be a static pod too): static
	// pods run all the same.
	kubeconfig := filepath.Join(dir, "etc/kubernetes/kubelet.conf")
	writeFile(t, kubeconfig, `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.41.9:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: none}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, 0o600)
	// No --node-ip: the simulator finds its IP as on a test host.
	nodeIPFile := filepath.Join(dir, "etc/kedge-lab/node-ip")
	writeFile(t, nodeIPFile, etcdNodeIP+"\n", 0o644)
	s := newSim(t, dir, []string{"KEDGE_LAB_NODE_IP_FILE=" + nodeIPFile, "KEDGE_LAB_IMAGES=" + images},
		"--config="+config, "--kubeconfig="+kubeconfig, "--hostname-override=sim-controller", "--root-dir="+kubeletDir)
	s.start()

	eventually(t, 20*time.Second, "etcd is ready", etcdReady)
	first := etcdContainer(t, kubeletDir)
	s.waitOutput("retrying in", 1, 10*time.Second)
	if data, err := os.ReadFile(filepath.Join(dir, "var/log/pods/kube-system_etcd/etcd.log")); err != nil || !strings.Contains(string(data), "sim-controller") {
		t.Errorf("etcd's log: %v %.200q", err, data)
	}
	// Without a serving pair configured, 10250 serves a self-signed one,
	// kept in the cert dir.
	conn, err := tls.Dial("tcp", net.JoinHostPort(etcdNodeIP, "10250"), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	served := conn.ConnectionState().PeerCertificates[0]
	conn.Close()
	if kept, err := certutil.CertsFromFile(filepath.Join(kubeletDir, "pki", "kubelet.crt")); err != nil || !kept[0].Equal(served) {
		t.Errorf("10250 serves %s, not the self-signed certificate kept in pki/kubelet.crt (%v)", served.Subject, err)
	}

	// A kubelet restart leaves etcd alone: the next kubelet adopts it.
	s.stop()
	if err := etcdReady(); err != nil {
		t.Fatalf("etcd stopped with the kubelet: %v", err)
	}
	s.start()
	s.waitOutput(fmt.Sprintf("adopted container etcd (pid %d)", first.PID), 1, 10*time.Second)
	if c := etcdContainer(t, kubeletDir); c.PID != first.PID || !running(c) {
		t.Errorf("after a kubelet restart etcd is pid %d, want %d", c.PID, first.PID)
	}

	// A changed manifest restarts etcd.
	next := filepath.Join(manifests, ".etcd.yaml.new")
	writeFile(t, next, etcdManifest(filepath.Join(dir, "var/lib/etcd"), "--log-level=warn"), 0o644)
	if err := os.Rename(next, manifest); err != nil {
		t.Fatal(err)
	}
	var second containerState
	eventually(t, 20*time.Second, "a new etcd runs", func() error {
		second = etcdContainer(t, kubeletDir)
		if second.PID == first.PID || !running(second) {
			return fmt.Errorf("etcd is pid %d", second.PID)
		}
		return etcdReady()
	})
	if running(first) {
		t.Error("the old etcd still runs")
	}

	// A removed manifest stops it.
	if err := os.Remove(manifest); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "etcd stops", func() error {
		if running(second) || etcdReady() == nil {
			return fmt.Errorf("etcd pid %d still runs", second.PID)
		}
		if states := readStates(filepath.Join(kubeletDir, staticPodStateDir)); len(states) != 0 {
			return fmt.Errorf("state left for a removed pod: %+v", states)
		}
		return nil
	})
}

func etcdContainer(t *testing.T, kubeletDir string) containerState {
	t.Helper()
	for _, s := range readStates(filepath.Join(kubeletDir, staticPodStateDir)) {
		if s.Namespace == "kube-system" && s.Name == "etcd" && len(s.Containers) == 1 {
			return s.Containers[0]
		}
	}
	return containerState{}
}
