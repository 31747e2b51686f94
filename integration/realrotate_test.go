package integration

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"kedge.dev/kedge/integration/images"
	"kedge.dev/kedge/integration/realnode"
	"kedge.dev/kedge/integration/vaultlab"
	"kedge.dev/kedge/workflows"
)

// apiClientRef is an image whose pods ask the API who they are, with
// the token and CA the kubelet mounts: kubectl (in-cluster: the
// kubernetes Service, the pod's service-account token and
// kube-root-ca.crt) beside the pause binary that keeps the container up.
const apiClientRef = "kedge.test/api-client:1"

// apiClientImage builds the image of apiClientRef and returns its
// archive.
func apiClientImage(ctx context.Context, t *testing.T, tools string) string {
	t.Helper()
	pause, err := images.Pause(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kubectl, err := images.BinaryFiles(filepath.Join(tools, "kubectl"), "/usr/local/bin/kubectl")
	if err != nil {
		t.Fatal(err)
	}
	archives, err := images.Build(images.Image{Ref: apiClientRef, Entrypoint: pause.Entrypoint, Files: append(pause.Files, kubectl...)})
	if err != nil {
		t.Fatal(err)
	}
	return archives[0]
}

// apiClientDeployment is a Deployment of apiClientRef whose pods are
// Ready while kubectl, run by the kubelet as their readiness probe,
// reaches the API through the kubernetes Service, trusting the pod's
// mounted CA and authenticated by its mounted token. The token is the
// in-cluster one, projected where every pod finds it, but asked for the
// shortest life the API server grants (10 minutes), so that its kubelet
// renews it every 8 minutes rather than every 48: a rotation waits for
// that renewal before it drops the old service-account key.
func apiClientDeployment(name string, replicas int32) *appsv1.Deployment {
	d := deployment(name, replicas, nil)
	spec := &d.Spec.Template.Spec
	spec.AutomountServiceAccountToken = ptr.To(false)
	spec.Volumes = []corev1.Volume{{Name: "api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](600)}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}}}}
	c := &spec.Containers[0]
	c.VolumeMounts = []corev1.VolumeMount{{Name: "api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}}
	c.Image, c.ImagePullPolicy = apiClientRef, corev1.PullNever
	// No flag that changes kubectl's client configuration: one makes it
	// no longer the default, and kubectl then skips the in-cluster one.
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/usr/local/bin/kubectl", "auth", "whoami"}}},
		PeriodSeconds: 3, TimeoutSeconds: 5, FailureThreshold: 1, SuccessThreshold: 1,
	}
	c.Env = []corev1.EnvVar{{Name: "HOME", Value: "/tmp"}}
	return d
}

// readyWatch records, from the API as the kubeconfig reaches it now, the
// longest time each of an app's pods was seen not Ready.
type readyWatch struct {
	mu       sync.Mutex
	notReady map[string]time.Time
	longest  map[string]time.Duration
	stop     func()
	done     chan struct{}
}

func watchReady(t *testing.T, kubeconfig, app string) *readyWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &readyWatch{notReady: map[string]time.Time{}, longest: map[string]time.Duration{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			time.Sleep(time.Second)
			cs, err := kubeClientOf(kubeconfig)
			if err != nil {
				continue
			}
			lctx, lcancel := context.WithTimeout(ctx, 3*time.Second)
			pods, err := cs.CoreV1().Pods("default").List(lctx, metav1.ListOptions{LabelSelector: "app=" + app})
			lcancel()
			if err != nil {
				continue // the API server restarts: nothing to see
			}
			now := time.Now()
			w.mu.Lock()
			for _, p := range pods.Items {
				if podReady(&p) {
					if since, ok := w.notReady[p.Name]; ok {
						w.longest[p.Name] = max(w.longest[p.Name], now.Sub(since))
						delete(w.notReady, p.Name)
					}
				} else if _, ok := w.notReady[p.Name]; !ok {
					w.notReady[p.Name] = now
				}
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.stop(); <-w.done })
	return w
}

func (w *readyWatch) report() map[string]time.Duration {
	w.stop()
	<-w.done
	now := time.Now()
	for p, since := range w.notReady {
		w.longest[p] = max(w.longest[p], now.Sub(since))
	}
	return w.longest
}

// mountedCA says which CAs the pod's mounted ca.crt holds now, read on
// its node, for a failure.
func mountedCA(t *testing.T, nodes []*realSSHNode, p corev1.Pod) string {
	for _, n := range nodes {
		if n.node.Name != p.Spec.NodeName {
			continue
		}
		out, err := n.host.Exec(t.Context(), "sh", "-c", "cat /var/lib/kubelet/pods/"+string(p.UID)+"/volumes/kubernetes.io~projected/*/ca.crt")
		if err != nil {
			return err.Error()
		}
		var names []string
		for _, c := range certsIn(t, out) {
			names = append(names, c.Subject.CommonName)
		}
		return fmt.Sprintf("; its mounted ca.crt holds %q", names)
	}
	return ""
}

// serviceRoute is, for a failure, where the kubernetes Service leads
// from each node: kube-proxy's rules for it, the route, and the
// certificate whatever answers there presents; and kube-proxy's pods and
// their last log lines.
func serviceRoute(ctx context.Context, cs kubernetes.Interface, nodes []*realSSHNode) string {
	var b strings.Builder
	script := `iptables-save -t nat | grep -c KUBE-SEP; iptables-save -t nat | grep -E '10.96.0.1/32|KUBE-SEP.*DNAT' | head -4; ip route get 10.96.0.1
openssl s_client -connect 10.96.0.1:443 </dev/null 2>/dev/null | openssl x509 -noout -subject -issuer`
	for _, n := range nodes {
		out, err := n.node.Command(ctx, "sh", "-c", script).CombinedOutput()
		fmt.Fprintf(&b, "\n%s: %s %v", n.node.Name, out, err)
	}
	out, _ := exec.CommandContext(ctx, "sh", "-c", "iptables-save -t nat | grep -E '10.96.0.1/32' | head -3").CombinedOutput()
	fmt.Fprintf(&b, "\nthis machine: %s", out)
	pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-proxy"})
	if err != nil {
		return b.String() + err.Error()
	}
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "\n%s on %s: %s, ready %v", p.Name, p.Spec.NodeName, p.Status.Phase, podReady(&p))
		logs, err := cs.CoreV1().Pods("kube-system").GetLogs(p.Name, &corev1.PodLogOptions{TailLines: ptr.To[int64](15)}).DoRaw(ctx)
		fmt.Fprintf(&b, "\n%s %v", logs, err)
	}
	return b.String()
}

// podEvents is an app's pods' phases and their events, for a failure.
func podEvents(ctx context.Context, cs kubernetes.Interface, app string) string {
	var b strings.Builder
	list, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return err.Error()
	}
	for _, p := range list.Items {
		fmt.Fprintf(&b, "\n%s on %s: %s, ready %v", p.Name, p.Spec.NodeName, p.Status.Phase, podReady(&p))
		ev, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + p.Name})
		if err != nil {
			continue
		}
		for _, e := range ev.Items {
			fmt.Fprintf(&b, "\n  %s..%s %s %s (%d): %s", e.FirstTimestamp.Format(time.TimeOnly), e.LastTimestamp.Format(time.TimeOnly),
				e.Type, e.Reason, e.Count, tail(e.Message, 600))
		}
	}
	return b.String()
}

