package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kedge.dev/kedge/integration/toolsdir"

	"kedge.dev/kedge/internal/freeport"
)

// Options configure a control plane.
type Options struct {
	Dir  string // PKI, kubeconfigs, etcd data, logs
	Host string // default 127.0.0.1
}

// ControlPlane is a running etcd + kube-apiserver + controller-manager +
// scheduler.
type ControlPlane struct {
	Server          string // https://host:port
	AdminKubeconfig string
	CAFile          string
	CAKeyFile       string
	Client          kubernetes.Interface
	dir             string
	procs           []*exec.Cmd
	tools, logs     string
	pki             *pki
	api             int      // the kube-apiserver's index in procs
	apiArgs         []string // its flags, for a restart
}

var tools = toolsdir.Dir{Env: "KEDGE_KUBE_TOOLS", Script: "kube-tools.sh", What: "the control plane"}

// Tools returns the directory holding the control-plane binaries, building
// them (scripts/kube-tools.sh, cached per version) when needed.
func Tools() (string, error) { return tools.Get() }

var nextTools = toolsdir.Dir{Env: "KEDGE_KUBE_NEXT_TOOLS", Script: "kube-tools.sh", Args: []string{"next"}, What: "the next Kubernetes release"}

// NextTools returns the directory holding the next minor's control plane
// and kubelet (the release clusters are upgraded to), building them
// (scripts/kube-tools.sh next) when needed.
func NextTools() (string, error) { return nextTools.Get() }

// NextVersion is the release in NextTools.
const NextVersion = "v1.36.3"

