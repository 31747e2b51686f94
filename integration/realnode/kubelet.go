package realnode

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/yaml"

	"kedge.dev/kedge/activities/nodefiles"

	"kedge.dev/kedge/actions/render"
)

// HealthzAddress is where a kubelet configured by Kedge serves /healthz
// inside its node (healthzBindAddress 127.0.0.1, the default port).
const HealthzAddress = "127.0.0.1:10248"

// Cluster is what a node needs of its control plane.
type Cluster struct {
	Server    string // https://… reachable from the node, e.g. on a node's HostIP
	CAFile    string // the cluster CA
	CAKeyFile string // its key, to sign the node's client certificate
}

// JoinWithCertificate gives the node the cluster CA at render.ClusterCAPath
// and, at render.KubeletKubeconfigPath, a kubeconfig (rendered by Kedge)
// with a client certificate of its own: CN system:node:NAME, organization
// system:nodes, signed by the cluster CA. The kubelet authenticates as its
// node, which the Node authorizer and NodeRestriction then confine.
func (n *Node) JoinWithCertificate(c Cluster) error {
	caPEM, err := os.ReadFile(c.CAFile)
	if err != nil {
		return err
	}
	keyPEM, err := os.ReadFile(c.CAKeyFile)
	if err != nil {
		return err
	}
	certPEM, nodeKeyPEM, err := IssueClientCertificate(caPEM, keyPEM, "system:node:"+n.Name, "system:nodes")
	if err != nil {
		return err
	}
	kubeconfig, err := nodefiles.Kubeconfig(render.KubeconfigInput{
		ClusterName: "kedge", Server: c.Server, CACert: string(caPEM),
		User: "system:node:" + n.Name, ClientCert: string(certPEM), ClientKey: string(nodeKeyPEM),
	})
	if err != nil {
		return err
	}
	if err := n.WriteFile(nodefiles.ClusterCAPath, caPEM, 0o644); err != nil {
		return err
	}
	return n.WriteFile(nodefiles.KubeletKubeconfigPath, kubeconfig, 0o600)
}

// IssueClientCertificate signs a client certificate (a new P-256 key) for
// cn and orgs with the CA given in PEM, valid for a day.
func IssueClientCertificate(caCertPEM, caKeyPEM []byte, cn string, orgs ...string) (certPEM, keyPEM []byte, err error) {
	block, _ := pem.Decode(caCertPEM)
	if block == nil {
		return nil, nil, errors.New("the CA certificate is not PEM")
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, err
	}
	caKey, err := parseKey(caKeyPEM)
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

func parseKey(keyPEM []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("the CA key is not PEM")
	}
	if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the CA key: %w", err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, errors.New("the CA key cannot sign")
	}
	return signer, nil
}

// KubeletConfig is the KubeletConfiguration Kedge renders
// (render.KubeletConfig, the cluster DNS at 10.96.0.10), adjusted for
// this machine by ForThisMachine.
func (n *Node) KubeletConfig() ([]byte, error) {
	cfg, err := nodefiles.KubeletConfig(render.KubeletConfigInput{ClusterDNS: []string{"10.96.0.10"}})
	if err != nil {
		return nil, err
	}
	return ForThisMachine(cfg, n.CgroupRoot)
}

// ForThisMachine adjusts a KubeletConfiguration rendered by Kedge for the
// test machine, and nothing else. Paths stay as rendered: the node's mount
// namespace puts /etc/kubernetes, /var/lib/kubelet, /run/containerd and
// the rest under the node's own directory. The changes:
//
//   - failCgroupV1: false, on a machine with cgroup v1 (this one): the
//     kubelet refuses v1 otherwise; with it, only a deprecation warning.
//   - cgroupDriver: cgroupfs: there is no systemd here to manage cgroups
//     (nor, in containerd 1.6, the RuntimeConfig call that would tell the
//     kubelet containerd's driver).
//   - cgroupRoot: the node's own (cgroupRoot), so that nodes do not share
//     the kubepods tree and Close finds everything the node made.
//   - resolvConf: /etc/resolv.conf, only when the file named does not
//     exist here (Kedge names systemd-resolved's, and this machine has no
//     systemd-resolved): pods could not be given DNS settings otherwise.
//   - evictionHard (EvictionHard: the disk signals at 1%) and image
//     garbage collection only on a full disk: the nodes share this
//     machine's disk, which is not theirs to keep free.
func ForThisMachine(config []byte, cgroupRoot string) ([]byte, error) {
	var m map[string]any
	if err := yaml.Unmarshal(config, &m); err != nil {
		return nil, fmt.Errorf("kubelet config: %w", err)
	}
	if m == nil || m["kind"] != "KubeletConfiguration" {
		return nil, errors.New("not a KubeletConfiguration")
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
		m["failCgroupV1"] = false
	}
	m["cgroupDriver"] = nodefiles.CgroupDriverCgroupfs
	if cgroupRoot != "" {
		m["cgroupRoot"] = cgroupRoot
	}
	if rc, ok := m["resolvConf"].(string); ok && rc != "" {
		if _, err := os.Stat(rc); err != nil {
			m["resolvConf"] = "/etc/resolv.conf"
		}
	}
	machineKubelet(m)
	out, err := yaml.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append([]byte("# Rendered by Kedge, adjusted for the test machine (realnode.ForThisMachine).\n"), out...), nil
}