// kubeClientOf is a client from the kubeconfig as it is now.
func kubeClientOf(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 3 * time.Second
	return kubernetes.NewForConfig(cfg)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ca-rotation on Kedge's own layout with real kubelets: the cluster
// bootstrap builds on three real nodes (etcd and the control plane as the
// controller's static pods, the kubelets' client certificates from TLS
// bootstrap, their serving certificates from cert-renewal) replaces its
// cluster and etcd CAs and its service-account key (it has no
// front-proxy CA) while a Deployment's pods ask the API who they are with their
// mounted token and CA. Afterwards every served certificate (6443, 2379
// and 2380 on the controller, 10250 on every node) chains to the new CAs
// only; no file of /etc/kubernetes on any host, no kubelet kubeconfig,
// client or serving certificate holds an old CA or a certificate from
// one; every kubelet's client certificate is the new CA's and still the
// link its certificate store keeps; the Nodes are Ready, etcd is healthy,
// the pods are the same and Ready, the token from before the drop is
// refused and the one from after accepted.
func TestRealKubeletCARotation(t *testing.T) {
	realLane.join(t)
	tools := realKubeletTools(t)
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Minute)
	defer cancel()
	client := apiClientImage(ctx, t, tools)
	// The cluster TestRealKubeletBootstrapAndCertRenewal checked, after
	// its cert-renewal: every kubelet serves a certificate from the
	// cluster CA. The rotation replaces its CAs: only
	// TestRealKubeletClusterUpgrade, which closes it, uses it after this
	// one.
	rc, _ := renewedRealCluster(t, tools)
	nodes, ctl, inv := rc.nodes, rc.ctl, rc.inventory
	for _, n := range nodes {
		if err := n.node.Import(ctx, client); err != nil {
			t.Fatal(err)
		}
	}
	checkRealCluster(t, rc.client, nodes)

	old := map[string]*x509.Certificate{
		"cluster": firstCert(t, []byte(ctl.file(t, "/etc/kubernetes/pki/ca.crt"))),
		"etcd":    firstCert(t, []byte(ctl.file(t, "/etc/kubernetes/pki/etcd/ca.crt"))),
	}
	endpoints := map[string]string{net.JoinHostPort(ctl.node.NodeIP, "6443"): "cluster",
		net.JoinHostPort(ctl.node.NodeIP, "2379"): "etcd", net.JoinHostPort(ctl.node.NodeIP, "2380"): "etcd"}
	for _, n := range nodes {
		endpoints[net.JoinHostPort(n.node.NodeIP, "10250")] = "cluster"
	}
	for ep, ca := range endpoints {
		if c := servedCert(t, ep); c.CheckSignatureFrom(old[ca]) != nil {
			t.Fatalf("before the rotation %s serves a certificate from %q, not the %s CA", ep, c.Issuer, ca)
		}
	}

	cs := rc.client
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, apiClientDeployment("api-client", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := func(c kubernetes.Interface) []corev1.Pod {
		list, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=api-client"})
		if err != nil {
			return nil
		}
		var out []corev1.Pod
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && podReady(&p) {
				out = append(out, p)
			}
		}
		return out
	}
	for deadline := time.Now().Add(3 * time.Minute); len(pods(cs)) != 2; time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("the api-client pods not Ready after 3m: their kubectl does not reach the API%s", podEvents(ctx, cs, "api-client"))
		}
	}
	before := pods(cs)
	oldToken := saToken(t, cs, nil)

	ready := watchReady(t, rc.kubeconfig, "api-client")
	began := time.Now()
	// The kubelets sync their pods every realnode.SyncFrequency (checked
	// by checkRealCluster): the mounted kube-root-ca.crt follows within
	// one and a half of it.
	id := startRunInv(t, "ca-rotation", inv, "--set", "podSettle="+(3*realnode.SyncFrequency).String())
	waitForDropGate(t, id, 30*time.Minute)
	t.Logf("ca-rotation to the drop gate: %s", time.Since(began).Round(time.Second))

	cs = kubeClient(t, rc.kubeconfig)
	newToken := saToken(t, cs, nil)
	v, _ := labVault(t)
	kv := v.Client.KVv2(vaultlab.KVPath)
	newCA := map[string]*x509.Certificate{}
	for name, path := range map[string]string{"cluster": "ca", "etcd": "etcd-ca"} {
		rec, err := kv.Get(ctx, "kedge/clusters/"+rc.name+"/"+path+"-next")
		if err != nil {
			t.Fatalf("the new %s CA in Vault: %v", name, err)
		}
		text, _ := rec.Data["certificate"].(string)
		newCA[name] = parsePEMCert(t, []byte(text))
	}

	if out, errOut, code := kedge(t, "approve", id, "--by", "sre-on-call", "--output", "json"); code != 0 {
		t.Fatalf("kedge approve: exit %d: %s %s", code, out, errOut)
	}
	if err := waitClosed(t, id, 20*time.Minute); err != nil {
		pr, _ := queryProgress(id)
		t.Fatalf("ca-rotation: %v\n%+v", err, pr)
	}
	total := time.Since(began)
	pr, _ := queryProgress(id)
	if pr.State != workflows.StateSucceeded {
		t.Fatalf("ca-rotation: %s\n%+v", pr.State, pr)
	}
	t.Logf("ca-rotation on 1 controller + 2 workers, real kubelets: %s in all; %s", total.Round(time.Second), slowSteps(pr))
	t.Logf("the controller's stages:%s", runStepTimes(ctx, rc.name+"/node/"+ctl.node.Name))
	t.Logf("the controller's kubelet on its static pods:%s", staticPodLines(ctl))
	cs = kubeClient(t, rc.kubeconfig)

	t.Run("served certificates chain to the new CAs only", func(t *testing.T) {
		for ep, ca := range endpoints {
			if c := servedCert(t, ep); c.CheckSignatureFrom(newCA[ca]) != nil || c.CheckSignatureFrom(old[ca]) == nil {
				t.Errorf("%s serves a certificate from %q", ep, c.Issuer)
			}
		}
	})

	t.Run("no trust point holds an old CA", func(t *testing.T) {
		for _, n := range nodes {
			checkNoOldCA(t, n, old)
		}
	})

	t.Run("every kubelet's client certificate is the new CA's, where its kubeconfig says", func(t *testing.T) {
		for _, n := range nodes {
			leaves := kubeletClientCerts(t, n)
			if len(leaves) == 0 {
				t.Errorf("%s: no client certificate for the kubelet", n.node.Name)
			}
			for _, leaf := range leaves {
				if leaf.CheckSignatureFrom(newCA["cluster"]) != nil || leaf.Subject.CommonName != "system:node:"+n.node.Name {
					t.Errorf("%s: a client certificate of the kubelet after the rotation: %q from %q", n.node.Name, leaf.Subject.CommonName, leaf.Issuer.CommonName)
				}
			}
		}
	})

	t.Run("the cluster works", func(t *testing.T) {
		checkRealCluster(t, cs, nodes)
		if b, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz/etcd").DoRaw(ctx); err != nil {
			t.Errorf("etcd after the rotation: %s (%v)", b, err)
		}
		if tokenAccepted(t, cs, oldToken) || !tokenAccepted(t, cs, newToken) {
			t.Errorf("after the drop: a token from before accepted %v (want false), one from after %v (want true)", tokenAccepted(t, cs, oldToken), tokenAccepted(t, cs, newToken))
		}
		cm, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := certsIn(t, []byte(cm.Data["ca.crt"])); len(got) != 1 || !got[0].Equal(newCA["cluster"]) {
			t.Errorf("kube-root-ca.crt holds %d certificates, not the new CA alone", len(got))
		}
	})

	t.Run("the Deployment's pods still run and reach the API", func(t *testing.T) {
		// Ready again after every restart: a probe of kubectl with the
		// token and CA the kubelet mounts now succeeded.
		var now []corev1.Pod
		deadline := time.Now().Add(2 * time.Minute)
		for now = pods(cs); len(now) != 2 && time.Now().Before(deadline); now = pods(cs) {
			time.Sleep(time.Second)
		}
		var uids []string
		for _, p := range now {
			uids = append(uids, string(p.UID))
		}
		for _, p := range before {
			if !slices.Contains(uids, string(p.UID)) {
				t.Errorf("pod %s is gone or not Ready after the rotation (Ready now: %v)%s", p.Name, uids, mountedCA(t, nodes, p))
			}
		}
		if t.Failed() {
			t.Log(podEvents(ctx, cs, "api-client"))
			t.Log(serviceRoute(ctx, cs, nodes))
		}
		t.Logf("the pods' longest time not Ready through the rotation: %v", ready.report())
	})
}

