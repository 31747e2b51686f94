package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/integration/lab"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/integration/typhoon"
	"kedge.dev/kedge/starter"
	"kedge.dev/kedge/workflows"
)

// writeTyphoonHost lays a Typhoon node's files out on a test host as
// Typhoon's provisioning would have, from Typhoon's own template for its
// flavour and role (see ignite), and lets systemd load them; with
// staticPods, also the control plane's static pods of
// terraform-render-bootstrap, as the layout script puts them.
func writeTyphoonHost(t *testing.T, h *testhosts.Host, th typhoon.Host, controllers []typhoon.Host, staticPods bool) {
	t.Helper()
	if err := ignite(t.Context(), h, th, controllers); err != nil {
		t.Fatal(err)
	}
	if !staticPods {
		return
	}
	var domains []string
	for _, c := range controllers {
		domains = append(domains, c.Domain)
	}
	p, err := typhoon.NewPKI(typhoon.Cluster{Name: "layouts", APIServer: "api.mercury.example", EtcdServers: domains})
	if err != nil {
		t.Fatal(err)
	}
	assets, err := p.Assets()
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range assets {
		if strings.HasPrefix(name, "static-manifests/") {
			if err := h.WriteFile(typhoon.ManifestsDir+"/"+strings.TrimPrefix(name, "static-manifests/"), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// kedge inspect reads each host's layout over SSH as core with sudo:
// Typhoon's Flatcar controller and Fedora CoreOS worker, a bare host and a
// kubeadm-style host Kedge does not know. A runbook refuses the unknown
// host at its layout step, before the cordon, once, naming what it found.
func TestInspectLayoutsAndRefuseUnknown(t *testing.T) {
	mainLane.join(t)
	l := startLabOf(t, "127.0.29.", testhosts.Options{Names: []string{"ty-ctl", "ty-worker", "bare", "kubeadm"}})
	ctl := typhoon.Host{Name: "node1", Domain: "node1.mercury.example", Flavor: typhoon.Flatcar, Controller: true}
	writeTyphoonHost(t, l.Hosts[0], ctl, []typhoon.Host{ctl}, true)
	writeTyphoonHost(t, l.Hosts[1], typhoon.Host{Name: "node4", Domain: "node4.mercury.example", Flavor: typhoon.FCOS}, []typhoon.Host{ctl}, false)
	if err := l.Hosts[3].WriteFile("/etc/systemd/system/kubelet.service", []byte("[Service]\nExecStart=/usr/bin/kubelet --kubeconfig=/etc/kubernetes/kubelet.conf\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A kubeconfig is named (never read: the swap stops at the layout
	// step) because the swap's plan needs one to start.
	inv := writeInventory(t, strings.Replace(lab.Inventory("layouts", l, l.KnownHostsFile), "controllers:\n",
		"kubernetes:\n  kubeconfig: "+filepath.Join(t.TempDir(), "admin.conf")+"\ncontrollers:\n", 1))

	out, errOut, code := kedge(t, "inspect", "--inventory", inv, "--output", "json")
	if code == 0 {
		t.Errorf("inspect exited 0 with an unknown layout among the hosts: %s", errOut)
	}
	var reports []starter.HostReport
	if err := json.Unmarshal([]byte(out), &reports); err != nil {
		t.Fatalf("inspect --output json: %v\n%s\n%s", err, out, errOut)
	}
	got := map[string]*layout.Layout{}
	for _, r := range reports {
		if r.Error != "" {
			t.Errorf("%s: %s", r.Node, r.Error)
		}
		got[r.Node] = r.Layout
	}
	if len(got) != 4 || got["ty-ctl"] == nil || got["ty-worker"] == nil || got["bare"] == nil || got["kubeadm"] == nil {
		t.Fatalf("reports %+v", reports)
	}
	if ctl := got["ty-ctl"]; ctl.Kind != layout.KindTyphoonFlatcar || ctl.Role != "controller" || ctl.NodeName != "node1.mercury.example" ||
		!reflect.DeepEqual(ctl.ClusterDNS, []string{typhoon.ClusterDNS}) || ctl.Etcd.Mode != layout.EtcdHostUnit || ctl.Etcd.Name != "node1" ||
		ctl.Kubelet.Runtime != "docker" || ctl.Kubelet.Image != "quay.io/poseidon/kubelet:v1.35.4" || ctl.Kubelet.PathExists != typhoon.BootstrapKubeconfig ||
		ctl.Files[layout.FileClusterCAKey] != "/etc/kubernetes/pki/ca.key" || ctl.Files[layout.FileEtcdPeerCert] != "/etc/ssl/etcd/etcd/peer.crt" {
		t.Errorf("Typhoon Flatcar controller read as %+v (kubelet %+v)", ctl, ctl.Kubelet)
	}
	if w := got["ty-worker"]; w.Kind != layout.KindTyphoonFCOS || w.Role != "worker" || w.Kubelet.Runtime != "podman" || w.NodeName != "node4.mercury.example" {
		t.Errorf("Typhoon FCOS worker read as %+v", w)
	}
	if b := got["bare"]; b.Kind != layout.KindNone {
		t.Errorf("bare host read as %+v", b)
	}
	if k := got["kubeadm"]; k.Kind != layout.KindUnknown || !strings.Contains(k.Why, "KUBELET_IMAGE") {
		t.Errorf("kubeadm host read as %+v", k)
	}

	// inspect runs on the worker, with the worker's own credentials: an
	// operator's copy of the inventory naming a key that exists nowhere
	// still reads every host (in-process, it failed on every one).
	workerServes(inv)
	elsewhere := writeInventory(t, strings.Replace(readText(t, inv), "identityFile: "+l.IdentityFile, "identityFile: /nonexistent/id_ed25519", 1))
	if elsewhere == inv || !strings.Contains(readText(t, elsewhere), "/nonexistent/id_ed25519") {
		t.Fatal("the operator's copy names the worker's key")
	}
	var out2, err2 strings.Builder
	starter.Main([]string{"kedge", "inspect", "--inventory", elsewhere, "--address", world.srv.FrontendAddress(), "--output", "json"},
		starter.IO{In: strings.NewReader(""), Out: &out2, Err: &err2})
	var again []starter.HostReport
	if err := json.Unmarshal([]byte(out2.String()), &again); err != nil || len(again) != 4 {
		t.Fatalf("inspect from an operator's copy: %v\n%s\n%s", err, out2.String(), err2.String())
	}
	for _, r := range again {
		if r.Error != "" || r.Layout == nil {
			t.Errorf("%s, read from an operator's copy of the inventory: %+v", r.Node, r)
		}
	}

	// The text table names every host's layout, and why one is unknown.
	text, _, _ := kedge(t, "inspect", "--inventory", inv)
	for _, want := range []string{"typhoon-flatcar", "typhoon-fcos", "none", "kubeadm: unknown layout:"} {
		if !strings.Contains(text, want) {
			t.Errorf("inspect's table lacks %q:\n%s", want, text)
		}
	}

	p, code, errOut := runWaitInv(t, "kubelet-image-swap-node", inv, "--set", "node=kubeadm", "--set", "image=quay.io/poseidon/kubelet:v1.35.4")
	if code == 0 {
		t.Fatalf("the swap ran on a host with an unknown layout: %s", errOut)
	}
	st := step(t, p, "layout")
	if st.State != workflows.StateFailed || st.Attempts != 1 {
		t.Errorf("layout: state %s after %d attempts, want failed after 1 (not retried)", st.State, st.Attempts)
	}
	for _, want := range []string{"UnknownLayout", "kubeadm", "unknown", "runs no docker or podman container"} {
		if !strings.Contains(st.LastError, want) {
			t.Errorf("layout error lacks %q: %s", want, st.LastError)
		}
	}
	if c := step(t, p, "cordon"); c.Attempts != 0 {
		t.Errorf("cordon ran: %+v", c)
	}
}

func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
