package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"

	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/integration/controlplane"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/integration/typhoon"
	"kedge.dev/kedge/integration/typhoon/butane"
	"kedge.dev/kedge/integration/typhoon/upstream"
	"kedge.dev/kedge/integration/vaultlab"
)

const (
	typhoonCluster   = "typhoon-world"
	typhoonDomain    = "typhoon.test"
	typhoonAPIServer = "api." + typhoonDomain
	// typhoonKubelet is the kubelet image Typhoon v1.35.4's templates
	// name; the swap tests move to a later one.
	typhoonKubelet = "quay.io/poseidon/kubelet:v1.35.4"
	// typhoonEtcdImage is the etcd image the templates name. The world
	// runs that version of etcd, built by scripts/kube-tools.sh
	// (typhoonEtcdBinary), under that name.
	typhoonEtcdImage  = "quay.io/coreos/etcd:v3.5.13"
	typhoonEtcdBinary = "etcd-v3.5.13"
)

// typhoonProgram is where the world's tools hold what a Typhoon
// controller runs as c: its own etcd version, else the world's.
func typhoonProgram(tools, c string) string {
	if c == "etcd" {
		return filepath.Join(tools, typhoonEtcdBinary)
	}
	return filepath.Join(tools, c)
}

// typhoonHosts are the world's hosts: Typhoon's controllers and workers
// (name, the etcd member name, and domain, the host's and Node's name).
// A spare host is a bare machine of its flavour on the cluster's
// network, in no inventory until node-join adds it: the provisioner has
// given it its OS and nothing else.
var typhoonHosts = []typhoonHostSpec{
	{"tyc1", typhoon.Flatcar, true, false},
	{"tyc2", typhoon.FCOS, true, false},
	{"tyc3", typhoon.Flatcar, true, false},
	{"tyw1", typhoon.Flatcar, false, false},
	{"tyw2", typhoon.FCOS, false, false},
	{"tyw3", typhoon.Flatcar, false, true},
	{"tyw4", typhoon.FCOS, false, true},
	{"tyw5", typhoon.Flatcar, false, true},
}

// typhoonHostSpec is one host of a Typhoon world. A spare controller is
// a machine Typhoon's provisioner would make a controller of, given its OS
// and nothing else (no Ignition yet, in no etcd's initial cluster).
type typhoonHostSpec struct {
	name, flavor string
	controller   bool
	spare        bool
}

// typhoonOSFamily is the OS a host of each Typhoon flavour runs: its
// os-release and its update tool (rpm-ostree, update_engine_client),
// which os-update drives.
var typhoonOSFamily = map[string]testhosts.OSFamily{typhoon.FCOS: testhosts.FedoraCoreOS, typhoon.Flatcar: testhosts.Flatcar}

// typhoonFQDN is the world's host called name's DNS name: its Node name.
func typhoonFQDN(name string) string { return name + "." + typhoonDomain }

// typhoonNodes are the Node names of the world's cluster as built.
func typhoonNodes() []string {
	var nodes []string
	for _, h := range typhoonHosts {
		if !h.spare {
			nodes = append(nodes, typhoonFQDN(h.name))
		}
	}
	return nodes
}