// kubeletClientCerts are the client certificates the node's kubelet may
// present: in the file its kubeconfig names, which TLS bootstrap made a
// link to a dated file and must still be one (the kubelet's certificate
// store refuses a regular file there when it next rotates); or embedded
// in its kubeconfig (the controller's, rendered by bootstrap) and in its
// store, which must be a link too.
func kubeletClientCerts(t *testing.T, n *realSSHNode) []*x509.Certificate {
	t.Helper()
	const current = "/var/lib/kubelet/pki/kubelet-client-current.pem"
	kc := []byte(n.file(t, "/var/lib/kubelet/kubeconfig"))
	if m := regexp.MustCompile(`client-certificate: *(\S+)`).FindSubmatch(kc); m != nil {
		if string(m[1]) != current {
			t.Errorf("%s: the kubelet's kubeconfig names %s", n.node.Name, m[1])
		}
		if target, err := n.host.Exec(t.Context(), "readlink", current); err != nil || !strings.HasPrefix(string(target), "/var/lib/kubelet/pki/kubelet-client-") {
			t.Errorf("%s: %s is no longer a link to a dated file (%q, %v)", n.node.Name, current, target, err)
		}
		b, err := n.host.Exec(t.Context(), "cat", current)
		if err != nil {
			t.Fatal(err)
		}
		kc = b
	} else if _, err := n.host.Exec(t.Context(), "test", "-e", current); err == nil {
		// A kubelet that rotates its certificates copied the embedded
		// one to its store at its first start, and presents the store's.
		b, err := n.host.Exec(t.Context(), "cat", current)
		if err != nil {
			t.Fatal(err)
		}
		if target, err := n.host.Exec(t.Context(), "readlink", current); err != nil || !strings.HasPrefix(string(target), "/var/lib/kubelet/pki/kubelet-client-") {
			t.Errorf("%s: %s is no longer a link to a dated file (%q, %v)", n.node.Name, current, target, err)
		}
		kc = append(kc, '\n')
		kc = append(kc, b...)
	}
	var leaves []*x509.Certificate
	for _, c := range certsOfFile(t, kc) {
		if !c.IsCA {
			leaves = append(leaves, c)
		}
	}
	return leaves
}

