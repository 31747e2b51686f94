package butane_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"kedge.dev/kedge/integration/typhoon/butane"
	"kedge.dev/kedge/integration/typhoon/tftemplate"
	"kedge.dev/kedge/integration/typhoon/upstream"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

const sshKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKedgeTestKeyOnly kedge@test"

// render renders a vendored butane template with the variables Typhoon's
// profiles.tf (controllers) or worker/matchbox.tf (workers) pass it.
func render(t *testing.T, name string) []byte {
	t.Helper()
	vars := map[string]any{
		"domain_name":            "node2.example.com",
		"ssh_authorized_key":     sshKey,
		"cluster_dns_service_ip": "10.3.0.10",
	}
	if strings.Contains(name, "controller") {
		vars["etcd_name"] = "node2"
		vars["etcd_initial_cluster"] = "node1=https://node1.example.com:2380,node2=https://node2.example.com:2380,node3=https://node3.example.com:2380"
	} else {
		vars["node_labels"] = "a=b,c=d"
		vars["node_taints"] = ""
	}
	s, err := tftemplate.RenderFS(upstream.FS(), name, vars)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(s)
}

func parse(t *testing.T, name string) *butane.Config {
	t.Helper()
	cfg, err := butane.Parse(name, render(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// summary lists a config one entry a line, for the golden files.
func summary(cfg *butane.Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "variant %s %s\n", cfg.Variant, cfg.Version)
	for _, f := range cfg.Files {
		kind := "-"
		switch {
		case f.Dir:
			kind = "d"
		case f.Link != "":
			kind = "l"
		}
		fmt.Fprintf(&b, "%s %04o %s:%s %s", kind, f.Mode, f.Owner, f.Group, f.Path)
		if f.Link != "" {
			fmt.Fprintf(&b, " -> %s", f.Link)
		}
		if !f.Dir && f.Link == "" {
			fmt.Fprintf(&b, " (%d bytes, %d lines, sha256 %.12x)", len(f.Data), bytes.Count(f.Data, []byte("\n")), sha256.Sum256(f.Data))
		}
		if f.Overwrite {
			b.WriteString(" overwrite")
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "enable %v\ndisable %v\n", cfg.Enable, cfg.Disable)
	for _, u := range cfg.Users {
		fmt.Fprintf(&b, "user %s keys %q\n", u.Name, u.SSHAuthorizedKeys)
	}
	return b.String()
}

var templates = map[string]string{
	"flatcar-controller": upstream.FlatcarController,
	"flatcar-worker":     upstream.FlatcarWorker,
	"fcos-controller":    upstream.FCOSController,
	"fcos-worker":        upstream.FCOSWorker,
}

// TestUpstreamGolden pins every entry each vendored template leaves on
// disk (-update rewrites the golden files).
func TestUpstreamGolden(t *testing.T) {
	for short, name := range templates {
		t.Run(short, func(t *testing.T) {
			got := summary(parse(t, name))
			file := filepath.Join("testdata", short+".golden")
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
			if string(want) != got {
				t.Errorf("%s differs from %s (run with -update and review the diff):\n%s", name, file, got)
			}
		})
	}
}

func file(t *testing.T, cfg *butane.Config, path string) butane.File {
	t.Helper()
	f, ok := cfg.File(path)
	if !ok {
		t.Fatalf("no %s", path)
	}
	return f
}

func wantLink(t *testing.T, cfg *butane.Config, path, target string) {
	t.Helper()
	if f := file(t, cfg, path); f.Link != target || f.Dir || f.Data != nil {
		t.Errorf("%s: %+v, want a link to %s", path, f, target)
	}
}

func wantNo(t *testing.T, cfg *butane.Config, path string) {
	t.Helper()
	if f, ok := cfg.File(path); ok {
		t.Errorf("unexpected %+v", f)
	}
}

func wantMode(t *testing.T, cfg *butane.Config, path string, mode uint32, dir bool) butane.File {
	t.Helper()
	f := file(t, cfg, path)
	if f.Mode != mode || f.Dir != dir || f.Owner != "root" || f.Group != "root" {
		t.Errorf("%s: mode %04o dir %v owner %s:%s, want %04o dir %v root:root", path, f.Mode, f.Dir, f.Owner, f.Group, mode, dir)
	}
	return f
}

const sd = "/etc/systemd/system/"

func TestControllers(t *testing.T) {
	for _, name := range []string{upstream.FlatcarController, upstream.FCOSController} {
		t.Run(name, func(t *testing.T) {
			cfg := parse(t, name)
			// Units and their enable links.
			for _, u := range []string{"etcd-member.service", "kubelet.path", "wait-for-dns.service", "kubelet.service", "bootstrap.service"} {
				wantMode(t, cfg, sd+u, 0o644, false)
			}
			wantLink(t, cfg, sd+"multi-user.target.wants/etcd-member.service", sd+"etcd-member.service")
			wantLink(t, cfg, sd+"multi-user.target.wants/kubelet.path", sd+"kubelet.path")
			wantLink(t, cfg, sd+"kubelet.service.requires/wait-for-dns.service", sd+"wait-for-dns.service")
			wantLink(t, cfg, sd+"etcd-member.service.requires/wait-for-dns.service", sd+"wait-for-dns.service")
			// kubelet.service and bootstrap.service are not enabled: the
			// path unit and Terraform's ssh start them.
			wantNo(t, cfg, sd+"multi-user.target.wants/kubelet.service")
			wantNo(t, cfg, sd+"multi-user.target.wants/bootstrap.service")
			// Files.
			wantMode(t, cfg, "/var/lib/etcd", 0o700, true)
			wantMode(t, cfg, "/etc/kubernetes", 0o755, true)
			layout := wantMode(t, cfg, "/opt/bootstrap/layout", 0o544, false)
			if !bytes.HasPrefix(layout.Data, []byte("#!/bin/bash -e\n")) || !bytes.Contains(layout.Data, []byte(`awk '/#####/ {filename=$2; next} {print > filename}' assets`)) {
				t.Errorf("layout:\n%s", layout.Data)
			}
			wantMode(t, cfg, "/opt/bootstrap/apply", 0o544, false)
			wantMode(t, cfg, "/etc/systemd/logind.conf.d/inhibitors.conf", 0o644, false)
			if got := string(file(t, cfg, "/etc/hostname").Data); got != "node2.example.com" {
				t.Errorf("hostname %q", got)
			}
			env := string(wantMode(t, cfg, "/etc/etcd/etcd.env", 0o644, false).Data)
			if !strings.HasPrefix(env, "ETCD_NAME=node2\nETCD_DATA_DIR=/var/lib/etcd\n") || !strings.Contains(env, "\nETCD_INITIAL_CLUSTER=node1=https://node1.example.com:2380,node2=") {
				t.Errorf("etcd.env:\n%s", env)
			}
			if !strings.Contains(string(file(t, cfg, sd+"kubelet.service").Data), "--hostname-override=node2.example.com \\\n") {
				t.Error("kubelet.service lacks the FQDN --hostname-override")
			}
			if !reflect.DeepEqual(cfg.Users, []butane.User{{Name: "core", SSHAuthorizedKeys: []string{sshKey}}}) {
				t.Errorf("users %+v", cfg.Users)
			}
			if len(cfg.Disable) != 0 {
				t.Errorf("disable %v", cfg.Disable)
			}
		})
	}
	flatcar := parse(t, upstream.FlatcarController)
	if flatcar.Variant != "flatcar" || flatcar.Version != "1.0.0" {
		t.Errorf("variant %s %s", flatcar.Variant, flatcar.Version)
	}
	if f := file(t, flatcar, "/var/lib/etcd"); !f.Overwrite {
		t.Error("/var/lib/etcd: overwrite not kept")
	}
	wantLink(t, flatcar, sd+"locksmithd.service", "/dev/null")
	if !reflect.DeepEqual(flatcar.Enable, []string{"docker.service"}) {
		t.Errorf("flatcar enable %v", flatcar.Enable)
	}
	fcos := parse(t, upstream.FCOSController)
	if fcos.Variant != "fcos" || fcos.Version != "1.5.0" {
		t.Errorf("variant %s %s", fcos.Variant, fcos.Version)
	}
	wantLink(t, fcos, sd+"docker.service", "/dev/null")
	wantMode(t, fcos, "/opt/bootstrap", 0o755, true)
	if f := wantMode(t, fcos, "/etc/containerd/config.toml", 0o644, false); !f.Overwrite || !bytes.Contains(f.Data, []byte("SystemdCgroup = true")) {
		t.Errorf("containerd config %+v", f)
	}
	wantMode(t, fcos, "/etc/modules-load.d/typhoon.conf", 0o644, false)
	wantMode(t, fcos, "/etc/sysctl.d/reverse-path-filter.conf", 0o644, false)
	if !reflect.DeepEqual(fcos.Enable, []string{"containerd.service"}) {
		t.Errorf("fcos enable %v", fcos.Enable)
	}
}

func TestWorkers(t *testing.T) {
	for name, enable := range map[string]string{upstream.FlatcarWorker: "docker.service", upstream.FCOSWorker: "containerd.service"} {
		t.Run(name, func(t *testing.T) {
			cfg := parse(t, name)
			wantLink(t, cfg, sd+"kubelet.service.requires/wait-for-dns.service", sd+"wait-for-dns.service")
			wantNo(t, cfg, sd+"etcd-member.service.requires/wait-for-dns.service")
			wantLink(t, cfg, sd+"multi-user.target.wants/kubelet.path", sd+"kubelet.path")
			wantNo(t, cfg, sd+"etcd-member.service")
			wantNo(t, cfg, "/opt/bootstrap/layout")
			wantMode(t, cfg, "/etc/kubernetes", 0o755, true)
			kubelet := string(wantMode(t, cfg, sd+"kubelet.service", 0o644, false).Data)
			if !strings.Contains(kubelet, "\n  --node-labels=a=b \\\n  --node-labels=c=d \\\n  --node-labels=node.kubernetes.io/node\n") {
				t.Errorf("kubelet.service:\n%s", kubelet)
			}
			if !reflect.DeepEqual(cfg.Enable, []string{enable}) {
				t.Errorf("enable %v", cfg.Enable)
			}
		})
	}
}

func TestUnits(t *testing.T) {
	cfg, err := butane.Parse("units.bu", []byte(`variant: fcos
version: 1.4.0
systemd:
  units:
    - name: a.service
      enabled: true
      contents: |
        [Unit]
        Description=a
        [Install]
        WantedBy=multi-user.target \
          other.target
        RequiredBy=x.service
        RequiredBy=
        RequiredBy=y.service
        Alias=alias-a.service
        Also=b.service vendor.socket
        # a comment
    - name: b.service
      contents: |
        [Install]
        WantedBy=timers.target
    - name: c.service
      enabled: false
    - name: d.service
      dropins:
        - name: 10-x.conf
          contents: |
            [Service]
            Environment=X=1
        - name: 20-empty.conf
    - name: e.service
      enabled: true
      contents: |
        [Unit]
        Description=no install section
storage:
  links:
    - path: /etc/localtime
      target: ../usr/share/zoneinfo/UTC
      user:
        name: core
`))
	if err != nil {
		t.Fatal(err)
	}
	wantLink(t, cfg, sd+"multi-user.target.wants/a.service", sd+"a.service")
	wantLink(t, cfg, sd+"other.target.wants/a.service", sd+"a.service")
	wantNo(t, cfg, sd+"x.service.requires/a.service")
	wantLink(t, cfg, sd+"y.service.requires/a.service", sd+"a.service")
	wantLink(t, cfg, sd+"alias-a.service", sd+"a.service")
	wantLink(t, cfg, sd+"timers.target.wants/b.service", sd+"b.service")
	if f := file(t, cfg, sd+"d.service.d/10-x.conf"); string(f.Data) != "[Service]\nEnvironment=X=1\n" || f.Mode != 0o644 {
		t.Errorf("drop-in %+v", f)
	}
	wantNo(t, cfg, sd+"d.service")
	wantNo(t, cfg, sd+"d.service.d/20-empty.conf")
	if f := file(t, cfg, "/etc/localtime"); f.Link != "../usr/share/zoneinfo/UTC" || f.Owner != "core" || f.Group != "root" {
		t.Errorf("link %+v", f)
	}
	if !reflect.DeepEqual(cfg.Enable, []string{"vendor.socket"}) || !reflect.DeepEqual(cfg.Disable, []string{"c.service"}) {
		t.Errorf("enable %v disable %v", cfg.Enable, cfg.Disable)
	}
	var links int
	for _, f := range cfg.Files {
		if strings.Contains(f.Path, "e.service") && f.Link != "" {
			links++
		}
	}
	if links != 0 {
		t.Errorf("e.service has no [Install] but got %d links", links)
	}
	for i := 1; i < len(cfg.Files); i++ {
		if cfg.Files[i-1].Path >= cfg.Files[i].Path {
			t.Errorf("files not sorted: %s before %s", cfg.Files[i-1].Path, cfg.Files[i].Path)
		}
	}
}

func TestErrors(t *testing.T) {
	const head = "variant: flatcar\nversion: 1.0.0\n"
	for _, tc := range []struct {
		name, src string
		kind      error
		line      int
		field     string
	}{
		{"unknown field", head + "storage:\n  files:\n    - path: /a\n    - path: /b\n      contnts:\n        inline: x\n", butane.ErrUnknownField, 7, "storage.files[1].contnts"},
		{"unknown top-level field", head + "systemd_units: []\n", butane.ErrUnknownField, 3, "systemd_units"},
		{"unknown unit field", head + "systemd:\n  units:\n    - name: a.service\n      enable: true\n", butane.ErrUnknownField, 6, "systemd.units[0].enable"},
		{"unsupported source", head + "storage:\n  files:\n    - path: /a\n      contents:\n        source: https://example.com/a\n", butane.ErrUnsupported, 7, "storage.files[0].contents.source"},
		{"unsupported filesystems", head + "storage:\n  filesystems: []\n", butane.ErrUnsupported, 4, "storage.filesystems"},
		{"unsupported uid", head + "passwd:\n  users:\n    - name: core\n      uid: 500\n", butane.ErrUnsupported, 6, "passwd.users[0].uid"},
		{"unsupported numeric owner", head + "storage:\n  directories:\n    - path: /a\n      user:\n        id: 500\n", butane.ErrUnsupported, 7, "storage.directories[0].user.id"},
		{"unknown variant", "variant: rhcos\nversion: 4.14.0\n", butane.ErrUnsupported, 1, "variant"},
		{"unknown version", "variant: fcos\nversion: 2.0.0\n", butane.ErrUnsupported, 1, "variant"},
		{"no version", "variant: fcos\n", butane.ErrInvalid, 1, ""},
		{"mode as a string", head + "storage:\n  files:\n    - path: /a\n      mode: \"0644\"\n", butane.ErrInvalid, 6, "storage.files[0].mode"},
		{"bool as a word", head + "systemd:\n  units:\n    - name: a.service\n      enabled: yes\n", butane.ErrInvalid, 6, "systemd.units[0].enabled"},
		{"files not a list", head + "storage:\n  files:\n    path: /a\n", butane.ErrInvalid, 5, "storage.files"},
		{"relative path", head + "storage:\n  files:\n    - path: etc/a\n", butane.ErrInvalid, 5, "storage.files[0].path"},
		{"duplicate path", head + "storage:\n  files:\n    - path: /a\n  directories:\n    - path: /a\n", butane.ErrInvalid, 0, "storage."},
		{"unit file and storage file", head + "storage:\n  files:\n    - path: /etc/systemd/system/a.service\nsystemd:\n  units:\n    - name: a.service\n      contents: x\n", butane.ErrInvalid, 0, ""},
		{"duplicate key", head + "storage:\n  files:\n    - path: /a\n      path: /b\n", butane.ErrInvalid, 6, "storage.files[0].path"},
		{"unit name", head + "systemd:\n  units:\n    - name: kubelet\n", butane.ErrInvalid, 5, "systemd.units[0].name"},
		{"duplicate unit", head + "systemd:\n  units:\n    - name: a.service\n    - name: a.service\n", butane.ErrInvalid, 6, "systemd.units[1].name"},
		{"drop-in name", head + "systemd:\n  units:\n    - name: a.service\n      dropins:\n        - name: x\n          contents: y\n", butane.ErrInvalid, 7, "systemd.units[0].dropins[0].name"},
		{"masked with contents", head + "systemd:\n  units:\n    - name: a.service\n      mask: true\n      contents: x\n", butane.ErrInvalid, 5, "systemd.units[0].mask"},
		{"bad install section", head + "systemd:\n  units:\n    - name: a.service\n      enabled: true\n      contents: |\n        [Install]\n        WantedBy multi-user.target\n", butane.ErrInvalid, 5, "systemd.units[0].contents"},
		{"hard link", head + "storage:\n  links:\n    - path: /a\n      target: /b\n      hard: true\n", butane.ErrUnsupported, 5, "storage.links[0].hard"},
		{"two documents", head + "---\n" + head, butane.ErrInvalid, 0, ""},
		{"yaml syntax", head + "storage: [\n", butane.ErrInvalid, 0, ""},
		{"empty", "", butane.ErrInvalid, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := butane.Parse("host.bu", []byte(tc.src))
			if err == nil {
				t.Fatalf("no error: %+v", cfg)
			}
			if !errors.Is(err, tc.kind) {
				t.Errorf("%v is not %v", err, tc.kind)
			}
			if !strings.HasPrefix(err.Error(), "host.bu:") {
				t.Errorf("%v does not name the file", err)
			}
			var be *butane.Error
			if tc.line == 0 {
				return
			}
			if !errors.As(err, &be) {
				t.Fatalf("%v is not a *butane.Error", err)
			}
			if be.Line != tc.line || be.Field != tc.field {
				t.Errorf("%v: at line %d field %q, want line %d field %q", err, be.Line, be.Field, tc.line, tc.field)
			}
			t.Log(err)
			if tc.field != "" && !strings.Contains(err.Error(), tc.field+": ") {
				t.Errorf("%v does not name the field", err)
			}
		})
	}
}

// TestAssets checks the assets file against the layout script's awk split
// (`awk '/#####/ {filename=$2; next} {print > filename}' assets`).
func TestAssets(t *testing.T) {
	assets := map[string][]byte{
		"tls/k8s/ca.crt":                       []byte("-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"),
		"auth/admin.conf":                      []byte("apiVersion: v1\nkind: Config\n"),
		"static-manifests/kube-apiserver.yaml": []byte("kind: Pod\n"),
		"manifests/bootstrap-token.yaml":       []byte("kind: Secret\n"),
	}
	got := string(butane.Assets(assets))
	want := "##### auth/admin.conf\napiVersion: v1\nkind: Config\n" +
		"\n##### manifests/bootstrap-token.yaml\nkind: Secret\n" +
		"\n##### static-manifests/kube-apiserver.yaml\nkind: Pod\n" +
		"\n##### tls/k8s/ca.crt\n-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	// What the awk split leaves: each asset, plus the blank line the join
	// adds after each but the last, as on a real controller.
	split := map[string]string{}
	name := ""
	for _, line := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		if strings.Contains(line, "#####") {
			name = strings.Fields(line)[1]
			continue
		}
		split[name] += line + "\n"
	}
	for k, v := range assets {
		if k != "tls/k8s/ca.crt" {
			v = append(v, '\n')
		}
		if split[k] != string(v) {
			t.Errorf("%s after the split: %q, want %q", k, split[k], v)
		}
	}
	if got := butane.Assets(nil); len(got) != 0 {
		t.Errorf("no assets: %q", got)
	}
}