// buildTyphoon builds the cluster as Typhoon's Terraform would: each
// host's Butane config rendered from Typhoon's own templates and laid
// down as Ignition would (patched by typhoon.HostPatch only), then what
// ssh.tf does — the bootstrap kubeconfig moved into /etc/kubernetes and,
// on controllers, assets_dist copied as one bundle and unpacked by
// Typhoon's own /opt/bootstrap/layout — and what bootstrap.service's
// kubectl apply does, done with client-go.
func buildTyphoon(t *testing.T, w *typhoonLab) error {
	ctx := context.Background()
	tools, err := controlplane.Tools()
	if err != nil {
		return err
	}
	v, tokenFile := labVault(t)
	dir := filepath.Join(world.dir, w.dir)
	var all, nodes []string
	var controllers []typhoon.Host
	for _, h := range w.hosts {
		all = append(all, h.name)
		if !h.spare {
			nodes = append(nodes, typhoonFQDN(h.name))
		}
		if h.controller && !h.spare {
			controllers = append(controllers, typhoon.Host{Name: h.name, Domain: typhoonFQDN(h.name), Flavor: h.flavor, Controller: true})
		}
	}
	// Each host runs its flavour's OS (os-release, the update tool).
	osOf := map[string]testhosts.OSFamily{}
	for _, h := range w.hosts {
		osOf[h.name] = typhoonOSFamily[h.flavor]
	}
	l, err := testhosts.Start(ctx, testhosts.Options{Count: len(all), Names: all, BaseIP: w.baseIP, Dir: filepath.Join(dir, "hosts"), HostOS: osOf})
	if err != nil {
		return err
	}
	w.lab = l
	atWorldEnd(w.close)
	var etcdServers []string
	for _, c := range controllers {
		etcdServers = append(etcdServers, c.Domain)
	}
	p, err := typhoon.NewPKI(typhoon.Cluster{Name: w.name, APIServer: typhoonAPIServer, EtcdServers: etcdServers})
	if err != nil {
		return err
	}
	w.pki = p
	assets, err := p.Assets()
	if err != nil {
		return err
	}
	if err := typhoon.Apply(assets, typhoon.AssetsPatch()); err != nil {
		return err
	}
	bundle := butane.Assets(assets)
	bootKubeconfig, err := p.BootstrapKubeconfig()
	if err != nil {
		return err
	}

	// Name resolution as the cluster's DNS records would give it: each
	// host by its domain, the API name to every controller.
	base, err := os.ReadFile("/etc/hosts")
	if err != nil {
		return err
	}
	hosts := string(base)
	for i, h := range l.Hosts {
		hosts += fmt.Sprintf("%s %s\n", h.Address, typhoonFQDN(h.Name))
		if w.hosts[i].controller && !w.hosts[i].spare {
			hosts += fmt.Sprintf("%s %s\n", h.Address, typhoonAPIServer)
		}
	}
	images := "quay.io/poseidon/kubelet " + testhosts.KubeletSim + "\n"
	cpImages, err := typhoon.Images()
	if err != nil {
		return err
	}

	for i, h := range l.Hosts {
		spec := w.hosts[i]
		if err := provisionTyphoonHost(ctx, h, spec.flavor, hosts, images); err != nil {
			return err
		}
		if spec.spare {
			continue
		}
		th := typhoon.Host{Name: h.Name, Domain: typhoonFQDN(h.Name), Flavor: spec.flavor, Controller: spec.controller}
		hostImages := images
		if spec.controller {
			// Flatcar's etcd user (the etcd unit's --user 232:232), which
			// the layout script gives /etc/ssl/etcd.
			if err := addTyphoonEtcdUser(ctx, h); err != nil {
				return err
			}
			for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
				prog, err := h.InstallProgram(c, typhoonProgram(tools, c))
				if err != nil {
					return err
				}
				if c != "etcd" {
					ref := cpImages[strings.ReplaceAll(c, "-", "_")]
					hostImages += strings.SplitN(ref, ":", 2)[0] + " " + prog + "\n"
				}
			}
			if err := h.AddImage(testhosts.Image{Ref: typhoonEtcdImage, Entrypoint: []string{testhosts.StandInDir + "/etcd"}}); err != nil {
				return err
			}
		}
		if err := h.WriteFile("/etc/kedge-lab/images", []byte(hostImages), 0o644); err != nil {
			return err
		}
		if err := ignite(ctx, h, th, controllers); err != nil {
			return err
		}
		if err := copyTyphoonSecrets(ctx, h, bootKubeconfig, bundle, spec.controller, spec.flavor); err != nil {
			return err
		}
	}

	// Boot: every host's enabled units start (etcd on the three
	// controllers at once: a new cluster waits for its peers).
	var wg sync.WaitGroup
	errs := make([]error, len(l.Hosts))
	for i, h := range l.Hosts {
		if w.hosts[i].spare {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = h.Reboot(ctx)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}

	admin, err := p.ClientKubeconfig("kubernetes-admin", []string{"system:masters"}, l.Hosts[0].Address)
	if err != nil {
		return err
	}
	w.kubeconfig = filepath.Join(dir, "admin.conf")
	if err := os.WriteFile(w.kubeconfig, admin, 0o600); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", w.kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	w.client = cs
	if err := applyTyphoonManifests(ctx, cs, assets); err != nil {
		return err
	}
	if err := waitTyphoonReady(ctx, cs, nodes); err != nil {
		for _, h := range l.Hosts {
			for _, unit := range []string{"kubelet.service", "etcd-member.service"} {
				if b, err := h.ReadFile("/var/log/units/" + unit + ".log"); err == nil {
					t.Logf("%s %s log tail:\n%s", h.Name, unit, tail(string(b), 3000))
				}
			}
		}
		return err
	}

	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: kedge/v1\nkind: Cluster\nmetadata:\n  name: %s\n", w.name)
	fmt.Fprintf(&b, "ssh:\n  user: core\n  become: sudo\n  identityFile: %s\n  knownHostsFile: %s\n", l.IdentityFile, l.KnownHostsFile)
	fmt.Fprintf(&b, "kubernetes:\n  kubeconfig: %s\n  server: https://%s:6443\n  kubeletImage: %s\n  clusterDNS: [%s]\n",
		w.kubeconfig, typhoonAPIServer, typhoonKubelet, typhoon.ClusterDNS)
	fmt.Fprintf(&b, "vault:\n  address: %s\n  tokenFile: %s\n  pki: %s\n  role: %s\n  kv: %s\n", v.Address, tokenFile, vaultlab.PKIPath, vaultlab.PKIRole, vaultlab.KVPath)
	for i, h := range l.Hosts {
		switch {
		case w.hosts[i].spare:
			continue
		case i == 0:
			b.WriteString("controllers:\n")
		case !w.hosts[i].controller && w.hosts[i-1].controller:
			b.WriteString("workers:\n")
		}
		fmt.Fprintf(&b, "  - name: %s\n    nodeName: %s\n    address: %s\n    port: %d\n", h.Name, typhoonFQDN(h.Name), h.Address, h.Port)
	}
	w.inventory = filepath.Join(dir, "inventory.yaml")
	return os.WriteFile(w.inventory, []byte(b.String()), 0o644)
}