// checkNoOldCA fails for every file of /etc/kubernetes on the node, and
// the kubelet's kubeconfig, client and serving certificates, that holds
// one of the old CAs or a certificate one signed.
func checkNoOldCA(t *testing.T, n *realSSHNode, old map[string]*x509.Certificate) {
	t.Helper()
	out, err := n.host.Exec(t.Context(), "find", "/etc/kubernetes", "-type", "f")
	if err != nil {
		t.Fatal(err)
	}
	files := append(strings.Fields(string(out)), "/var/lib/kubelet/kubeconfig", "/var/lib/kubelet/pki/kubelet.crt")
	if _, err := n.host.Exec(t.Context(), "test", "-e", "/var/lib/kubelet/pki/kubelet-client-current.pem"); err == nil {
		files = append(files, "/var/lib/kubelet/pki/kubelet-client-current.pem")
	}
	for _, f := range files {
		b, err := n.host.Exec(t.Context(), "cat", f)
		if err != nil {
			t.Errorf("%s: %v", n.node.Name, err)
			continue
		}
		for _, c := range certsOfFile(t, b) {
			for name, o := range old {
				if c.Equal(o) || c.CheckSignatureFrom(o) == nil {
					t.Errorf("%s:%s holds the old %s CA or a certificate from it (%q)", n.node.Name, f, name, c.Subject.CommonName)
				}
			}
		}
	}
}

