package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func TestContainerRunAsFollowsTheSecurityContext(t *testing.T) {
	// terraform-render-bootstrap's control plane pods: the pod's context.
	var pod corev1.Pod
	if err := yaml.Unmarshal([]byte(`spec:
  securityContext: {runAsNonRoot: true, runAsUser: 65534, seccompProfile: {type: RuntimeDefault}}
  containers: [{name: a}, {name: b, securityContext: {runAsUser: 232, runAsGroup: 233}}]
`), &pod); err != nil {
		t.Fatal(err)
	}
	a, err := containerRunAs(pod.Spec.Containers[0], &pod)
	if err != nil || a.String() != "65534::" {
		t.Errorf("pod's user: %v (%v), want 65534 with its passwd group", a, err)
	}
	b, err := containerRunAs(pod.Spec.Containers[1], &pod)
	if err != nil || b.String() != "232:233:" {
		t.Errorf("container's own user: %v (%v)", b, err)
	}
	if back, err := parseRunAs(b.String()); err != nil || back.String() != b.String() {
		t.Errorf("parse %q: %v (%v)", b, back, err)
	}

	nonRoot := true
	pod.Spec.SecurityContext.RunAsUser = nil
	pod.Spec.SecurityContext.RunAsNonRoot = &nonRoot
	if _, err := containerRunAs(pod.Spec.Containers[0], &pod); !errors.Is(err, errRunAsRoot) {
		t.Errorf("runAsNonRoot with no user: %v, want the kubelet's refusal", err)
	}
	if r, err := containerRunAs(corev1.Container{}, &corev1.Pod{}); r != nil || err != nil {
		t.Errorf("no securityContext: %v (%v), want the image's root", r, err)
	}
}

// readerManifest is a static pod running as uid 65534 that records who
// it is and whether it can read secret, in dir.
func readerManifest(dir, secret string) string {
	return `apiVersion: v1
kind: Pod
metadata:
  name: reader
  namespace: kube-system
spec:
  hostNetwork: true
  securityContext: {runAsNonRoot: true, runAsUser: 65534}
  containers:
  - name: reader
    image: lab.example/sh
    command: ["sh", "-c", "echo $(id -u):$(id -g) > ` + dir + `/who; cat ` + secret + ` > ` + dir + `/read 2>&1; exec sleep 1000"]
    volumeMounts: [{name: data, mountPath: ` + dir + `}]
  volumes:
  - name: data
    hostPath: {path: ` + dir + `}
`
}

// TestStaticPodsRunAsTheirSecurityContextUser runs a static pod with
// Typhoon's pod securityContext (runAsUser 65534) both ways the simulator
// starts processes: it runs as nobody, and a root-only key is unreadable
// to it, as on a real host.
func TestStaticPodsRunAsTheirSecurityContextUser(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the simulator")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to change user")
	}
	for _, mode := range []string{"host-namespace", "own-namespace"} {
		t.Run(mode, func(t *testing.T) {
			// Not t.TempDir: its parent is 0700, closed to nobody.
			dir, err := os.MkdirTemp("", "runas-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			kubeletDir := filepath.Join(dir, "var/lib/kubelet")
			t.Cleanup(func() { killStaticPods(kubeletDir) })
			data := filepath.Join(dir, "data")
			if err := os.MkdirAll(data, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(data, 0o777); err != nil {
				t.Fatal(err)
			}
			secret := filepath.Join(dir, "apiserver.key")
			writeFile(t, secret, "KEY\n", 0o600)
			writeFile(t, filepath.Join(dir, "etc/kubernetes/manifests/reader.yaml"), readerManifest(data, secret), 0o644)
			config, kubeconfig := unreachableKubelet(t, dir)
			ns := fmt.Sprintf("/proc/%d/ns/mnt", os.Getpid())
			if mode == "own-namespace" {
				ns = "none"
			}
			s := newSim(t, dir, []string{
				"KEDGE_LAB_IMAGES=" + writeImages(t, "lab.example/sh /bin/sh"),
				"KEDGE_LAB_NODE_IP_FILE=" + filepath.Join(dir, "no-node-ip"),
				envHostMountNS + "=" + ns,
			}, "--config="+config, "--kubeconfig="+kubeconfig, "--hostname-override=sim-runas", "--root-dir="+kubeletDir)
			if mode == "host-namespace" {
				// As under the container stand-in: the simulator in a mount
				// namespace of its own, its pods in the host's.
				sim := s.bin
				s.bin = "unshare"
				s.args = append([]string{"--mount", "--propagation", "private", sim}, s.args...)
			}
			s.start()
			nobody := fmt.Sprintf("65534:%d", primaryGroup("/etc/passwd", 65534))
			eventually(t, 15*time.Second, "the pod ran as nobody and was refused the key", func() error {
				who, err := os.ReadFile(filepath.Join(data, "who"))
				if err != nil {
					return err
				}
				read, err := os.ReadFile(filepath.Join(data, "read"))
				if err != nil {
					return err
				}
				if strings.TrimSpace(string(who)) != nobody || !strings.Contains(string(read), "Permission denied") {
					return fmt.Errorf("who %q, read %q", who, read)
				}
				return nil
			})
		})
	}
}