// provisionTyphoonHost gives a host what the world, not Typhoon, must:
// the units of its OS (typhoonOS), names, the images its runtimes can
// run, its address for its kubelet, containerd's directory, and
// (standing in for the cluster's CNI DaemonSet) its pod network.
func provisionTyphoonHost(ctx context.Context, h *testhosts.Host, flavor, hosts, images string) error {
	if err := typhoonOS(ctx, h, flavor); err != nil {
		return err
	}
	for _, f := range []struct {
		path, data string
	}{{"/etc/hosts", hosts}, {"/etc/kedge-lab/images", images}, {"/etc/kedge-lab/node-ip", h.Address + "\n"}} {
		if err := h.WriteFile(f.path, []byte(f.data), 0o644); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
	}
	if err := testhosts.WriteCNIConfig(h); err != nil {
		return err
	}
	if out, err := h.Exec(ctx, "mkdir", "-p", "/var/lib/containerd", "/run/lock"); err != nil {
		return fmt.Errorf("%s: %w: %s", h.Name, err, out)
	}
	return nil
}

// addTyphoonEtcdUser adds the etcd user and group (232) to the host's
// own /etc, as Flatcar ships them; on Flatcar, tmpfiles gives it
// /var/lib/etcd.
func addTyphoonEtcdUser(ctx context.Context, h *testhosts.Host) error {
	script := fmt.Sprintf(`grep -q '^etcd:' /etc/group || echo 'etcd:x:%[1]d:' >> /etc/group
grep -q '^etcd:' /etc/passwd || echo 'etcd:x:%[1]d:%[1]d:etcd user:/dev/null:/sbin/nologin' >> /etc/passwd`, typhoon.EtcdUID)
	if out, err := h.Exec(ctx, "sh", "-c", script); err != nil {
		return fmt.Errorf("%s: etcd user: %w: %s", h.Name, err, out)
	}
	return nil
}

// typhoonOSUnits are the world's units for those the hosts' OS ships that
// Typhoon's configs enable or mask (Butane units with no contents):
// Fedora CoreOS's containerd.service, Flatcar's docker.service. A real
// host has them in /usr/lib/systemd/system, disabled until Ignition
// enables them; the world's hosts share the machine's /usr, so they are
// written to /etc/systemd/system, disabled. Their process only runs (it
// stops and starts as the runtime's would): the kubelet simulator runs
// its containers itself, through the container stand-in, and needs no
// runtime.
var typhoonOSUnits = map[string]map[string]string{
	typhoon.FCOS:    {layout.ContainerdService: typhoonOSUnit("containerd container runtime")},
	typhoon.Flatcar: {"docker.service": typhoonOSUnit("Docker Application Container Engine")},
}

func typhoonOSUnit(description string) string {
	return "# The Kedge test world's stand-in for the unit the OS ships: a process\n" +
		"# that only runs (the hosts share the machine's /usr and kernel).\n" +
		"[Unit]\nDescription=" + description + "\nAfter=network.target\n" +
		"[Service]\nExecStart=/bin/sleep infinity\n" +
		"[Install]\nWantedBy=multi-user.target\n"
}