// certsOfFile is every certificate a file holds: its PEM blocks and a
// kubeconfig's certificate-authority-data and client-certificate-data.
func certsOfFile(t *testing.T, content []byte) []*x509.Certificate {
	t.Helper()
	out := certsIn(t, content)
	for _, m := range regexp.MustCompile(`(?:certificate-authority|client-certificate)-data: *(\S+)`).FindAllSubmatch(content, -1) {
		b, err := base64.StdEncoding.DecodeString(string(m[1]))
		if err != nil {
			t.Fatalf("%s: %v", m[0], err)
		}
		out = append(out, certsIn(t, b)...)
	}
	return out
}

// staticPodLines are the controller kubelet's log lines on what it did
// with the static pods through a rotation (mirror pods deleted and made,
// containers killed and started), for where a restart's minute goes.
func staticPodLines(n *realSSHNode) string {
	b, err := n.host.ReadFile("/var/log/units/kubelet.service.log")
	if err != nil {
		return " " + err.Error()
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		for _, m := range []string{"mirror pod", "Killing container", "Failed creating", "SyncLoop ADD", "SyncLoop REMOVE", "probe"} {
			if strings.Contains(l, m) && (strings.Contains(l, "etcd") || strings.Contains(l, "kube-apiserver")) {
				out = append(out, l)
				break
			}
		}
	}
	if len(out) > 150 {
		out = out[len(out)-150:]
	}
	return "\n" + strings.Join(out, "\n")
}