// Start generates a PKI and starts the control plane, returning when the
// API server is ready and the default ServiceAccount exists.
func Start(ctx context.Context, o Options) (*ControlPlane, error) {
	tools, err := Tools()
	if err != nil {
		return nil, err
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	p, err := newPKI(filepath.Join(dir, "pki"))
	if err != nil {
		return nil, err
	}
	ip := net.ParseIP(o.Host)
	if err := p.issue("apiserver", "kube-apiserver", nil, true,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}, []net.IP{ip, net.ParseIP("10.96.0.1")}); err != nil {
		return nil, err
	}
	for _, c := range []struct{ name, cn, org string }{
		{"admin", "kubernetes-admin", "system:masters"},
		{"controller-manager", "system:kube-controller-manager", ""},
		{"scheduler", "system:kube-scheduler", ""},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters"},
	} {
		var orgs []string
		if c.org != "" {
			orgs = []string{c.org}
		}
		if err := p.issue(c.name, c.cn, orgs, false, nil, nil); err != nil {
			return nil, err
		}
	}
	if err := p.serviceAccountKey(); err != nil {
		return nil, err
	}
	ports, err := freeport.Pick(o.Host, 3)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]
	cp := &ControlPlane{Server: fmt.Sprintf("https://%s", net.JoinHostPort(o.Host, strconv.Itoa(apiPort))), dir: dir,
		CAFile: p.path("ca.crt"), CAKeyFile: p.path("ca.key"), tools: tools, pki: p}
	for _, k := range []string{"admin", "controller-manager", "scheduler"} {
		if err := cp.writeKubeconfig(k, p); err != nil {
			return nil, err
		}
	}
	cp.AdminKubeconfig = filepath.Join(dir, "admin.kubeconfig")
	logs := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return nil, err
	}
	etcdURL := fmt.Sprintf("http://%s:%d", o.Host, etcdClient)
	peerURL := fmt.Sprintf("http://%s:%d", o.Host, etcdPeer)
	if err := cp.run(tools, logs, "etcd", "--name=default", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL, "--log-level=warn", "--unsafe-no-fsync"); err != nil {
		return nil, cp.fail(err)
	}
	cp.logs = logs
	cp.apiArgs = []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=" + o.Host, "--advertise-address=" + o.Host, "--secure-port=" + strconv.Itoa(apiPort),
		"--tls-cert-file=" + p.path("apiserver.crt"), "--tls-private-key-file=" + p.path("apiserver.key"),
		"--client-ca-file=" + p.path("ca.crt"),
		"--kubelet-client-certificate=" + p.path("apiserver-kubelet-client.crt"), "--kubelet-client-key=" + p.path("apiserver-kubelet-client.key"),
		// As Kedge's API server: a test node's name resolves nowhere.
		"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
		"--service-account-issuer=https://kubernetes.default.svc", "--service-account-key-file=" + p.path("sa.pub"),
		"--service-account-signing-key-file=" + p.path("sa.key"), "--service-cluster-ip-range=10.96.0.0/16",
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction", "--enable-bootstrap-token-auth=true",
		"--allow-privileged=true", "--v=0",
		// Exits within seconds of SIGTERM, as Kedge's own manifests have it.
		"--shutdown-watch-termination-grace-period=5s"}
	cp.api = len(cp.procs)
	if err := cp.run(tools, logs, "kube-apiserver", cp.apiArgs...); err != nil {
		return nil, cp.fail(err)
	}
	if err := cp.waitReady(ctx, p); err != nil {
		return nil, cp.fail(err)
	}
	if err := cp.run(tools, logs, "kube-controller-manager",
		"--kubeconfig="+filepath.Join(dir, "controller-manager.kubeconfig"),
		"--cluster-signing-cert-file="+p.path("ca.crt"), "--cluster-signing-key-file="+p.path("ca.key"),
		"--controllers=*,bootstrapsigner,tokencleaner", "--use-service-account-credentials",
		"--root-ca-file="+p.path("ca.crt"), "--service-account-private-key-file="+p.path("sa.key"),
		"--leader-elect=false", "--bind-address="+o.Host, "--secure-port=0", "--v=0"); err != nil {
		return nil, cp.fail(err)
	}
	if err := cp.run(tools, logs, "kube-scheduler",
		"--kubeconfig="+filepath.Join(dir, "scheduler.kubeconfig"), "--leader-elect=false",
		"--bind-address="+o.Host, "--secure-port=0", "--v=0"); err != nil {
		return nil, cp.fail(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", cp.AdminKubeconfig)
	if err != nil {
		return nil, cp.fail(err)
	}
	if cp.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, cp.fail(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := cp.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, cp.fail(errors.New("the default ServiceAccount never appeared (is kube-controller-manager running? see " + logs + ")"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return cp, nil
}

func (cp *ControlPlane) fail(err error) error {
	_ = cp.Stop()
	return err
}

func (cp *ControlPlane) writeKubeconfig(name string, p *pki) error {
	ca, err := os.ReadFile(p.path("ca.crt"))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kedge"] = &clientcmdapi.Cluster{Server: cp.Server, CertificateAuthorityData: ca}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificate: p.path(name + ".crt"), ClientKey: p.path(name + ".key")}
	cfg.Contexts["kedge"] = &clientcmdapi.Context{Cluster: "kedge", AuthInfo: name}
	cfg.CurrentContext = "kedge"
	return clientcmd.WriteToFile(*cfg, filepath.Join(cp.dir, name+".kubeconfig"))
}

// KillAPIServer kills kube-apiserver (SIGKILL), as a crash would; the
// rest of the control plane goes on.
func (cp *ControlPlane) KillAPIServer() error {
	c := cp.procs[cp.api]
	if err := c.Process.Kill(); err != nil {
		return err
	}
	for c.Process.Signal(syscall.Signal(0)) == nil {
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// StartAPIServer starts kube-apiserver again, with the flags it had, and
// waits until it is ready.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	n := len(cp.procs)
	if err := cp.run(cp.tools, cp.logs, "kube-apiserver", cp.apiArgs...); err != nil {
		return err
	}
	// The new process takes the old one's place (Stop's order).
	cp.procs[cp.api], cp.procs = cp.procs[n], cp.procs[:n]
	return cp.waitReady(ctx, cp.pki)
}

func (cp *ControlPlane) run(tools, logs, name string, args ...string) error {
	logf, err := os.OpenFile(filepath.Join(logs, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(tools, name), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = cmd.Wait(); logf.Close() }()
	cp.procs = append(cp.procs, cmd)
	return nil
}

func (cp *ControlPlane) waitReady(ctx context.Context, p *pki) error {
	ca, _ := os.ReadFile(p.path("ca.crt"))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	cert, err := tls.LoadX509KeyPair(p.path("admin.crt"), p.path("admin.key"))
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		resp, err := hc.Get(cp.Server + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	logs, _ := os.ReadFile(filepath.Join(cp.dir, "logs", "kube-apiserver.log"))
	tail := string(logs)
	if len(tail) > 2000 {
		tail = tail[len(tail)-2000:]
	}
	return fmt.Errorf("kube-apiserver at %s not ready: %s", cp.Server, tail)
}

// Stop stops every process, newest first.
func (cp *ControlPlane) Stop() error {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		c := cp.procs[i]
		if c.Process != nil {
			_ = c.Process.Signal(syscall.SIGTERM)
		}
	}
	for i := len(cp.procs) - 1; i >= 0; i-- {
		c := cp.procs[i]
		if c.Process == nil {
			continue
		}
		for range 50 {
			if c.Process.Signal(syscall.Signal(0)) != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		_ = c.Process.Kill()
	}
	cp.procs = nil
	return nil
}

// EmbeddedKubeconfig returns the admin kubeconfig with its certificates
// inlined, for hosts that cannot see this machine's files.
func (cp *ControlPlane) EmbeddedKubeconfig() ([]byte, error) {
	cfg, err := clientcmd.LoadFromFile(cp.AdminKubeconfig)
	if err != nil {
		return nil, err
	}
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		return nil, err
	}
	return clientcmd.Write(*cfg)
}
