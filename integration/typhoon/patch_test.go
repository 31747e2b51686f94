package typhoon

import (
	"strings"
	"testing"

	"kedge.dev/kedge/integration/typhoon/butane"
)

// Every edit of the patch applies exactly once to what Typhoon's
// templates render, for each flavour and role, and changes only what it
// names.
func TestPatchAppliesToTheRenderedFiles(t *testing.T) {
	ctl := Host{Name: "c1", Domain: "c1.example.com", Flavor: Flatcar, Controller: true}
	for _, h := range []Host{ctl, {Name: "c2", Domain: "c2.example.com", Flavor: FCOS, Controller: true},
		{Name: "w1", Domain: "w1.example.com", Flavor: Flatcar}, {Name: "w2", Domain: "w2.example.com", Flavor: FCOS, Labels: []string{"a=b"}}} {
		text, err := Butane(h, []Host{ctl}, "ssh-ed25519 AAAA")
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := butane.Parse(h.Name, []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		files := map[string][]byte{}
		for _, f := range cfg.Files {
			files[f.Path] = f.Data
		}
		if err := Apply(files, HostPatch(h, "127.0.41.9")); err != nil {
			t.Fatalf("%s: %v", h.Name, err)
		}
		if h.Controller && !strings.Contains(string(files[EtcdEnv]), "ETCD_LISTEN_CLIENT_URLS=https://127.0.41.9:2379\n") {
			t.Errorf("%s: etcd.env\n%s", h.Name, files[EtcdEnv])
		}
		if strings.Contains(string(files[KubeletUnit]), "selinux") {
			t.Errorf("%s: kubelet.service still mounts SELinux's files", h.Name)
		}
		if !strings.Contains(string(files[KubeletUnit]), "--hostname-override="+h.Domain+" ") {
			t.Errorf("%s: kubelet.service does not name the Node %s", h.Name, h.Domain)
		}
	}

	p, err := NewPKI(Cluster{Name: "c", APIServer: "api.example.com", EtcdServers: []string{ctl.Domain}})
	if err != nil {
		t.Fatal(err)
	}
	assets, err := p.Assets()
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(assets, AssetsPatch()); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if n := strings.Count(string(assets["static-manifests/"+m+".yaml"]), "--bind-address=$(POD_IP)"); n != 1 {
			t.Errorf("%s binds $(POD_IP) %d times", m, n)
		}
		if m != "kube-apiserver" && strings.Contains(string(assets["static-manifests/"+m+".yaml"]), "host: 127.0.0.1") {
			t.Errorf("%s's liveness probe still asks 127.0.0.1", m)
		}
	}
	// A second application finds nothing to change: refused, named.
	if err := Apply(assets, AssetsPatch()); err == nil || !strings.Contains(err.Error(), "kube-apiserver.yaml") {
		t.Errorf("a patch applied twice: %v", err)
	}
}

// The PKI is terraform-render-bootstrap's: every certificate, the CAs
// included, lives 8760 hours; the aggregation client comes from its own
// CA.
func TestPKIAsTerraformMakesIt(t *testing.T) {
	p, err := NewPKI(Cluster{Name: "c", APIServer: "api.example.com", EtcdServers: []string{"c1.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []authority{p.ca, p.etcd, p.agg} {
		if got := a.cert.NotAfter.Sub(a.cert.NotBefore); got != Validity {
			t.Errorf("%s lives %s", a.cert.Subject.CommonName, got)
		}
	}
	assets, err := p.Assets()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"auth/admin.conf", "tls/k8s/ca.key", "tls/k8s/aggregation-client.key", "tls/etcd/peer.key", "static-manifests/kube-apiserver.yaml", "manifests/bootstrap-token.yaml"} {
		if len(assets[k]) == 0 {
			t.Errorf("assets_dist lacks %s", k)
		}
	}
	if !strings.Contains(string(assets["static-manifests/kube-apiserver.yaml"]), "--requestheader-client-ca-file=/etc/kubernetes/pki/aggregation-ca.crt") {
		t.Error("the API server is not given the aggregation CA")
	}
	if !strings.Contains(string(assets["manifests/bootstrap-token.yaml"]), "token-id: "+strings.Split(p.Token(), ".")[0]) {
		t.Error("the bootstrap token Secret does not hold the token")
	}
}
