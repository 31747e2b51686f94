package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/integration/typhoon"
	"kedge.dev/kedge/integration/vaultlab"
	"kedge.dev/kedge/workflows"
)

// adoptTyphoon takes the Typhoon world's CAs into Vault once (a test run
// alone needs it; in a whole run TestAdoptTyphoonAndRenewInPlace did).
// After a CA rotation the CA keys the world was built with are no longer
// the cluster's: adopt is not run again.
func adoptTyphoon(t *testing.T) {
	t.Helper()
	adoptTyphoonLab(t, typhoonBuilt)
}

// adoptTyphoonLab runs adopt on w, once.
func adoptTyphoonLab(t *testing.T, w *typhoonLab) {
	t.Helper()
	if w.adopted {
		return
	}
	keys := t.TempDir()
	etcdKey, aggKey := filepath.Join(keys, "etcd-ca.key"), filepath.Join(keys, "aggregation-ca.key")
	for f, k := range map[string][]byte{etcdKey: w.pki.EtcdCAKey(), aggKey: w.pki.AggregationCAKey()} {
		if err := os.WriteFile(f, k, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if p, code, errOut := runWaitInv(t, "adopt", w.inventory, "--set-file", "etcdCAKey="+etcdKey, "--set-file", "aggregationCAKey="+aggKey); code != 0 {
		t.Fatalf("adopt %s: exit %d: %s\n%+v", w.name, code, errOut, p)
	}
	w.adopted = true
}

// typhoonInventoryOfNodes is the world's inventory with every spare host
// that has joined the cluster by now (the join tests leave theirs): a
// CA rotation must reach every kubelet.
func typhoonInventoryOfNodes(t *testing.T) string {
	t.Helper()
	base, err := os.ReadFile(typhoonBuilt.inventory)
	if err != nil {
		t.Fatal(err)
	}
	inv := string(base)
	for i, spec := range typhoonHosts {
		if !spec.spare {
			continue
		}
		if _, err := typhoonBuilt.client.CoreV1().Nodes().Get(t.Context(), typhoonFQDN(spec.name), metav1.GetOptions{}); err != nil {
			continue
		}
		h := typhoonBuilt.lab.Hosts[i]
		inv += fmt.Sprintf("  - name: %s\n    nodeName: %s\n    address: %s\n    port: %d\n", h.Name, typhoonFQDN(h.Name), h.Address, h.Port)
	}
	p := filepath.Join(t.TempDir(), "inventory.yaml")
	if err := os.WriteFile(p, []byte(inv), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// apiPoller asks every controller's API server for /readyz four times a
// second through the rotation, as an operator's client would: with the
// kubeconfig Kedge keeps (read again at each poll), and records each
// server's longest run of failures, and the longest time no server
// answered at all.
type apiPoller struct {
	mu      sync.Mutex
	down    map[string]time.Time // since when each server fails
	longest map[string]time.Duration
	lastErr map[string]string
	allDown time.Time
	worst   time.Duration
	stop    func()
	done    chan struct{}
}

func startAPIPoller(t *testing.T, kubeconfig string, addrs []string) *apiPoller {
	ctx, cancel := context.WithCancel(context.Background())
	p := &apiPoller{down: map[string]time.Time{}, longest: map[string]time.Duration{}, lastErr: map[string]string{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			now, up := time.Now(), 0
			for _, a := range addrs {
				err := readyz(ctx, kubeconfig, a)
				p.mu.Lock()
				if err == nil {
					up++
					if since, ok := p.down[a]; ok {
						p.longest[a] = max(p.longest[a], now.Sub(since))
						delete(p.down, a)
					}
				} else if _, ok := p.down[a]; !ok && ctx.Err() == nil {
					p.down[a], p.lastErr[a] = now, err.Error()
				}
				p.mu.Unlock()
			}
			p.mu.Lock()
			switch {
			case up > 0 && !p.allDown.IsZero():
				p.worst = max(p.worst, now.Sub(p.allDown))
				p.allDown = time.Time{}
			case up == 0 && p.allDown.IsZero():
				p.allDown = now
			}
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() { p.stop(); <-p.done })
	return p
}

// readyz asks one API server with the kubeconfig as it is now.
func readyz(ctx context.Context, kubeconfig, addr string) error {
	b, err := os.ReadFile(kubeconfig)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(b)
	if err != nil {
		return err
	}
	cfg.Host, cfg.TLSClientConfig.ServerName, cfg.Timeout = "https://"+addr, typhoonAPIServer, 2*time.Second
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: rt, Timeout: 2 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s", resp.Status)
	}
	return nil
}

// report stops the poller and says each server's longest outage and the
// longest time none answered.
func (p *apiPoller) report() (longest map[string]time.Duration, none time.Duration, lastErr map[string]string) {
	p.stop()
	<-p.done
	now := time.Now()
	for a, since := range p.down {
		p.longest[a] = max(p.longest[a], now.Sub(since))
	}
	if !p.allDown.IsZero() {
		p.worst = max(p.worst, now.Sub(p.allDown))
	}
	return p.longest, p.worst, p.lastErr
}

// kubeClient is a client from the kubeconfig as it is now.
func kubeClient(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// certsIn is every certificate a file holds: PEM blocks, and a
// kubeconfig's base64 certificate-authority-data and
// client-certificate-data.
func certsIn(t *testing.T, content []byte) []*x509.Certificate {
	t.Helper()
	data := content
	for _, m := range regexp.MustCompile(`(?:certificate-authority|client-certificate)-data: *(\S+)`).FindAllSubmatch(content, -1) {
		if b, err := base64.StdEncoding.DecodeString(string(m[1])); err == nil {
			data = append(append(data, '\n'), b...)
		}
	}
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return out
		}
		if b.Type == "CERTIFICATE" {
			if c, err := x509.ParseCertificate(b.Bytes); err == nil {
				out = append(out, c)
			}
		}
	}
}

// trustFiles is every file on the world's hosts a CA rotation may
// change, with its content (the kubelet's client certificate read on the
// host: a link with an absolute target), and the worker's kubeconfig.
func (w *typhoonLab) trustFiles(t *testing.T, cs kubernetes.Interface) map[string]string {
	t.Helper()
	out := map[string]string{"worker:kubeconfig": string(must(os.ReadFile(w.kubeconfig)))}
	nodes := typhoonNodesNow(t, cs)
	for i, spec := range w.hosts {
		h := w.lab.Hosts[i]
		if spec.spare && !slices.Contains(nodes, typhoonFQDN(h.Name)) {
			continue
		}
		files := []string{typhoon.BootstrapKubeconfig, typhoon.KubeletKubeconfig, typhoon.KubeletClientCert}
		if spec.controller {
			files = append(files, typhoon.CACert, typhoon.CAKey, typhoon.AggregationCA, typhoon.EtcdClientCA, typhoon.EtcdServerCA, typhoon.EtcdPeerCA,
				typhoon.AdminK, typhoon.ControllerManagerK, typhoon.SchedulerK, typhoon.APIServerCert, typhoon.APIServerKey, typhoon.EtcdClientCert,
				typhoon.EtcdServerCert, typhoon.EtcdPeerCert, typhoon.AggregationCert, typhoon.ServiceAccountPub, typhoon.ServiceAccountKey,
				typhoon.ManifestsDir+"/kube-controller-manager.yaml", typhoon.ManifestsDir+"/kube-apiserver.yaml")
		}
		for _, f := range files {
			b, err := h.Exec(t.Context(), "cat", f)
			if err != nil {
				t.Fatalf("%s:%s: %v", h.Name, f, err)
			}
			out[h.Name+":"+f] = string(b)
		}
		if spec.controller {
			if b, err := h.Exec(t.Context(), "ls", typhoon.PKIDir); err == nil {
				out[h.Name+":ls pki"] = string(b)
			}
		}
	}
	return out
}

// unmarked is a static pod manifest without the mark of its restarts,
// as JSON; any other file as it is.
func unmarked(t *testing.T, name, content string) string {
	t.Helper()
	if !strings.Contains(name, typhoon.ManifestsDir+"/") {
		return content
	}
	var pod map[string]any
	if err := yaml.Unmarshal([]byte(content), &pod); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if meta, ok := pod["metadata"].(map[string]any); ok {
		if ann, ok := meta["annotations"].(map[string]any); ok {
			delete(ann, "kedge.dev/restarted-at")
			if len(ann) == 0 {
				delete(meta, "annotations")
			}
		}
	}
	b, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// typhoonPodSettle is the Typhoon world's ca-rotation podSettle. What
// podSettle waits for, kubelets refreshing the kube-root-ca.crt mounted
// in running pods, the kubelet simulator does not do (it mounts nothing):
// here the default 90 s would only pass time. TestRealKubeletCARotation
// checks the wait on real kubelets, with a settle of three of their
// sync periods.
const typhoonPodSettle = "podSettle=5s"

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A ca-rotation whose worker is killed in the middle of its trust stage,
// inside tyc2's pki.rotate-ca install (some files renamed into place, the
// controller manager's manifest not), goes on on a new worker, which
// finishes that install; rejected at the drop gate (after stage 3: every
// certificate from the new CAs, every kubelet's client certificate signed
// by the switched signer), it undoes every stage: every file on every
// host and the worker's kubeconfig is as it was, every served certificate
// is the one from before, and the cluster is healthy: etcd's 3 members,
// every Node Ready, a token from before still accepted.
//
// It runs on a Typhoon world of its own in the disaster-recovery lane:
// on the shared world, after the others of its lane, it made that lane
// the package's longest. Whole again at its end, the world goes on to
// the lane's next test.
func TestCARotationAbortedOnTyphoonCluster(t *testing.T) {
	typhoonDRLane.join(t)
	w := typhoonDRWorld(t, "typhoon-abort")
	ctx := t.Context()
	cs := w.client
	inv := w.inventory
	var endpoints []string
	for _, h := range w.lab.Hosts[:3] {
		endpoints = append(endpoints, h.Address+":6443", h.Address+":2379", h.Address+":2380")
	}
	served := map[string]string{}
	for _, ep := range endpoints {
		served[ep] = servedCert(t, ep).SerialNumber.String()
	}
	files := w.trustFiles(t, cs)
	tok := saToken(t, cs, nil)

	// While an etcd member is down: refused before anything changes, no
	// new CA made.
	tyc2 := w.host(t, "tyc2")
	if out, err := tyc2.Exec(ctx, "systemctl", "stop", "etcd-member.service"); err != nil {
		t.Fatalf("stop etcd on tyc2: %v: %s", err, out)
	}
	pr, code, errOut := runWaitInv(t, "ca-rotation", inv)
	if st := step(t, pr, "etcd-healthy"); code == 0 || st.State != workflows.StateFailed || !strings.Contains(st.LastError, "tyc2") {
		t.Errorf("ca-rotation with tyc2's etcd down: exit %d, etcd-healthy %s: %s\n%s", code, st.State, st.LastError, errOut)
	}
	if st := step(t, pr, "new-ca"); st.Attempts != 0 {
		t.Errorf("the refused rotation staged a CA: %+v", st)
	}
	v, _ := labVault(t)
	if _, err := v.Client.KVv2(vaultlab.KVPath).Get(ctx, "kedge/clusters/"+w.name+"/ca-next"); err == nil {
		t.Error("the refused rotation left a new CA in Vault")
	}
	if out, err := tyc2.Exec(ctx, "systemctl", "start", "etcd-member.service"); err != nil {
		t.Fatalf("start etcd on tyc2: %v: %s", err, out)
	}
	eventually(t, 2*time.Minute, "tyc2's etcd serving again", func() bool {
		c, err := tls.Dial("tcp", tyc2.Address+":2379", &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	const queue = "ca-rotation-abort"
	first := startWorker(t, queue, inv)
	began := time.Now()
	// The worker is killed inside tyc2's pki.rotate-ca install: its
	// script held at the rename of the controller manager's manifest,
	// the files before it (ca.crt the bundle, ca-signer.*) in place.
	hold := holdManifestRename(t, tyc2)
	id := startRunInv(t, "ca-rotation", inv, "--task-queue", queue, "--set", typhoonPodSettle)
	ro := rolloutOf(t, id, "trust-controllers")
	eventually(t, 10*time.Minute, "tyc2's install held at the controller manager's manifest", func() bool {
		_, err := tyc2.ReadFile(holdHeld)
		return err == nil
	})
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	t.Logf("worker killed inside tyc2's install in the trust stage, %s into the run", time.Since(began).Round(time.Second))
	hold() // the lost script renames nothing more
	startWorker(t, queue, inv)
	eventually(t, 10*time.Minute, "the trust stage done on tyc2", func() bool {
		p, ok := progressOf(t, ro)
		return ok && step(t, p, "tyc2").State == workflows.StateSucceeded
	})
	p, _ := progressOf(t, ro)
	if c, ok := progressOf(t, step(t, p, "tyc2").Child); !ok || step(t, c, "rotate").Attempts < 2 {
		t.Errorf("tyc2's rotate step: %+v, want a second attempt after the lost one", step(t, c, "rotate"))
	}

	waitForDropGate(t, id, 30*time.Minute)
	t.Logf("to the drop gate with a worker killed: %s", time.Since(began).Round(time.Second))
	for _, ep := range endpoints {
		if servedCert(t, ep).SerialNumber.String() == served[ep] {
			t.Errorf("at the gate %s still serves the certificate from before", ep)
		}
	}
	aborted := time.Now()
	if out, errOut, code := kedge(t, "approve", id, "--decision", "reject", "--by", "sre-on-call", "--output", "json"); code != 0 {
		t.Fatalf("kedge approve --decision reject: exit %d: %s %s", code, out, errOut)
	}
	if err := waitClosed(t, id, 30*time.Minute); err == nil {
		t.Fatal("the rejected rotation succeeded")
	}
	t.Logf("undo of stages 3 and 2: %s", time.Since(aborted).Round(time.Second))
	pr, _ = queryProgress(id)
	for _, s := range pr.Steps {
		if s.Undo != "" && s.Undo != workflows.StateUndone {
			t.Errorf("step %s: undo %s", s.ID, s.Undo)
		}
	}
	// The undo waits for each static pod it restarts; etcd and the API
	// servers behind them settle within moments.
	for _, h := range w.lab.Hosts[:3] {
		eventually(t, 2*time.Minute, h.Name+"'s API server ready after the undo", func() bool {
			return readyz(ctx, w.kubeconfig, h.Address+":6443") == nil
		})
	}
	cs = kubeClient(t, w.kubeconfig)
	after := w.trustFiles(t, cs)
	// A restart marks the manifest it restarts (kedge.dev/restarted-at):
	// that mark aside, every file is as it was.
	for k, v := range files {
		if unmarked(t, k, after[k]) != unmarked(t, k, v) {
			t.Errorf("%s is not as it was before the rotation:\n%s", k, after[k])
		}
	}
	for _, ep := range endpoints {
		if got := servedCert(t, ep).SerialNumber.String(); got != served[ep] {
			t.Errorf("after the undo %s serves serial %s, not %s from before", ep, got, served[ep])
		}
	}
	if got := w.etcdMembersVia(t, "tyc1"); strings.Join(got, ",") != "tyc1,tyc2,tyc3" {
		t.Errorf("etcd members after the undo: %v", got)
	}
	eventually(t, time.Minute, "etcd ready through the API", func() bool {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz/etcd").DoRaw(ctx)
		return err == nil
	})
	if err := waitTyphoonReady(ctx, cs, typhoonNodesNow(t, cs)); err != nil {
		t.Error(err)
	}
	if !tokenAccepted(t, cs, tok) {
		t.Error("a token from before is refused after the undo")
	}
	// Whole again, as checked: the lane's next test takes the world on.
	w.handOn = true
}

// The files holdManifestRename uses on its host: the hold, while it is
// there, and the mark of a rename held.
const (
	holdFile = "/run/kedge-test-hold"
	holdHeld = "/run/kedge-test-held"
)

// holdManifestRename holds, on h, the rename that puts a controller
// manager's manifest in place (host.install-bundle's `mv -f` of it, a
// stand-in mv in front of the real one) until the returned func is
// called; the held mv then fails, as a script lost with its worker would
// rename nothing more, and the stand-in goes.
func holdManifestRename(t *testing.T, h *testhosts.Host) (release func()) {
	t.Helper()
	src := filepath.Join(t.TempDir(), "mv")
	script := `#!/bin/sh
for dst; do :; done
case "$dst" in
*/kube-controller-manager.yaml)
	if [ -e ` + holdFile + ` ]; then
		touch ` + holdHeld + `
		while [ -e ` + holdFile + ` ]; do sleep 0.1; done
		exit 1
	fi ;;
esac
exec /bin/mv "$@"
`
	if err := os.WriteFile(src, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	stand, err := h.InstallProgram("mv", src)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.WriteFile(holdFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	released := false
	release = func() {
		if released {
			return
		}
		released = true
		ctx := context.WithoutCancel(t.Context())
		if out, err := h.Exec(ctx, "rm", "-f", holdFile); err != nil {
			t.Errorf("release the hold on %s: %v: %s", h.Name, err, out)
		}
		// The held mv, if it still runs, sees the hold gone and fails.
		eventually(t, time.Minute, "the held mv on "+h.Name+" to end", func() bool {
			_, err := h.Exec(ctx, "pgrep", "-f", stand)
			return err != nil
		})
		if out, err := h.Exec(ctx, "rm", "-f", stand, holdHeld); err != nil {
			t.Errorf("remove the stand-in mv on %s: %v: %s", h.Name, err, out)
		}
	}
	t.Cleanup(release)
	return release
}

// ca-rotation on the Typhoon-built cluster (its CAs as Typhoon makes
// them, adopted): all four are replaced while a client polls every API
// server. At the approval gate every served certificate is the new CAs',
// a token issued before the switch and one issued after are both
// accepted; once approved, no trust point on any host holds an old CA,
// every served certificate chains to the new CAs only, etcd has its 3
// members, every Node is Ready, the Deployment made before still has its
// pods, a pod's view (its namespace's kube-root-ca.crt and a token bound
// to it) reaches the API, the token from before is refused and the one
// from after accepted. No API server was out for longer than a restart,
// and one always answered.
func TestCARotationOnTyphoonCluster(t *testing.T) {
	typhoonLane.join(t)
	typhoonWorld(t)
	adoptTyphoon(t)
	t.Cleanup(func() {
		if t.Failed() {
			for _, h := range typhoonBuilt.lab.Hosts[:3] {
				b, _ := h.ReadFile("/var/log/units/kubelet.service.log")
				t.Logf("%s kubelet log tail:\n%s", h.Name, tail(string(b), 3000))
			}
		}
	})
	ctx := t.Context()
	cs, p := typhoonBuilt.client, typhoonBuilt.pki
	old := map[string]*x509.Certificate{"cluster": parsePEMCert(t, p.CA()), "etcd": parsePEMCert(t, p.EtcdCA()), "front-proxy": parsePEMCert(t, p.AggregationCA())}
	inv := typhoonInventoryOfNodes(t)
	var controllers []string
	for _, h := range typhoonBuilt.lab.Hosts[:3] {
		controllers = append(controllers, h.Address)
	}

	if _, err := cs.AppsV1().Deployments("default").Create(ctx, deployment("before-rotation", 2, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := func(c kubernetes.Interface) []corev1.Pod {
		pods, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=before-rotation"})
		if err != nil {
			return nil
		}
		var out []corev1.Pod
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				out = append(out, p)
			}
		}
		return out
	}
	eventually(t, 2*time.Minute, "the Deployment's 2 pods running", func() bool { return len(running(cs)) == 2 })
	pods := running(cs)
	eventually(t, time.Minute, "the default ServiceAccount", func() bool {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
	before := saToken(t, cs, nil)
	// Typhoon's components (CoreDNS, Cilium) read the in-cluster CA and
	// their service-account tokens at start: the rotation restarts them.
	components := componentPods(ctx, t, cs)
	if len(components) != len(typhoonComponents) {
		t.Fatalf("Typhoon's components before the rotation: %v", components)
	}

	poll := startAPIPoller(t, typhoonBuilt.kubeconfig, addrs(controllers, ":6443"))
	began := time.Now()
	id := startRunInv(t, "ca-rotation", inv, "--set", typhoonPodSettle)
	waitForDropGate(t, id, 40*time.Minute)
	t.Logf("ca-rotation to the drop gate: %s", time.Since(began).Round(time.Second))

	// Kedge's kubeconfig now trusts the new CA and holds a credential
	// from it.
	cs = kubeClient(t, typhoonBuilt.kubeconfig)
	after := saToken(t, cs, nil)
	// The new CAs, as Vault keeps them beside the old until the end.
	v, _ := labVault(t)
	kv := v.Client.KVv2(vaultlab.KVPath)
	newCA := map[string]*x509.Certificate{}
	for name, path := range map[string]string{"cluster": "ca", "etcd": "etcd-ca", "front-proxy": "aggregation-ca"} {
		rec, err := kv.Get(ctx, "kedge/clusters/"+typhoonCluster+"/"+path+"-next")
		if err != nil {
			t.Fatalf("the new %s CA in Vault: %v", name, err)
		}
		text, _ := rec.Data["certificate"].(string)
		newCA[name] = parsePEMCert(t, []byte(text))
	}
	for _, a := range controllers {
		for port, ca := range map[string]string{":6443": "cluster", ":2379": "etcd", ":2380": "etcd"} {
			if c := servedCert(t, a+port); c.CheckSignatureFrom(newCA[ca]) != nil {
				t.Errorf("at the gate %s%s serves a certificate from %q", a, port, c.Issuer)
			}
		}
	}
	if !tokenAccepted(t, cs, before) || !tokenAccepted(t, cs, after) {
		t.Errorf("at the gate: a token from before accepted %v, one from after %v", tokenAccepted(t, cs, before), tokenAccepted(t, cs, after))
	}

	if out, errOut, code := kedge(t, "approve", id, "--by", "sre-on-call", "--output", "json"); code != 0 {
		t.Fatalf("kedge approve: exit %d: %s %s", code, out, errOut)
	}
	if err := waitClosed(t, id, 30*time.Minute); err != nil {
		pr, _ := queryProgress(id)
		t.Fatalf("ca-rotation: %v\n%+v", err, pr)
	}
	total := time.Since(began)
	pr, _ := queryProgress(id)
	t.Logf("ca-rotation on 3 controllers + %d nodes: %s in all; %s", len(typhoonNodesNow(t, cs)), total.Round(time.Second), slowSteps(pr))
	t.Logf("tyc1's stages:%s", runStepTimes(ctx, typhoonCluster+"/node/tyc1"))
	// The new CA's key, the service-account key and every reissued key
	// went through the run sealed: no history holds one in plain text.
	ids := []string{id}
	for _, st := range pr.Steps {
		if st.Child != "" {
			ids = append(ids, st.Child)
		}
	}
	for _, h := range typhoonBuilt.lab.Hosts[:5] {
		ids = append(ids, workflows.NodeWorkflowID(typhoonCluster, h.Name))
	}
	for _, w := range ids {
		if bytes.Contains(storedHistory(t, w), []byte("PRIVATE KEY")) {
			t.Errorf("the history of %s holds a private key in plain text", w)
		}
	}
	longest, none, lastErr := poll.report()
	t.Logf("API servers' longest outage: %v (none answered for %s at most); last errors %v", longest, none, lastErr)
	for a, d := range longest {
		if d > 90*time.Second {
			t.Errorf("%s was out for %s, longer than a restart", a, d)
		}
	}
	if none > 5*time.Second {
		t.Errorf("no API server answered for %s", none)
	}
	typhoonBuilt.client = cs

	// Served: the new CAs only.
	for _, a := range controllers {
		for port, ca := range map[string]string{":6443": "cluster", ":2379": "etcd", ":2380": "etcd"} {
			c := servedCert(t, a+port)
			if c.CheckSignatureFrom(newCA[ca]) != nil || c.CheckSignatureFrom(old[ca]) == nil {
				t.Errorf("%s%s serves a certificate from %q", a, port, c.Issuer)
			}
		}
	}
	// No trust point holds an old CA, on any host; what each controller
	// uses is from the new CAs.
	for i, spec := range typhoonHosts {
		h := typhoonBuilt.lab.Hosts[i]
		if spec.spare && !slices.Contains(typhoonNodesNow(t, cs), typhoonFQDN(h.Name)) {
			continue
		}
		files := []string{typhoon.BootstrapKubeconfig, typhoon.KubeletKubeconfig, "/etc/kubernetes/ca.crt"}
		// The kubelet's client certificate, from the new CA through a CSR.
		if c := kubeletClientCert(t, h); c == nil || c.CheckSignatureFrom(newCA["cluster"]) != nil || c.Subject.CommonName != "system:node:"+typhoonFQDN(h.Name) {
			t.Errorf("%s: the kubelet's client certificate after the rotation: %v", h.Name, c)
		}
		if spec.controller {
			files = append(files, typhoon.CACert, typhoon.AggregationCA, typhoon.EtcdClientCA, typhoon.EtcdServerCA, typhoon.EtcdPeerCA,
				typhoon.AdminK, typhoon.ControllerManagerK, typhoon.SchedulerK, typhoon.APIServerCert, typhoon.EtcdClientCert,
				typhoon.EtcdServerCert, typhoon.EtcdPeerCert, typhoon.AggregationCert)
		}
		for _, f := range files {
			b, err := h.ReadFile(f)
			if err != nil {
				t.Errorf("%s:%s: %v", h.Name, f, err)
				continue
			}
			for _, c := range certsIn(t, b) {
				for name, o := range old {
					if c.Equal(o) || c.CheckSignatureFrom(o) == nil {
						t.Errorf("%s:%s holds the old %s CA or a certificate from it (%q)", h.Name, f, name, c.Subject.CommonName)
					}
				}
			}
		}
	}
	if got := etcdMembers(t); strings.Join(got, ",") != "tyc1,tyc2,tyc3" {
		t.Errorf("etcd members after the rotation: %v", got)
	}
	if pending := componentsPending(ctx, cs, true); len(pending) > 0 {
		t.Errorf("Typhoon's components after the rotation: %v", pending)
	}
	now := componentPods(ctx, t, cs)
	for name, uids := range components {
		for _, u := range uids {
			if slices.Contains(now[name], u) {
				t.Errorf("%s's pod %s from before the rotation still runs", name, u)
			}
		}
	}
	if b, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz/etcd").DoRaw(ctx); err != nil {
		t.Errorf("etcd after the rotation: %s (%v)", b, err)
	}
	if err := waitTyphoonReady(ctx, cs, typhoonNodesNow(t, cs)); err != nil {
		t.Error(err)
	}
	var uids []string
	for _, p := range running(cs) {
		uids = append(uids, string(p.UID))
	}
	if len(uids) != 2 || !slices.Contains(uids, string(pods[0].UID)) || !slices.Contains(uids, string(pods[1].UID)) {
		t.Errorf("the Deployment's pods after the rotation: %v, were %s and %s", uids, pods[0].UID, pods[1].UID)
	}
	// A pod's view: its namespace's kube-root-ca.crt and a token bound to
	// it, as the kubelet mounts them.
	cm, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := certsIn(t, []byte(cm.Data["ca.crt"])); len(got) != 1 || !got[0].Equal(newCA["cluster"]) {
		t.Errorf("kube-root-ca.crt holds %d certificates, not the new CA alone", len(got))
	}
	podTok := saToken(t, cs, &pods[0])
	podCfg := &rest.Config{Host: "https://" + controllers[1] + ":6443", BearerToken: podTok,
		TLSClientConfig: rest.TLSClientConfig{CAData: []byte(cm.Data["ca.crt"]), ServerName: typhoonAPIServer}}
	podClient, err := kubernetes.NewForConfig(podCfg)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := podClient.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{}); err != nil ||
		r.Status.UserInfo.Username != "system:serviceaccount:default:default" {
		t.Errorf("a pod's view of the API after the rotation: %+v (%v)", r, err)
	}
	if tokenAccepted(t, cs, before) || !tokenAccepted(t, cs, after) {
		t.Errorf("after the drop: a token from before accepted %v (want false), one from after %v (want true)", tokenAccepted(t, cs, before), tokenAccepted(t, cs, after))
	}
	if !bytes.Contains(readTyphoonFile(t, "tyc1", typhoon.ControllerManagerK), []byte("client-certificate-data")) {
		t.Error("controller-manager.conf lost its credential")
	}
	if st := step(t, pr, "terraform-export"); st.State != workflows.StateSucceeded {
		t.Fatalf("terraform-export: %+v", st)
	}
	addWorkerTheTerraformWay(t, kv, controllers[0], newCA["cluster"])
}

// addWorkerTheTerraformWay reads what ca-rotation exported for Typhoon's
// Terraform from Vault, as Terraform's Vault provider would, and checks
// it: the admin kubeconfig is cluster-admin through the new CA; the
// assets bundle holds every entry of Terraform's own assets_dist. Then
// it adds the spare tyw5 as Typhoon's Terraform adds a worker: Ignition
// from Typhoon's worker config, the exported kubeconfig-kubelet copied as
// core and moved into /etc/kubernetes, its first boot. It must join:
// TLS bootstrap with the bootstrap token through the new CA, a client
// certificate the new CA signed, Ready. Before the export, a worker got
// Terraform's kubeconfig-kubelet, which trusts the old CA alone.
func addWorkerTheTerraformWay(t *testing.T, kv *vaultapi.KVv2, controller string, newCA *x509.Certificate) {
	t.Helper()
	ctx := t.Context()
	rec, err := kv.Get(ctx, "kedge/clusters/"+typhoonCluster+"/terraform")
	if err != nil {
		t.Fatalf("the export in Vault: %v", err)
	}
	field := func(name string) []byte {
		v, _ := rec.Data[name].(string)
		if v == "" {
			t.Fatalf("the export has no %s", name)
		}
		return []byte(v)
	}
	kubelet, admin, bundle := field("kubeconfig-kubelet"), field("kubeconfig-admin"), field("assets")

	cfg, err := clientcmd.RESTConfigFromKubeConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Host, cfg.TLSClientConfig.ServerName = "https://"+controller+":6443", typhoonAPIServer
	adminClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adminClient.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the exported kubeconfig-admin: %v", err)
	}
	assets, err := typhoonBuilt.pki.Assets()
	if err != nil {
		t.Fatal(err)
	}
	var exported []string
	for _, m := range regexp.MustCompile(`(?m)^##### (\S+)$`).FindAllSubmatch(bundle, -1) {
		exported = append(exported, string(m[1]))
	}
	if want := slices.Sorted(maps.Keys(assets)); !slices.Equal(exported, want) {
		t.Errorf("the exported bundle's entries:\n%v\nTerraform's assets_dist:\n%v", exported, want)
	}

	// Terraform's own kubeconfig-kubelet is what a worker got before.
	stale, err := typhoonBuilt.pki.BootstrapKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(stale, kubelet) {
		t.Fatal("the export is Terraform's kubeconfig-kubelet unchanged")
	}
	var controllers []typhoon.Host
	for _, c := range typhoonHosts {
		if c.controller && !c.spare {
			controllers = append(controllers, typhoon.Host{Name: c.name, Domain: typhoonFQDN(c.name), Flavor: c.flavor, Controller: true})
		}
	}
	h := typhoonHost(t, "tyw5")
	t.Cleanup(func() {
		// Out of the world again, for the tests after this one.
		_, _ = h.Exec(context.Background(), "sh", "-c", "systemctl disable --now kubelet.path; systemctl stop kubelet.service")
		_ = typhoonBuilt.client.CoreV1().Nodes().Delete(context.Background(), typhoonFQDN("tyw5"), metav1.DeleteOptions{})
	})
	if err := ignite(ctx, h, typhoon.Host{Name: "tyw5", Domain: typhoonFQDN("tyw5"), Flavor: typhoon.Flatcar}, controllers); err != nil {
		t.Fatal(err)
	}
	if err := copyTyphoonSecrets(ctx, h, kubelet, nil, false, typhoon.Flatcar); err != nil {
		t.Fatal(err)
	}
	if err := h.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	cs := typhoonBuilt.client
	began := time.Now()
	defer func() {
		t.Logf("tyw5, added with the export's %d assets' kubeconfig-kubelet, Ready: %s", len(exported), time.Since(began).Round(time.Second))
	}()
	eventually(t, 3*time.Minute, "tyw5 Ready, joined with the exported kubeconfig-kubelet", func() bool {
		n, err := cs.CoreV1().Nodes().Get(ctx, typhoonFQDN("tyw5"), metav1.GetOptions{})
		return err == nil && nodeIsReady(n)
	})
	if c := kubeletClientCert(t, h); c == nil || c.CheckSignatureFrom(newCA) != nil {
		t.Errorf("tyw5's client certificate is not from the new CA: %v", c)
	}
}

// kubeletClientCert is the client certificate h's kubelet presents:
// embedded in its kubeconfig, or in the file it names (a link with an
// absolute target, as the kubelet's store makes them: read on the host).
func kubeletClientCert(t *testing.T, h *testhosts.Host) *x509.Certificate {
	t.Helper()
	kc := readTyphoonFile(t, h.Name, typhoon.KubeletKubeconfig)
	if m := regexp.MustCompile(`client-certificate: *(\S+)`).FindSubmatch(kc); m != nil {
		b, err := h.Exec(t.Context(), "cat", string(m[1]))
		if err != nil {
			t.Fatalf("%s: %s: %v", h.Name, m[1], err)
		}
		kc = b
	}
	return clientCertIn(t, kc)
}

// clientCertIn is the leaf client certificate of a kubelet's kubeconfig
// (embedded) or pair file.
func clientCertIn(t *testing.T, content []byte) *x509.Certificate {
	t.Helper()
	if m := regexp.MustCompile(`client-certificate-data: *(\S+)`).FindSubmatch(content); m != nil {
		b, err := base64.StdEncoding.DecodeString(string(m[1]))
		if err != nil {
			t.Fatal(err)
		}
		content = b
	}
	for _, c := range certsIn(t, content) {
		if !c.IsCA {
			return c
		}
	}
	return nil
}

// waitForDropGate waits until a ca-rotation run waits at its approve-drop
// gate; a step that failed or waits for anything else fails the test.
func waitForDropGate(t *testing.T, id string, within time.Duration) {
	t.Helper()
	eventually(t, within, "ca-rotation to wait at approve-drop", func() bool {
		pr, err := queryProgress(id)
		if err != nil {
			return false
		}
		for _, s := range pr.Steps {
			if s.State == workflows.StateFailed || s.State == workflows.StateWaiting && s.ID != "approve-drop" {
				t.Fatalf("ca-rotation: step %s %s: %s\n%+v", s.ID, s.State, s.LastError, pr)
			}
			if s.ID == "approve-drop" && s.State == workflows.StateWaiting {
				return true
			}
		}
		return false
	})
}

// saToken is a 2-hour token of the default ServiceAccount in default,
// bound to pod when one is given (as the kubelet mounts it).
func saToken(t *testing.T, c kubernetes.Interface, pod *corev1.Pod) string {
	t.Helper()
	ttl := int64(7200)
	spec := authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}
	if pod != nil {
		spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tr, err := c.CoreV1().ServiceAccounts("default").CreateToken(t.Context(), "default", &authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// tokenAccepted says whether the API servers accept a token now.
func tokenAccepted(t *testing.T, c kubernetes.Interface, tok string) bool {
	t.Helper()
	r, err := c.AuthenticationV1().TokenReviews().Create(t.Context(), &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tok}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Status.Authenticated
}

func addrs(hosts []string, port string) []string {
	var out []string
	for _, h := range hosts {
		out = append(out, h+port)
	}
	return out
}

// typhoonNodesNow are the Nodes the cluster has now.
func typhoonNodesNow(t *testing.T, cs kubernetes.Interface) []string {
	t.Helper()
	nodes, err := cs.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range nodes.Items {
		out = append(out, n.Name)
	}
	return out
}
