package layout

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// rendered is Typhoon v1.35.4's hosts as its templates render them
// (testdata/typhoon-v1.35.4/README.md).
const rendered = "testdata/typhoon-v1.35.4"

// dirHost is a host's files under a directory of testdata.
type dirHost string

func (d dirHost) ReadFile(p string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(string(d), p))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open %s: %w", p, fs.ErrNotExist)
	}
	return b, err
}

func (d dirHost) ReadDir(p string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(string(d), p))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open %s: %w", p, fs.ErrNotExist)
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() || e.Type()&fs.ModeSymlink != 0 {
			names = append(names, e.Name())
		}
	}
	return names, err
}

// files lists the host's files (not its enable links, which systemctl
// makes) by path.
func (d dirHost) files(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(string(d), func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		out[strings.TrimPrefix(p, string(d))] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// links lists the host's enable links: unit name by link path.
func (d dirHost) links(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(string(d), func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type()&fs.ModeSymlink != 0 {
			out[strings.TrimPrefix(p, string(d))] = path.Base(p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// discover is the layout of a rendered Typhoon host whose units run as
// after its first boot: kubelet.path enabled and active, kubelet.service
// (not enabled: kubelet.path starts it) active.
func discover(t *testing.T, h dirHost) Layout {
	t.Helper()
	name, err := h.ReadFile("/etc/hostname")
	if err != nil {
		t.Fatal(err)
	}
	unit := UnitDir + "/" + KubeletService
	b, err := h.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	u, err := ParseUnit([]string{unit}, [][]byte{b})
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for k, v := range u.Environment {
		env = append(env, k+"="+v)
	}
	l, err := Discover(Facts{Hostname: strings.Split(string(name), ".")[0], Units: map[string]UnitState{
		KubeletService: {LoadState: "loaded", ActiveState: "active", UnitFileState: "disabled", FragmentPath: unit, Environment: env},
		KubeletPath:    {LoadState: "loaded", ActiveState: "active", UnitFileState: "enabled", FragmentPath: UnitDir + "/" + KubeletPath},
		EtcdMember:     {LoadState: "not-found", ActiveState: "inactive"},
	}}, h)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// joinLike is what node-join writes on a new worker like the reference
// ref (host.kubelet-files): the reference's kubelet files with the
// inventory's labels and taints, its host files, made for the new node.
func joinLike(t *testing.T, ref dirHost, from, to Identity, labels, taints []string) ([]CopyFile, HostSetup) {
	t.Helper()
	l := discover(t, ref)
	paths, err := KubeletFiles(l)
	if err != nil {
		t.Fatal(err)
	}
	var files []CopyFile
	for _, p := range paths {
		b, err := ref.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, CopyFile{Path: p, Content: string(b), Mode: "0644"})
	}
	if files, err = Relabel(files, labels, taints, l.Role == RoleController); err != nil {
		t.Fatal(err)
	}
	s, err := ReadHostSetup(l, ref)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Retarget(append(files, s.Files...), from, to)
	if err != nil {
		t.Fatal(err)
	}
	return out, s
}

// A worker joined like a Typhoon worker gets what Typhoon writes on a
// worker of its own name, labels and taints: every file of the rendered
// template but /etc/hostname (the host's own), none of the reference's
// labels or taints; the units its enable links name enabled (kubelet.path
// by node-join's like-path, the others by host.prepare-node); on Fedora
// CoreOS containerd enabled and started with Typhoon's configuration, the
// kernel modules loaded and the sysctls applied.
func TestJoinLikeATyphoonWorkerWritesWhatTyphoonWrites(t *testing.T) {
	labels := []string{"node.kubernetes.io/pool=green", "example.com/disk=ssd"}
	taints := []string{"example.com/gpu=true:NoSchedule"}
	for _, c := range []struct {
		kind, ref, new   string
		from, to         Identity
		modules, sysctls []string
		enable, start    []string
	}{
		{KindTyphoonFCOS, "fcos-worker-node2", "fcos-worker-node4",
			Identity{NodeName: "node2.example.com", Hostname: "node2", Address: "10.0.0.2"},
			Identity{NodeName: "node4.example.com", Hostname: "node4", Address: "10.0.0.4"},
			[]string{"nf_conntrack", "br_netfilter"},
			[]string{"/etc/sysctl.d/max-user-watches.conf", "/etc/sysctl.d/reverse-path-filter.conf"},
			[]string{"wait-for-dns.service", ContainerdService}, []string{ContainerdService}},
		{KindTyphoonFlatcar, "flatcar-worker-node3", "flatcar-worker-node5",
			Identity{NodeName: "node3.example.com", Hostname: "node3", Address: "10.0.0.3"},
			Identity{NodeName: "node5.example.com", Hostname: "node5", Address: "10.0.0.5"},
			nil, []string{"/etc/sysctl.d/max-user-watches.conf"}, []string{"wait-for-dns.service"}, nil},
	} {
		t.Run(c.kind, func(t *testing.T) {
			ref, want := dirHost(filepath.Join(rendered, c.ref)), dirHost(filepath.Join(rendered, c.new))
			if l := discover(t, ref); l.Kind != c.kind || l.Role != "worker" {
				t.Fatalf("%s: %s %s", c.ref, l.Kind, l.Role)
			}
			out, s := joinLike(t, ref, c.from, c.to, labels, taints)
			wantFiles := want.files(t)
			delete(wantFiles, "/etc/hostname")
			written := map[string]bool{}
			for _, f := range out {
				written[f.Path] = true
				if w, ok := wantFiles[f.Path]; !ok {
					t.Errorf("%s is written; Typhoon writes no such file", f.Path)
				} else if f.Content != w {
					t.Errorf("%s:\n%s\nwant (Typhoon's for %s)\n%s", f.Path, f.Content, c.to.NodeName, w)
				}
			}
			for p := range wantFiles {
				if !written[p] {
					t.Errorf("%s is not written", p)
				}
			}
			enabled := append([]string{KubeletPath}, s.Enable...)
			for link, unit := range want.links(t) {
				if !slices.Contains(enabled, unit) {
					t.Errorf("%s (%s) is not made: %s is not enabled", link, unit, unit)
				}
			}
			if !slices.Equal(s.Modules, c.modules) || !slices.Equal(s.SysctlFiles, c.sysctls) || !slices.Equal(s.Enable, c.enable) || !slices.Equal(s.Start, c.start) {
				t.Errorf("modules %q, sysctl files %q, enable %q, start %q; want %q, %q, %q, %q", s.Modules, s.SysctlFiles, s.Enable, s.Start, c.modules, c.sysctls, c.enable, c.start)
			}
		})
	}
}

// Without Typhoon's containerd configuration a Fedora CoreOS reference is
// refused, naming the file: Kedge does not make one up. A unit the
// kubelet requires that is the OS's own is enabled, not copied; a
// modules-load.d entry that is not a module's name is refused.
func TestReadHostSetupFromWhatTheReferenceHas(t *testing.T) {
	ref := dirHost(filepath.Join(rendered, "fcos-worker-node2"))
	l := discover(t, ref)
	m := memFiles{dirHost: ref, hide: map[string]bool{ContainerdConfig: true}}
	if _, err := ReadHostSetup(l, m); err == nil || !strings.Contains(err.Error(), ContainerdConfig+" is missing") {
		t.Errorf("no containerd config: %v", err)
	}

	m = memFiles{dirHost: ref, extra: map[string]string{
		UnitDir + "/kubelet.service.wants/rpc-statd.service": "", // the OS's unit
		"/etc/modules-load.d/typhoon.conf":                   "# modules\nnf_conntrack\n; more\n\nbr_netfilter\n",
	}}
	s, err := ReadHostSetup(l, m)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Enable, []string{"wait-for-dns.service", "rpc-statd.service", ContainerdService}) || slices.ContainsFunc(s.Files, func(f CopyFile) bool { return strings.Contains(f.Path, "rpc-statd") }) {
		t.Errorf("enable %q, files %q", s.Enable, pathsOfFiles(s.Files))
	}
	if !slices.Equal(s.Modules, []string{"nf_conntrack", "br_netfilter"}) {
		t.Errorf("modules %q", s.Modules)
	}

	m.extra["/etc/modules-load.d/typhoon.conf"] = "nf_conntrack\nbr_netfilter; rm -rf /\n"
	if _, err := ReadHostSetup(l, m); err == nil || !strings.Contains(err.Error(), "/etc/modules-load.d/typhoon.conf:2") {
		t.Errorf("a bad module name: %v", err)
	}

	flatcar := dirHost(filepath.Join(rendered, "flatcar-worker-node3"))
	s, err = ReadHostSetup(discover(t, flatcar), flatcar)
	if err != nil || slices.Contains(s.Enable, ContainerdService) || slices.ContainsFunc(s.Files, func(f CopyFile) bool { return f.Path == ContainerdConfig }) {
		t.Errorf("Flatcar (containerd as the OS runs it): %+v %v", s, err)
	}

	// A reference with nothing of the kind gives empty lists, which the
	// runbook passes on as lists (not null).
	s, err = ReadHostSetup(discover(t, flatcar), dirHost(t.TempDir()))
	if err != nil || s.Files == nil || s.Modules == nil || s.SysctlFiles == nil || s.Enable == nil || s.Start == nil {
		t.Errorf("nothing to copy: %#v %v", s, err)
	}
}

// memFiles is a rendered host with files hidden or added (a link's
// target when the link is added under an enable directory, unless the
// unit's own file is there).
type memFiles struct {
	dirHost
	hide  map[string]bool
	extra map[string]string
}

func (m memFiles) ReadFile(p string) ([]byte, error) {
	if m.hide[p] {
		return nil, fmt.Errorf("open %s: %w", p, fs.ErrNotExist)
	}
	if c, ok := m.extra[p]; ok {
		return []byte(c), nil
	}
	return m.dirHost.ReadFile(p)
}

func (m memFiles) ReadDir(p string) ([]string, error) {
	names, err := m.dirHost.ReadDir(p)
	for x := range m.extra {
		if path.Dir(x) == p {
			names, err = append(names, path.Base(x)), nil
		}
	}
	return names, err
}

func pathsOfFiles(files []CopyFile) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Path)
	}
	return out
}

// A controller's labels and taint never reach a worker made from its
// kubelet.service (node-join's reference when the cluster has no other
// worker): Typhoon's controller ends its command with the taint, so the
// command then ends where the flags were, with Typhoon's worker role
// label last, as a worker made from a worker has it.
func TestRelabelTakesOutAControllersLabelAndTaint(t *testing.T) {
	unit := UnitDir + "/" + KubeletService
	b, err := dirHost(filepath.Join(rendered, "fcos-controller-node1")).ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		labels, taints []string
		want           string
	}{
		{nil, nil, "  --kubeconfig=/var/lib/kubelet/kubeconfig \\\n  --node-labels=node.kubernetes.io/node\nExecStop="},
		{[]string{"node.kubernetes.io/pool=green"}, []string{"x=y:NoExecute"},
			"  --kubeconfig=/var/lib/kubelet/kubeconfig \\\n  --node-labels=node.kubernetes.io/pool=green \\\n  --register-with-taints=x=y:NoExecute \\\n  --node-labels=node.kubernetes.io/node\nExecStop="},
	} {
		out, err := Relabel([]CopyFile{{Path: unit, Content: string(b)}}, c.labels, c.taints, true)
		if err != nil {
			t.Fatal(err)
		}
		got := out[0].Content
		if !strings.Contains(got, c.want) || strings.Contains(got, "controller") {
			t.Errorf("labels %q taints %q:\n%s", c.labels, c.taints, got)
		}
		if _, err := ParseUnit([]string{unit}, [][]byte{[]byte(got)}); err != nil {
			t.Error(err)
		}
	}
}

// Kedge takes the reference's labels and taints out only where it can do
// so whole; a KubeletConfiguration with the reference's taints is
// refused; without Typhoon's role label the new flags go where the
// reference's were, or at the end of the kubelet's command.
func TestRelabelEdges(t *testing.T) {
	ref := dirHost(filepath.Join(rendered, "fcos-worker-node2"))
	unit, config := UnitDir+"/"+KubeletService, "/etc/kubernetes/kubelet.yaml"
	ub, _ := ref.ReadFile(unit)
	cb, _ := ref.ReadFile(config)
	run := func(u, c string, labels, taints []string) (string, error) {
		out, err := Relabel([]CopyFile{{Path: unit, Content: u}, {Path: config, Content: c}}, labels, taints, false)
		if err != nil {
			return "", err
		}
		return out[0].Content, nil
	}
	inline := strings.Replace(string(ub), "  --kubeconfig=/var/lib/kubelet/kubeconfig \\\n", "  --kubeconfig=/var/lib/kubelet/kubeconfig --node-labels=a=b \\\n", 1)
	if _, err := run(inline, string(cb), nil, nil); err == nil || !strings.Contains(err.Error(), unit+":36 sets --node-labels or --register-with-taints not on a line of its own") {
		t.Errorf("inline flag: %v", err)
	}
	tainted := string(cb) + "registerWithTaints:\n- key: dedicated\n  value: blue\n  effect: NoSchedule\n"
	if _, err := run(string(ub), tainted, nil, nil); err == nil || !strings.Contains(err.Error(), config+":25 registers the node with the reference's taints") {
		t.Errorf("registerWithTaints: %v", err)
	}
	noRole := strings.Replace(string(ub), "  --register-with-taints=dedicated=blue:NoSchedule \\\n  --node-labels=node.kubernetes.io/node\n", "  --register-with-taints=dedicated=blue:NoSchedule\n", 1)
	got, err := run(noRole, string(cb), []string{"a.example/b=c"}, nil)
	if err != nil || !strings.Contains(got, "  --kubeconfig=/var/lib/kubelet/kubeconfig \\\n  --node-labels=a.example/b=c\nExecStop=") {
		t.Errorf("no role label: %v\n%s", err, got)
	}
	bare := strings.Replace(noRole, "  --node-labels=node.kubernetes.io/pool=blue \\\n  --register-with-taints=dedicated=blue:NoSchedule\n", "", 1)
	bare = strings.Replace(bare, "kubeconfig \\\nExecStop", "kubeconfig\nExecStop", 1)
	got, err = run(bare, string(cb), []string{"a.example/b=c"}, []string{"t:NoSchedule"})
	if err != nil || !strings.Contains(got, "  --kubeconfig=/var/lib/kubelet/kubeconfig \\\n  --node-labels=a.example/b=c \\\n  --register-with-taints=t:NoSchedule\nExecStop=") {
		t.Errorf("no flags at all: %v\n%s", err, got)
	}
	// The role label is not given twice; a value that is not a label is
	// refused before it reaches a command line.
	got, err = run(string(ub), string(cb), []string{WorkerRoleLabel + "="}, nil)
	if err != nil || strings.Count(got, WorkerRoleLabel) != 1 {
		t.Errorf("role label from the inventory: %v\n%s", err, got)
	}
	if _, err := run(string(ub), string(cb), []string{"a=b c"}, nil); err == nil {
		t.Error("a label with a space was taken")
	}
}