// typhoonOS gives a host its OS's units (typhoonOSUnits), disabled unless
// already enabled on the host: the links the machine's own packages made
// for units of those names (the machine's containerd.service, which the
// host's /etc shows) are removed, on the host only.
func typhoonOS(ctx context.Context, h *testhosts.Host, flavor string) error {
	var names []string
	for name, unit := range typhoonOSUnits[flavor] {
		if err := h.WriteFile(butane.UnitDir+"/"+name, []byte(unit), 0o644); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	script := fmt.Sprintf(`set -e
for u in %s; do
  for l in %[2]s/*.wants/$u %[2]s/*.requires/$u; do
    [ -L "$l" ] || continue
    case "$(readlink "$l")" in %[2]s/*) ;; *) rm "$l" ;; esac
  done
done
`, strings.Join(names, " "), butane.UnitDir)
	if out, err := h.Exec(ctx, "sh", "-c", script); err != nil {
		return fmt.Errorf("%s: its OS's units: %w: %s", h.Name, err, out)
	}
	return nil
}

// ignite lays down what Ignition would from th's rendered Butane config,
// patched for the world, on the host's OS (typhoonOS), reloads systemd
// and enables and disables the OS's units as the config says.
func ignite(ctx context.Context, h *testhosts.Host, th typhoon.Host, controllers []typhoon.Host) error {
	cfg, err := typhoonMachine(th, controllers, h.Address)
	if err != nil {
		return err
	}
	if err := typhoonOS(ctx, h, th.Flavor); err != nil {
		return err
	}
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, f := range cfg.Files {
		switch {
		case f.Dir:
			fmt.Fprintf(&script, "mkdir -p '%s' && chmod %o '%s'\n", f.Path, f.Mode, f.Path)
		case f.Link != "":
			fmt.Fprintf(&script, "mkdir -p \"$(dirname '%s')\" && ln -sfn '%s' '%s'\n", f.Path, f.Link, f.Path)
		default:
			if err := h.WriteFile(f.Path, f.Data, os.FileMode(f.Mode)); err != nil {
				return fmt.Errorf("%s: %w", h.Name, err)
			}
			fmt.Fprintf(&script, "chmod %o '%s'\n", f.Mode, f.Path)
		}
		if f.Owner != "" || f.Group != "" {
			fmt.Fprintf(&script, "chown -h '%s:%s' '%s'\n", f.Owner, f.Group, f.Path)
		}
	}
	if th.Controller && th.Flavor == typhoon.Flatcar {
		// Flatcar's tmpfiles.d gives etcd its data directory.
		fmt.Fprintf(&script, "chown %d:%d /var/lib/etcd\n", typhoon.EtcdUID, typhoon.EtcdUID)
	}
	script.WriteString("systemctl daemon-reload\n")
	for verb, units := range map[string][]string{"enable": cfg.Enable, "disable": cfg.Disable} {
		for _, u := range units {
			if _, ok := typhoonOSUnits[th.Flavor][u]; !ok {
				return fmt.Errorf("%s: ignite: the config's %s of %s, a unit of the OS the world has no stand-in for (typhoonOSUnits)", h.Name, verb, u)
			}
			fmt.Fprintf(&script, "systemctl %s '%s'\n", verb, u)
		}
	}
	if out, err := h.Exec(ctx, "sh", "-c", script.String()); err != nil {
		return fmt.Errorf("%s: ignite: %w: %s", h.Name, err, out)
	}
	return nil
}

// typhoonMachine is th's Butane config rendered from Typhoon's template,
// with the world's patch applied to its files.
func typhoonMachine(th typhoon.Host, controllers []typhoon.Host, ip string) (*butane.Config, error) {
	text, err := typhoon.Butane(th, controllers, "ssh-ed25519 AAAA-the-lab-installs-its-own-key")
	if err != nil {
		return nil, err
	}
	cfg, err := butane.Parse(th.Name+".bu", []byte(text))
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, f := range cfg.Files {
		if !f.Dir && f.Link == "" {
			files[f.Path] = f.Data
		}
	}
	if err := typhoon.Apply(files, typhoon.HostPatch(th, ip)); err != nil {
		return nil, err
	}
	for i, f := range cfg.Files {
		if d, ok := files[f.Path]; ok && !f.Dir && f.Link == "" {
			cfg.Files[i].Data = d
		}
	}
	return cfg, nil
}

// copyTyphoonSecrets is ssh.tf's provisioners: the bootstrap kubeconfig
// copied as core and moved into place; on a controller the assets bundle
// copied too and Typhoon's layout script run on it, from core's home.
func copyTyphoonSecrets(ctx context.Context, h *testhosts.Host, kubeconfig, bundle []byte, controller bool, flavor string) error {
	home := "/home/" + testhosts.User
	if err := h.WriteFile(home+"/kubeconfig", kubeconfig, 0o644); err != nil {
		return err
	}
	script := fmt.Sprintf("set -e\nchown %[1]s:%[1]s %[2]s/kubeconfig\nmv %[2]s/kubeconfig /etc/kubernetes/kubeconfig\n", testhosts.User, home)
	if controller {
		if err := h.WriteFile(home+"/assets", bundle, 0o644); err != nil {
			return err
		}
		script += fmt.Sprintf("chown %[1]s:%[1]s %[2]s/assets\n", testhosts.User, home)
		if flavor == typhoon.FCOS {
			script += "touch /etc/kubernetes\n" // Fedora CoreOS's ssh.tf does
		}
		script += fmt.Sprintf("cd %s\n/opt/bootstrap/layout\n", home)
	}
	if out, err := h.Exec(ctx, "sh", "-c", script); err != nil {
		return fmt.Errorf("%s: ssh.tf's provisioners: %w: %s", h.Name, err, out)
	}
	return nil
}

// applyTyphoonManifests does what bootstrap.service's `kubectl apply -f
// /assets/manifests -R` does: the bootstrap token, the kubelets' RBAC,
// the in-cluster ConfigMaps, and Typhoon's default components, CoreDNS
// and Cilium (their pods are scheduled and the simulated kubelets report
// them running: what a CA rotation restarts in kube-system), once the API
// answers.
func applyTyphoonManifests(ctx context.Context, cs kubernetes.Interface, assets map[string][]byte) error {
	// As the apply script: until it succeeds (the API may answer before
	// kube-system exists).
	deadline := time.Now().Add(3 * time.Minute)
	for {
		err := applyTyphoonManifestsOnce(ctx, cs, assets)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("typhoon world: bootstrap.service's apply, for 3m: %w", err)
		}
		time.Sleep(time.Second)
	}
}

