package tftemplate_test

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"kedge.dev/kedge/integration/typhoon/tftemplate"
	"kedge.dev/kedge/integration/typhoon/upstream"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// The world a realistic Typhoon cluster is rendered for: three
// controllers, FQDN domains, short etcd names, Typhoon's defaults.
var (
	controllerNames   = []string{"node1", "node2", "node3"}
	controllerDomains = []string{"node1.example.com", "node2.example.com", "node3.example.com"}
	apiServer         = "cluster.example.com"
	sshKey            = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKedgeTestKeyOnly kedge@test"
)

// renderExpr evaluates one Terraform expression with this package, to
// compute variables exactly as the upstream .tf files do.
func renderExpr(t *testing.T, expr string, vars map[string]any) string {
	t.Helper()
	s, err := tftemplate.Render("expr", []byte("${"+expr+"}"), vars)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// heredoc returns the body of `name = <<EOF ... EOF` in a vendored .tf file.
func heredoc(t *testing.T, file, name string) string {
	t.Helper()
	body, err := upstream.Heredoc(file, name)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// upstreamCases are every vendored template with the variables Terraform
// passes it (typhoon's profiles.tf and worker/matchbox.tf,
// terraform-render-bootstrap's manifests.tf and auth.tf).
func upstreamCases(t *testing.T) map[string]map[string]any {
	etcd := map[string]any{"names": controllerNames, "domains": controllerDomains}
	controller := map[string]any{
		"domain_name":            controllerDomains[1],
		"etcd_name":              controllerNames[1],
		"etcd_initial_cluster":   renderExpr(t, `join(",", formatlist("%s=https://%s:2380", names, domains))`, etcd),
		"cluster_dns_service_ip": "10.3.0.10",
		"ssh_authorized_key":     sshKey,
	}
	worker := map[string]any{
		"domain_name":            "node4.example.com",
		"ssh_authorized_key":     sshKey,
		"cluster_dns_service_ip": "10.3.0.10",
		"node_labels":            renderExpr(t, `join(",", labels)`, map[string]any{"labels": []string{"a=b", "c=d"}}),
		"node_taints":            renderExpr(t, `join(",", taints)`, map[string]any{"taints": []string{}}),
	}
	fcosWorker := map[string]any{}
	for k, v := range worker {
		fcosWorker[k] = v
	}
	fcosWorker["node_labels"] = ""
	fcosWorker["node_taints"] = "gpu=true:NoSchedule,dedicated=infra:NoExecute"

	static := map[string]any{
		"kube_apiserver_image":          "registry.k8s.io/kube-apiserver:v1.35.4",
		"kube_controller_manager_image": "registry.k8s.io/kube-controller-manager:v1.35.4",
		"kube_scheduler_image":          "registry.k8s.io/kube-scheduler:v1.35.4",
		"etcd_servers":                  renderExpr(t, `join(",", formatlist("https://%s:2379", domains))`, etcd),
		"pod_cidr":                      "10.2.0.0/16",
		"service_cidr":                  "10.3.0.0/16",
		"service_account_issuer":        "https://kubernetes.default.svc.cluster.local",
		// var.enable_aggregation ? indent(4, local.aggregation_flags) : ""
		"aggregation_flags": tftemplate.Indent(4, heredoc(t, upstream.Bootstrap+"/manifests.tf", "aggregation_flags")),
	}
	server := "https://" + apiServer + ":6443"
	manifests := map[string]any{
		"server":         server,
		"apiserver_host": apiServer,
		"apiserver_port": 6443,
		"token_id":       "abc123",
		"token_secret":   "0123456789abcdef",
	}
	cases := map[string]map[string]any{
		upstream.FlatcarController: controller,
		upstream.FCOSController:    controller,
		upstream.FlatcarWorker:     worker,
		upstream.FCOSWorker:        fcosWorker,
		upstream.KubeconfigAdmin: {
			"name":         "example",
			"ca_cert":      "Q0EgQ0VSVElGSUNBVEUK",
			"kubelet_cert": "QURNSU4gQ0VSVElGSUNBVEUK",
			"kubelet_key":  "QURNSU4gS0VZCg==",
			"server":       server,
		},
		upstream.KubeconfigBootstrap: {
			"ca_cert":      "Q0EgQ0VSVElGSUNBVEUK",
			"server":       server,
			"token_id":     "abc123",
			"token_secret": "0123456789abcdef",
		},
	}
	// manifests.tf's CoreDNS and conditional.tf's Cilium, with Typhoon's
	// defaults and one extra toleration (var.daemonset_tolerations).
	coredns := map[string]any{
		"coredns_image":          "registry.k8s.io/coredns/coredns:v1.13.1",
		"control_plane_replicas": 3,
		"cluster_domain_suffix":  "cluster.local",
		"cluster_dns_service_ip": "10.3.0.10",
	}
	cilium := map[string]any{
		"cilium_agent_image":    "quay.io/cilium/cilium:v1.18.4",
		"cilium_operator_image": "quay.io/cilium/operator-generic:v1.18.4",
		"pod_cidr":              "10.2.0.0/16",
		"daemonset_tolerations": []any{"gpu-role"},
	}
	for _, dir := range []struct {
		dir  string
		vars map[string]any
	}{{upstream.StaticManifests, static}, {upstream.Manifests, manifests}, {upstream.CoreDNS, coredns}, {upstream.Cilium, cilium}} {
		names, err := fs.Glob(upstream.FS(), dir.dir+"/*.yaml")
		if err != nil || len(names) == 0 {
			t.Fatalf("%s: %v %v", dir.dir, names, err)
		}
		for _, name := range names {
			cases[name] = dir.vars
		}
	}
	return cases
}

// golden names a template's golden file: its path below the upstream
// roots, slashes as dashes.
func golden(name string) string {
	for _, root := range []string{upstream.Typhoon + "/bare-metal/", upstream.Bootstrap + "/resources/"} {
		name = strings.TrimPrefix(name, root)
	}
	name = strings.ReplaceAll(strings.ReplaceAll(name, "/kubernetes/", "-"), "/", "-")
	return filepath.Join("testdata", name+".golden")
}

// TestUpstreamTemplates renders every vendored template as Terraform
// would and compares it with its golden file (-update rewrites them).
func TestUpstreamTemplates(t *testing.T) {
	for name, vars := range upstreamCases(t) {
		t.Run(path.Base(path.Dir(name))+"/"+path.Base(name), func(t *testing.T) {
			got, err := tftemplate.RenderFS(upstream.FS(), name, vars)
			if err != nil {
				t.Fatal(err)
			}
			// $${X} renders as ${X}: the shell's, not Terraform's.
			rest := got
			for _, v := range []string{"${KUBELET_IMAGE}", "${ETCD_IMAGE}", "${BIN_PATH}"} {
				rest = strings.ReplaceAll(rest, v, "")
			}
			if strings.Contains(rest, "${") {
				t.Errorf("unrendered interpolation left in %s", name)
			}
			file := golden(name)
			if *update {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(want, []byte(got)) {
				t.Errorf("%s differs from %s (run with -update and review the diff):\n%s", name, file, got)
			}
		})
	}
}

// TestEveryTemplateCovered fails when the vendored tree gains a template
// this test does not render.
func TestEveryTemplateCovered(t *testing.T) {
	cases := upstreamCases(t)
	err := fs.WalkDir(upstream.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		template := strings.Contains(name, "/butane/") || strings.Contains(name, "/resources/")
		if _, ok := cases[name]; template && !ok {
			t.Errorf("%s is not rendered by TestUpstreamTemplates", name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWorkerFlags pins the lines the strip markers shape in the workers'
// kubelet.service, as Terraform renders them.
func TestWorkerFlags(t *testing.T) {
	base := map[string]any{"domain_name": "node4.example.com", "ssh_authorized_key": sshKey, "cluster_dns_service_ip": "10.3.0.10"}
	for _, tc := range []struct {
		name, labels, taints, want string
	}{
		{upstream.FlatcarWorker, "a=b,c=d", "", `
          --kubeconfig=/var/lib/kubelet/kubeconfig \
          --node-labels=node.kubernetes.io/node \
          --node-labels=a=b \
          --node-labels=c=d \
          --node-labels=node.kubernetes.io/node
        ExecStart=docker logs -f kubelet
`},
		{upstream.FlatcarWorker, "", "", `
          --kubeconfig=/var/lib/kubelet/kubeconfig \
          --node-labels=node.kubernetes.io/node \
          --node-labels=node.kubernetes.io/node
        ExecStart=docker logs -f kubelet
`},
		{upstream.FCOSWorker, ",x=y,", "k=v:NoSchedule", `
          --kubeconfig=/var/lib/kubelet/kubeconfig \
          --node-labels=x=y \
          --register-with-taints=k=v:NoSchedule \
          --node-labels=node.kubernetes.io/node
        ExecStop=-/usr/bin/podman stop kubelet
`},
	} {
		vars := map[string]any{"node_labels": tc.labels, "node_taints": tc.taints}
		for k, v := range base {
			vars[k] = v
		}
		got, err := tftemplate.RenderFS(upstream.FS(), tc.name, vars)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s with labels %q, taints %q: want\n%s\nin\n%s", tc.name, tc.labels, tc.taints, tc.want, got)
		}
	}
}
