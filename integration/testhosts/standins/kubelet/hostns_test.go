package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"
)

// writerManifest is a static pod that appends line to FILE in its hostPath
// volume DIR, then sleeps.
func writerManifest(dir, line string) string {
	return `apiVersion: v1
kind: Pod
metadata:
  name: writer
  namespace: kube-system
spec:
  hostNetwork: true
  containers:
  - name: writer
    image: lab.example/sh
    command: ["sh", "-c", "echo ` + line + ` >> ` + dir + `/file && exec sleep 1000"]
    volumeMounts: [{name: data, mountPath: ` + dir + `}]
  volumes:
  - name: data
    hostPath: {path: ` + dir + `, type: DirectoryOrCreate}
`
}

// unreachableKubelet writes a KubeletConfiguration and a kubeconfig for
// a simulator whose API server is not there (it runs static pods only),
// and returns their paths.
func unreachableKubelet(t *testing.T, dir string) (config, kubeconfig string) {
	t.Helper()
	caFile := filepath.Join(dir, "etc/kubernetes/ca.crt")
	ca, _, err := certutil.GenerateSelfSignedCertKey("sim-ca", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, caFile, string(ca), 0o644)
	config = kubeletConfig(t, dir, caFile, "", "")
	kubeconfig = filepath.Join(dir, "etc/kubernetes/kubelet.conf")
	writeFile(t, kubeconfig, `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.41.9:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: none}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, 0o600)
	return config, kubeconfig
}

// TestStaticPodsRunInTheHostMountNamespace runs the simulator as the
// container stand-in does, in a mount namespace of its own where a host
// directory that is not one of its volumes is an empty tmpfs. A static pod
// writes into that directory through its hostPath: the host sees the file,
// and it survives a kubelet "container" restart (a fresh namespace) that
// restarts the pod with a changed manifest, as etcd's data must.
func TestStaticPodsRunInTheHostMountNamespace(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the simulator in a mount namespace")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for a mount namespace")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare (util-linux)")
	}
	dir := t.TempDir()
	kubeletDir := filepath.Join(dir, "var/lib/kubelet")
	t.Cleanup(func() { killStaticPods(kubeletDir) })
	data := filepath.Join(dir, "var/lib/data") // a hostPath, not a volume of the kubelet
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(dir, "etc/kubernetes/manifests/writer.yaml")
	writeFile(t, manifest, writerManifest(data, "first"), 0o644)
	config, kubeconfig := unreachableKubelet(t, dir)
	images := writeImages(t, "lab.example/sh /bin/sh")
	s := newSim(t, dir, []string{
		"KEDGE_LAB_IMAGES=" + images,
		"KEDGE_LAB_NODE_IP_FILE=" + filepath.Join(dir, "no-node-ip"),
		// The test's mount namespace is the host's.
		fmt.Sprintf("%s=/proc/%d/ns/mnt", envHostMountNS, os.Getpid()),
	}, "--config="+config, "--kubeconfig="+kubeconfig, "--hostname-override=sim-host-ns", "--root-dir="+kubeletDir)
	// The kubelet's "container": a private mount namespace in which the
	// data directory is an empty tmpfs, as the stand-in's fresh root is.
	sim := s.bin
	s.bin = "unshare"
	s.args = append([]string{"--mount", "--propagation", "private", "sh", "-c", `mount -t tmpfs tmpfs "$0" && exec "$@"`, data, sim}, s.args...)
	s.start()

	file := filepath.Join(data, "file")
	eventually(t, 15*time.Second, "the static pod's file is on the host", func() error {
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		if string(b) != "first\n" {
			return fmt.Errorf("%s holds %q", file, b)
		}
		return nil
	})
	s.waitOutput("static pods run in the host's mount namespace", 1, 5*time.Second)

	// A new kubelet container, and a changed manifest: the pod restarts
	// and finds what it wrote before.
	s.stop()
	next := filepath.Join(filepath.Dir(manifest), ".writer.yaml.new")
	writeFile(t, next, writerManifest(data, "second"), 0o644)
	if err := os.Rename(next, manifest); err != nil {
		t.Fatal(err)
	}
	s.start()
	eventually(t, 30*time.Second, "the restarted pod appends to the same file", func() error {
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		if string(b) != "first\nsecond\n" {
			return fmt.Errorf("%s holds %q", file, b)
		}
		return nil
	})
}