// MachineDropInPath is where a node that is an SSH host (StartSSH) keeps
// MachineDropIn: in the kubelet's --config-dir, where a machine's
// provisioning puts what only that machine needs, beside the config Kedge
// renders.
const MachineDropInPath = nodefiles.KubeletConfigDropInDir + "/50-test-machine.conf"

// MachineDropIn is a KubeletConfiguration drop-in (--config-dir) holding
// only what ForThisMachine changes, so the config Kedge renders is used
// unchanged and the real kubelet merges the two: failCgroupV1 on cgroup
// v1, the cgroupfs driver, the node's cgroupRoot, without
// systemd-resolved, /etc/resolv.conf, and the eviction and image
// garbage collection thresholds of a disk shared with the machine.
// Written before Kedge starts the kubelet, it holds for every kubelet the
// node runs: bootstrap's, node-join's, InstallKubelet's.
func MachineDropIn(cgroupRoot string) ([]byte, error) {
	m := map[string]any{
		"apiVersion":   "kubelet.config.k8s.io/v1beta1",
		"kind":         "KubeletConfiguration",
		"cgroupDriver": nodefiles.CgroupDriverCgroupfs,
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
		m["failCgroupV1"] = false
	}
	if cgroupRoot != "" {
		m["cgroupRoot"] = cgroupRoot
	}
	if _, err := os.Stat(nodefiles.SystemdResolvConf); err != nil {
		m["resolvConf"] = "/etc/resolv.conf"
	}
	machineKubelet(m)
	out, err := yaml.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append([]byte("# This machine's kubelet settings (realnode.MachineDropIn), merged over the config Kedge renders.\n"), out...), nil
}

// DefaultArgs are the flags of a node's kubelet: the config at
// render.KubeletConfigPath, the kubeconfig JoinWithCertificate writes, the
// node's name and address, and containerd's socket for cAdvisor.
func (n *Node) DefaultArgs() []string {
	return []string{
		"--config=" + nodefiles.KubeletConfigPath,
		"--kubeconfig=" + nodefiles.KubeletKubeconfigPath,
		"--hostname-override=" + n.Name,
		"--node-ip=" + n.NodeIP,
		"--containerd=" + ContainerdSocket,
	}
}

// StartKubelet writes config (when not nil) to render.KubeletConfigPath
// and starts the kubelet binary with args inside the node. It does not
// wait: see WaitKubeletHealthy.
func (n *Node) StartKubelet(bin string, config []byte, args []string) (*Process, error) {
	if config != nil {
		if err := n.WriteFile(nodefiles.KubeletConfigPath, config, 0o644); err != nil {
			return nil, err
		}
	}
	n.mu.Lock()
	if !n.sysctlHeld {
		if err := holdSysctls(); err != nil {
			n.mu.Unlock()
			return nil, err
		}
		n.sysctlHeld = true
	}
	n.mu.Unlock()
	return n.run("kubelet", bin, args...)
}

// WaitKubeletHealthy waits until the kubelet serves /healthz inside the
// node, or fails with its last output if it exits first.
func (n *Node) WaitKubeletHealthy(ctx context.Context, p *Process) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: n.DialContext, DisableKeepAlives: true}}
	for {
		resp, err := hc.Get("http://" + HealthzAddress + "/healthz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.TrimSpace(string(body)) == "ok" {
				return nil
			}
		}
		if ok, err := p.Exited(); ok {
			return fmt.Errorf("the kubelet exited (%v): %s", err, p.Tail(3000))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the kubelet never served /healthz: %w: %s", ctx.Err(), p.Tail(3000))
		case <-p.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// DialContext dials from inside the node's network namespace: the
// connection's socket is made there, from an OS thread that enters the
// namespace for the call and leaves it after.
func (n *Node) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, err}
			return
		}
		defer self.Close()
		target, err := os.Open("/proc/" + strconv.Itoa(n.holder.Process.Pid) + "/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, fmt.Errorf("enter the node's network: %w", err)}
			return
		}
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		// A thread that cannot go back stays locked, and Go ends it with
		// this goroutine.
		if unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// KubeletVersion is what a kubelet binary says it is (`kubelet
// --version`: "Kubernetes v1.35.4" gives v1.35.4).
func KubeletVersion(bin string) (string, error) {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", bin, err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return "", fmt.Errorf("%s --version said %q", bin, out)
	}
	return f[1], nil
}