func applyTyphoonManifestsOnce(ctx context.Context, cs kubernetes.Interface, assets map[string][]byte) error {
	var names []string
	for k := range assets {
		if strings.HasPrefix(k, "manifests/") {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(assets[name]), 4096)
		for {
			var raw runtimeRaw
			if err := dec.Decode(&raw); err == io.EOF {
				break
			} else if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if len(raw) == 0 || string(raw) == "null" {
				continue
			}
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw, nil, nil)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			switch o := obj.(type) {
			case *corev1.Secret:
				_, err = cs.CoreV1().Secrets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			case *corev1.ConfigMap:
				_, err = cs.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.ClusterRole:
				_, err = cs.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.ClusterRoleBinding:
				_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			case *corev1.ServiceAccount:
				_, err = cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			case *corev1.Service:
				_, err = cs.CoreV1().Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			case *appsv1.Deployment:
				_, err = cs.AppsV1().Deployments(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			case *appsv1.DaemonSet:
				_, err = cs.AppsV1().DaemonSets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			default:
				return fmt.Errorf("%s: the world does not apply %T", name, obj)
			}
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return nil
}

// runtimeRaw is one YAML document as JSON.
type runtimeRaw []byte

func (r *runtimeRaw) UnmarshalJSON(b []byte) error {
	*r = append((*r)[:0], b...)
	return nil
}

// The world is Typhoon's: every controller holds its PKI as Typhoon's
// layout script leaves it (keys included, 0644 root in
// /etc/kubernetes/pki; /etc/ssl/etcd etcd's, 0500), the control plane
// runs as 65534 as its static pods say, the bootstrap kubeconfig is
// core's 0644 as ssh.tf leaves it, each kubelet's client pair is a link
// to the dated file its TLS bootstrap wrote, Nodes are named by the
// hosts' domains, and the OS's units Typhoon's config enables run
// (containerd on Fedora CoreOS, docker on Flatcar).
func TestTyphoonWorldAsTyphoonBuildsIt(t *testing.T) {
	typhoonLane.join(t)
	typhoonWorld(t)
	ctx := t.Context()
	// etcd is the version Typhoon's controller config names for its image.
	if want := strings.TrimPrefix(typhoonEtcdImage[strings.LastIndex(typhoonEtcdImage, ":")+1:], "v"); typhoonBuilt.etcdServerVersion(t, "tyc2") != want {
		t.Errorf("tyc2's etcd is %s, Typhoon's image %s", typhoonBuilt.etcdServerVersion(t, "tyc2"), typhoonEtcdImage)
	}
	// Typhoon's default components, as its bootstrap applies them, are
	// scheduled and run.
	for deadline := time.Now().Add(3 * time.Minute); ; {
		pending := componentsPending(ctx, typhoonBuilt.client, false)
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Typhoon's components not rolled out after 3m: %v", pending)
		}
		time.Sleep(time.Second)
	}
	for _, flavor := range []string{"flatcar-linux", "fedora-coreos"} {
		b, err := upstream.ReadFile(upstream.Typhoon + "/bare-metal/" + flavor + "/kubernetes/butane/controller.yaml")
		if err != nil || !strings.Contains(string(b), "ETCD_IMAGE="+typhoonEtcdImage+"\n") {
			t.Errorf("Typhoon's %s controller config does not name %s (%v)", flavor, typhoonEtcdImage, err)
		}
	}
	for i, h := range typhoonBuilt.lab.Hosts {
		spec := typhoonHosts[i]
		if spec.spare {
			continue
		}
		if out, err := h.Exec(ctx, "stat", "-c", "%U:%G %a", typhoon.BootstrapKubeconfig); err != nil || strings.TrimSpace(string(out)) != "core:core 644" {
			t.Errorf("%s: %s: %s (%v)", h.Name, typhoon.BootstrapKubeconfig, out, err)
		}
		if out, err := h.Exec(ctx, "readlink", typhoon.KubeletClientCert); err != nil || !strings.HasPrefix(strings.TrimSpace(string(out)), "/var/lib/kubelet/pki/kubelet-client-20") {
			t.Errorf("%s: %s links to %q (%v)", h.Name, typhoon.KubeletClientCert, out, err)
		}
		if _, err := typhoonBuilt.client.CoreV1().Nodes().Get(ctx, typhoonFQDN(h.Name), metav1.GetOptions{}); err != nil {
			t.Errorf("%s: Node %s: %v", h.Name, typhoonFQDN(h.Name), err)
		}
		// The OS's units Typhoon's config enables (containerd on Fedora
		// CoreOS, docker on Flatcar) run, by the host's own enable link.
		for u := range typhoonOSUnits[spec.flavor] {
			for _, q := range [][]string{{"is-enabled", u}, {"is-active", u}} {
				if out, err := h.Exec(ctx, "systemctl", q...); err != nil || !slices.Contains([]string{"enabled", "active"}, strings.TrimSpace(string(out))) {
					t.Errorf("%s: systemctl %v: %q (%v)", h.Name, q, out, err)
				}
			}
			link := butane.UnitDir + "/multi-user.target.wants/" + u
			if out, err := h.Exec(ctx, "readlink", link); err != nil || strings.TrimSpace(string(out)) != butane.UnitDir+"/"+u {
				t.Errorf("%s: %s links to %q (%v)", h.Name, link, out, err)
			}
		}
		if !spec.controller {
			continue
		}
		for _, f := range []string{typhoon.CAKey, typhoon.APIServerKey, typhoon.ServiceAccountKey, typhoon.EtcdClientKey, typhoon.AggregationKey, typhoon.AdminK} {
			if out, err := h.Exec(ctx, "stat", "-c", "%U:%G %a", f); err != nil || strings.TrimSpace(string(out)) != "root:root 644" {
				t.Errorf("%s: %s: %s (%v)", h.Name, f, out, err)
			}
		}
		for _, f := range []string{"/etc/ssl/etcd", typhoon.EtcdServerKey, typhoon.EtcdPeerKey} {
			if out, err := h.Exec(ctx, "stat", "-c", "%U:%G %a", f); err != nil || strings.TrimSpace(string(out)) != "etcd:etcd 500" {
				t.Errorf("%s: %s: %s (%v)", h.Name, f, out, err)
			}
		}
		for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			out, err := h.Exec(ctx, "ps", "-o", "uid=,args=", "-C", c)
			if err != nil || !strings.HasPrefix(strings.TrimSpace(string(out)), fmt.Sprint(typhoon.ControlPlaneUID)+" ") {
				t.Errorf("%s: %s runs as %q (%v), want %d", h.Name, c, out, err, typhoon.ControlPlaneUID)
			}
		}
	}
}
