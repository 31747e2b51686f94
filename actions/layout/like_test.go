package layout

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"kedge.dev/kedge/integration/typhoon"
)

// typhoonWorker is a Typhoon worker's host files and what systemd reports
// for them, discovered.
func typhoonWorker(t *testing.T, flavor, name string) (memHost, Layout) {
	t.Helper()
	m := memHost{}
	m.add(typhoonFiles(typhoon.Host{Name: name, Domain: name, Flavor: flavor,
		Labels: []string{"node.kubernetes.io/pool=blue"}, Taints: []string{"dedicated=blue:NoSchedule"}}))
	f := Facts{Hostname: name, Units: map[string]UnitState{KubeletService: loaded(m, typhoon.KubeletUnit),
		KubeletPath: loaded(m, typhoon.KubeletPathUnit), EtcdMember: {LoadState: "not-found", ActiveState: "inactive"}}}
	l, err := Discover(f, m)
	if err != nil {
		t.Fatal(err)
	}
	return m, l
}

func copyFiles(t *testing.T, m memHost, l Layout) []CopyFile {
	t.Helper()
	paths, err := KubeletFiles(l)
	if err != nil {
		t.Fatal(err)
	}
	var out []CopyFile
	for _, p := range paths {
		out = append(out, CopyFile{Path: p, Content: string(m[p]), Mode: "0644"})
	}
	return out
}

// A worker's kubelet copied to a new node is what Typhoon itself writes
// on that node: every file the same but the Node name.
func TestRetargetIsWhatTyphoonWritesForTheNewNode(t *testing.T) {
	for _, flavor := range []string{typhoon.Flatcar, typhoon.FCOS} {
		m, l := typhoonWorker(t, flavor, "node4.mercury.example")
		files := copyFiles(t, m, l)
		if got := pathsOf(files); !slices.Equal(got, []string{typhoon.KubeletUnit, typhoon.KubeletPathUnit, typhoon.KubeletConfig}) {
			t.Fatalf("%s: copied %q", flavor, got)
		}
		out, err := Retarget(files, Identity{NodeName: l.NodeName, Hostname: "node4", Address: "10.0.0.4"},
			Identity{NodeName: "node7.mercury.example", Hostname: "node7", Address: "10.0.0.7"})
		if err != nil {
			t.Fatalf("%s: %v", flavor, err)
		}
		want, _ := typhoonWorker(t, flavor, "node7.mercury.example")
		for _, f := range out {
			if f.Content != string(want[f.Path]) {
				t.Errorf("%s: %s:\n%s\nwant\n%s", flavor, f.Path, f.Content, want[f.Path])
			}
		}
	}
}

func pathsOf(files []CopyFile) []string {
	var p []string
	for _, f := range files {
		p = append(p, f.Path)
	}
	return p
}

// What names the reference node anywhere else is refused with its file
// and line; a longer name that merely starts like it is not the node.
func TestRetargetRefusesNodeSpecificSettings(t *testing.T) {
	m, l := typhoonWorker(t, typhoon.Flatcar, "node4")
	from := Identity{NodeName: "node4", Hostname: "node4", Address: "10.0.0.4"}
	to := Identity{NodeName: "node7", Hostname: "node7", Address: "10.0.0.7"}
	cases := []struct {
		name, file, extra, want string
	}{
		{"address in the kubelet config", typhoon.KubeletConfig, "address: 10.0.0.4\n", typhoon.KubeletConfig + ":25 names the reference node's address \"10.0.0.4\""},
		{"provider ID", typhoon.KubeletConfig, "providerID: metal://node4\n", typhoon.KubeletConfig + ":25 names the reference node's Node name \"node4\""},
		{"a longer name is another node", typhoon.KubeletConfig, "# node40 and 10.0.0.41 are not this node\n", ""},
		{"node-ip is set for the new node", typhoon.KubeletUnit, "", ""},
	}
	for _, c := range cases {
		files := copyFiles(t, m, l)
		for i := range files {
			if files[i].Path == c.file {
				if c.file == typhoon.KubeletUnit {
					files[i].Content = strings.Replace(files[i].Content, "--kubeconfig=", "--node-ip=10.0.0.4 \\\n    --kubeconfig=", 1)
				}
				files[i].Content += c.extra
			}
		}
		out, err := Retarget(files, from, to)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		case c.want == "" && c.file == typhoon.KubeletUnit && !strings.Contains(out[0].Content, "--node-ip=10.0.0.7 \\\n"):
			t.Errorf("%s: %s", c.name, out[0].Content)
		}
	}
}

// Without --hostname-override the kubelet registers under its host's
// name: a join whose inventory names the Node otherwise is refused.
func TestRetargetWithoutHostnameOverride(t *testing.T) {
	m, l := typhoonWorker(t, typhoon.FCOS, "node4")
	files := copyFiles(t, m, l)
	files[0].Content = strings.Replace(files[0].Content, "--hostname-override=node4 \\\n", "", 1)
	from := Identity{NodeName: "node4", Hostname: "node4"}
	if _, err := Retarget(files, from, Identity{NodeName: "node7", Hostname: "node7"}); err != nil {
		t.Errorf("host name = Node name: %v", err)
	}
	_, err := Retarget(files, from, Identity{NodeName: "node7.example", Hostname: "node7"})
	if err == nil || !strings.Contains(err.Error(), `register as "node7" (its host's name) but the inventory names the node "node7.example"`) {
		t.Errorf("host name != Node name: %v", err)
	}
}

// Units outside /etc/systemd/system (a vendor's, a runtime one) are not
// an operator's to copy.
func TestKubeletFilesOnlyFromTheUnitDirectory(t *testing.T) {
	_, l := typhoonWorker(t, typhoon.Flatcar, "node4")
	l.Kubelet.Unit.Files = append(l.Kubelet.Unit.Files, "/run/systemd/system/kubelet.service.d/50-x.conf")
	if _, err := KubeletFiles(l); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("is not under %s", UnitDir)) {
		t.Errorf("a runtime drop-in: %v", err)
	}
}
