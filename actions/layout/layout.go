package layout

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// The layouts Kedge knows.
const (
	// KindKedge is what Kedge's bootstrap and node-join write.
	KindKedge = "kedge"
	// KindTyphoonFlatcar is Typhoon on Flatcar Linux: the kubelet is a
	// `docker run -d` in ExecStartPre, followed by `docker logs -f`.
	KindTyphoonFlatcar = "typhoon-flatcar"
	// KindTyphoonFCOS is Typhoon on Fedora CoreOS: the kubelet is a
	// `podman run` in ExecStart.
	KindTyphoonFCOS = "typhoon-fcos"
	// KindNone is a host with no kubelet unit and no etcd unit: a bare
	// host node-join or bootstrap may set up.
	KindNone = "none"
	// KindUnknown is a host with a kubelet Kedge cannot read: every
	// runbook refuses it.
	KindUnknown = "unknown"
)

// Known reports whether kind is a layout Kedge can operate.
func Known(kind string) bool {
	return kind == KindKedge || kind == KindTyphoonFlatcar || kind == KindTyphoonFCOS
}

// The units Discover asks systemd about.
const (
	KubeletService = "kubelet.service"
	KubeletPath    = "kubelet.path"
	EtcdMember     = "etcd-member.service"
)

// Units are the units whose state Discover needs, in the order the
// host.layout action asks for them.
var Units = []string{KubeletService, KubeletPath, EtcdMember}

// KedgeMarker starts every unit file Kedge renders.
const KedgeMarker = "# Written by Kedge."

// UnitState is what `systemctl show` reports for a unit.
type UnitState struct {
	LoadState     string   `json:"loadState"`
	ActiveState   string   `json:"activeState"`
	UnitFileState string   `json:"unitFileState"`
	FragmentPath  string   `json:"fragmentPath,omitempty"`
	DropInPaths   []string `json:"dropInPaths,omitempty"`
	// Environment is systemd's Environment property: what the loaded
	// unit really uses (after the last daemon-reload).
	Environment []string `json:"environment,omitempty"`
}

// Loaded reports whether systemd has the unit.
func (s UnitState) Loaded() bool { return s.LoadState == "loaded" }

// Facts are what the host's systemd reports.
type Facts struct {
	Hostname string               `json:"hostname"`
	Units    map[string]UnitState `json:"units"`
}

// Reader reads the host's files. A missing file or directory is an error
// that wraps fs.ErrNotExist.
type Reader interface {
	ReadFile(path string) ([]byte, error)
	ReadDir(path string) ([]string, error)
}

// Layout is how a host runs Kubernetes.
type Layout struct {
	Kind string `json:"kind"`
	// Why is the evidence for Kind, or what Kedge could not read.
	Why string `json:"why"`
	// Role is RoleController (it runs an API server static pod or etcd),
	// worker, or "" with no kubelet.
	Role string `json:"role,omitempty"`
	// NodeName is the Node's name as the kubelet registers it
	// (--hostname-override, else the host name, lower-cased as the
	// kubelet does); NodeNameFrom says where it was read, e.g.
	// "--hostname-override in /etc/systemd/system/kubelet.service".
	NodeName     string `json:"nodeName,omitempty"`
	NodeNameFrom string `json:"nodeNameFrom,omitempty"`
	// Hostname is the host's own name.
	Hostname      string   `json:"hostname,omitempty"`
	ClusterDNS    []string `json:"clusterDNS,omitempty"`
	ClusterDomain string   `json:"clusterDomain,omitempty"`
	Kubelet       *Kubelet `json:"kubelet,omitempty"`
	Etcd          Etcd     `json:"etcd"`
	// StaticPods maps each control plane component found in the static
	// pod directory to its manifest.
	StaticPods map[string]string `json:"staticPods,omitempty"`
	// Files maps what a file is (the File* names) to its path on the host.
	Files map[string]string `json:"files,omitempty"`
	// RunAs says who each component runs as (kube-apiserver,
	// kube-controller-manager, kube-scheduler, etcd, kubelet), so who
	// must be able to read its files.
	RunAs map[string]RunAs `json:"runAs,omitempty"`
}

// Kubelet is how the host runs its kubelet.
type Kubelet struct {
	Unit Unit `json:"unit"`
	// RunFrom is the unit file whose command line runs the kubelet's
	// container.
	RunFrom     string `json:"runFrom,omitempty"`
	Active      bool   `json:"active"`
	ActiveState string `json:"activeState"` // kubelet.service's ActiveState
	Enabled     string `json:"enabled"`
	PathEnabled string `json:"pathEnabled,omitempty"` // kubelet.path's UnitFileState
	// Live is a kubelet that runs, is starting, or starts again by
	// itself: kubelet.service active (or activating, reloading) or
	// enabled, or kubelet.path active or enabled. node-remove stops no
	// live kubelet whose Node it did not find (and drain).
	Live bool `json:"live"`
	// PathExists is the file whose appearance starts the kubelet
	// (kubelet.path), "" without one.
	PathExists string `json:"pathExists"`
	// PathUnit is kubelet.path's unit file, "" without one.
	PathUnit string `json:"pathUnit,omitempty"`
	// Runtime runs the kubelet's container: docker or podman.
	Runtime string `json:"runtime"`
	// Image is the KUBELET_IMAGE systemd uses, ImageFrom the unit file or
	// drop-in that sets it last.
	Image     string `json:"image"`
	ImageFrom string `json:"imageFrom"`
	// ImageInEffect is KUBELET_IMAGE as the loaded unit has it; it differs
	// from Image when the files changed without a daemon-reload.
	ImageInEffect string `json:"imageInEffect"`
	// ImageOverriddenBy is a drop-in that sets KUBELET_IMAGE after the one
	// a kubelet image swap writes (ImageDropIn), so that a swap would not
	// take effect; "" when none does.
	ImageOverriddenBy string `json:"imageOverriddenBy"`
	// ImageDropIn is the drop-in a kubelet image swap writes: where the
	// operator sets KUBELET_IMAGE (Typhoon documents
	// 10-image-override.conf) when that is a drop-in of kubelet.service
	// setting nothing else, else Kedge's own (10-image.conf).
	// ImageDropInName is its file name. ImageDropInRefused says why a
	// swap would not know where to write (a drop-in that sets the image
	// among other settings, or one outside kubelet.service.d).
	ImageDropIn        string `json:"imageDropIn"`
	ImageDropInName    string `json:"imageDropInName"`
	ImageDropInRefused string `json:"imageDropInRefused"`
	// Args are the kubelet's arguments (after the image).
	Args []string `json:"args"`
	// Volumes maps a path in the kubelet's container to the host's.
	Volumes   map[string]string `json:"volumes,omitempty"`
	Config    string            `json:"config,omitempty"`
	ConfigDir string            `json:"configDir,omitempty"`
	// ConfigDropIns are the .conf files in ConfigDir, in the order the
	// kubelet merges them.
	ConfigDropIns       []string `json:"configDropIns,omitempty"`
	Kubeconfig          string   `json:"kubeconfig"`
	BootstrapKubeconfig string   `json:"bootstrapKubeconfig"`
	ClientCAFile        string   `json:"clientCAFile,omitempty"`
	StaticPodPath       string   `json:"staticPodPath,omitempty"`
	// ClientCertificate is the kubelet's client certificate file as its
	// kubeconfig references it ("" when embedded).
	ClientCertificate string `json:"clientCertificate"`
}

// Etcd is how the host runs etcd, if it does.
type Etcd struct {
	// Mode is static-pod, host-unit or none.
	Mode     string `json:"mode"`
	Unit     string `json:"unit,omitempty"`
	Manifest string `json:"manifest,omitempty"`
	EnvFile  string `json:"envFile,omitempty"`
	Name     string `json:"name,omitempty"`
	// InitialCluster is the membership etcd started with (name=peer URL);
	// the live member list is etcd's to tell.
	InitialCluster []Member `json:"initialCluster,omitempty"`
	ClientURLs     []string `json:"clientURLs,omitempty"`
	// DataDir is etcd's data directory on the host (--data-dir or
	// ETCD_DATA_DIR through the container's volumes); "" when it is not
	// on one.
	DataDir string `json:"dataDir,omitempty"`
	// The image fields below are always in host.layout's outputs (empty
	// without etcd), so runbooks compare them without has().
	//
	// Image is the image etcd runs: the static pod's container's, or on a
	// host unit ETCD_IMAGE as the unit's files set it (ImageFrom the file
	// that sets it last; ImageInEffect as the loaded unit has it, which
	// differs after a change without a daemon-reload).
	Image         string `json:"image"`
	ImageFrom     string `json:"imageFrom"`
	ImageInEffect string `json:"imageInEffect"`
	// Runtime runs a host unit's etcd container: docker or podman.
	Runtime string `json:"runtime"`
	// ImageDropIn is where etcd-upgrade sets ETCD_IMAGE on a host unit:
	// the operator's drop-in that sets only it, else Kedge's own
	// (EtcdImageDropIn); ImageDropInName is its file name.
	// ImageDropInRefused says why an upgrade would not know where to
	// write (the image set among other settings, or named in the run
	// command itself).
	ImageDropIn        string `json:"imageDropIn"`
	ImageDropInName    string `json:"imageDropInName"`
	ImageDropInRefused string `json:"imageDropInRefused"`
}

// EtcdImageVariable holds the image of etcd's container in Typhoon's
// etcd-member.service.
const EtcdImageVariable = "ETCD_IMAGE"

// EtcdImageDropIn is the drop-in etcd-upgrade writes ETCD_IMAGE into.
const EtcdImageDropIn = "/etc/systemd/system/etcd-member.service.d/10-image.conf"

// Member is one etcd member.
type Member struct {
	Name    string `json:"name"`
	PeerURL string `json:"peerURL"`
}

// Etcd modes.
const (
	EtcdStaticPod = "static-pod"
	EtcdHostUnit  = "host-unit"
	EtcdNone      = "none"
)

// The files Layout.Files names.
const (
	FileClusterCA            = "cluster-ca"
	FileClusterCAKey         = "cluster-ca-key"
	FileAPIServerCert        = "apiserver-cert"
	FileAPIServerKey         = "apiserver-key"
	FileKubeletClientCA      = "kubelet-client-ca"
	FileServiceAccountK      = "service-account-key"
	FileServiceAccountP      = "service-account-pub"
	FileEtcdClientCA         = "etcd-client-ca"
	FileEtcdClientCert       = "etcd-client-cert"
	FileEtcdClientKey        = "etcd-client-key"
	FileEtcdServerCA         = "etcd-server-ca"
	FileEtcdServerCert       = "etcd-server-cert"
	FileEtcdServerKey        = "etcd-server-key"
	FileEtcdPeerCA           = "etcd-peer-ca"
	FileEtcdPeerCert         = "etcd-peer-cert"
	FileEtcdPeerKey          = "etcd-peer-key"
	FileAPIServerKubeletCert = "apiserver-kubelet-client-cert"
	FileAPIServerKubeletKey  = "apiserver-kubelet-client-key"
	FileControllerManagerKC  = "controller-manager-kubeconfig"
	FileSchedulerKC          = "scheduler-kubeconfig"
	FileKubeletConfig        = "kubelet-config"
	FileKubeletKubecfg       = "kubelet-kubeconfig"
	FileBootstrapKubecfg     = "bootstrap-kubeconfig"
	// The kubelet's serving certificate and key: its tlsCertFile and
	// tlsPrivateKeyFile, or kubelet.crt and .key in its --cert-dir
	// (default /var/lib/kubelet/pki), where Kedge's cert-renewal puts one
	// the cluster CA signed.
	FileKubeletServingCert = "kubelet-serving-cert"
	FileKubeletServingKey  = "kubelet-serving-key"
	// FileKubeletClientCurrent is the kubelet's client certificate store
	// (rotateCertificates): kubelet-client-current.pem in its --cert-dir,
	// a link to a dated file holding certificate and key. Once there it
	// wins over a credential embedded in the kubelet's kubeconfig, which
	// the kubelet copies there at its first start.
	FileKubeletClientCurrent = "kubelet-client-current"
	// The controller manager's CSR signer certificate
	// (--cluster-signing-cert-file), the CA it publishes to every
	// namespace (--root-ca-file) and the CA it trusts clients with
	// (--client-ca-file).
	FileClusterSigner       = "cluster-signer-cert"
	FileRootCA              = "root-ca"
	FileControllerManagerCA = "controller-manager-client-ca"
)

// ErrUnknown is wrapped by Require's error for a layout Kedge cannot
// operate.
var ErrUnknown = errors.New("unknown layout")

// Require returns an error naming the host and what Kedge found unless
// the layout is one of allowed.
func (l Layout) Require(host string, allowed ...string) error {
	if slices.Contains(allowed, l.Kind) {
		return nil
	}
	return fmt.Errorf("%w on %s: %s (%s); this runbook works on %s", ErrUnknown, host, l.Kind, l.Why, strings.Join(allowed, ", "))
}

// Discover reads the host's layout from what systemd reports and the
// files the units and the kubelet's configuration name.
func Discover(f Facts, r Reader) (Layout, error) {
	l := Layout{Etcd: Etcd{Mode: EtcdNone}, Files: map[string]string{}, Hostname: f.Hostname}
	ks := f.Units[KubeletService]
	es := f.Units[EtcdMember]
	if !ks.Loaded() {
		if es.Loaded() {
			l.Kind, l.Why = KindUnknown, "etcd-member.service is loaded but there is no kubelet.service"
			return l, nil
		}
		l.Kind, l.Why = KindNone, "no kubelet.service"
		l.NodeName, l.NodeNameFrom = strings.ToLower(f.Hostname), "the host name (no kubelet yet)"
		return l, nil
	}
	k, fragment, err := readKubelet(ks, f.Units[KubeletPath], r)
	if err != nil {
		return l, err
	}
	l.Kubelet = k
	l.Kind, l.Why = classify(k, fragment)
	if l.Kind == KindUnknown {
		return l, nil
	}
	l.NodeName, l.NodeNameFrom = strings.ToLower(f.Hostname), "the host name (`hostname`; the kubelet has no --hostname-override in "+k.RunFrom+")"
	if name := flagValue(k.Args, "hostname-override"); name != "" {
		l.NodeName, l.NodeNameFrom = strings.ToLower(name), "--hostname-override in "+k.RunFrom
	}
	if err := readKubeletFiles(&l, r); err != nil {
		return l, err
	}
	if err := readStaticPods(&l, r); err != nil {
		return l, err
	}
	if err := readAdminKubeconfig(&l, r); err != nil {
		return l, err
	}
	if es.Loaded() {
		if l.Etcd.Mode == EtcdStaticPod {
			l.Kind, l.Why = KindUnknown, "etcd runs both as a static pod and as etcd-member.service"
			return l, nil
		}
		if err := readEtcdUnit(&l, es, r); err != nil {
			return l, err
		}
	}
	if err := readRunAs(&l, es, r); err != nil {
		return l, err
	}
	l.Role = RoleWorker
	if l.StaticPods["kube-apiserver"] != "" || l.Etcd.Mode != EtcdNone {
		l.Role = RoleController
	}
	return l, nil
}

// The roles a host's layout gives it.
const (
	RoleController = "controller"
	RoleWorker     = "worker"
)

// readKubelet merges kubelet.service's files and reads its run command.
func readKubelet(ks, ps UnitState, r Reader) (*Kubelet, []byte, error) {
	files := append([]string{ks.FragmentPath}, ks.DropInPaths...)
	var contents [][]byte
	for _, p := range files {
		b, err := r.ReadFile(p)
		if err != nil {
			return nil, nil, fmt.Errorf("kubelet.service: %w", err)
		}
		contents = append(contents, b)
	}
	u, err := ParseUnit(files, contents)
	if err != nil {
		return nil, nil, fmt.Errorf("kubelet.service: %w", err)
	}
	k := &Kubelet{Unit: u, Active: ks.ActiveState == "active", ActiveState: ks.ActiveState, Enabled: ks.UnitFileState,
		Image: u.Environment[ImageVariable], ImageFrom: u.EnvironmentFrom[ImageVariable], ImageOverriddenBy: overrides(u, ImageVariable, ImageDropIn)}
	k.ImageDropIn, k.ImageDropInRefused = imageTarget(u, ImageVariable, ImageDropIn)
	if k.ImageDropIn != "" {
		k.ImageDropInName = path.Base(k.ImageDropIn)
	}
	for _, e := range ks.Environment {
		if v, ok := strings.CutPrefix(e, ImageVariable+"="); ok {
			k.ImageInEffect = v
		}
	}
	if ps.Loaded() {
		k.PathEnabled = ps.UnitFileState
		if ps.FragmentPath != "" {
			b, err := r.ReadFile(ps.FragmentPath)
			if err != nil {
				return nil, nil, fmt.Errorf("kubelet.path: %w", err)
			}
			pu, err := ParseUnit([]string{ps.FragmentPath}, [][]byte{b})
			if err != nil {
				return nil, nil, fmt.Errorf("kubelet.path: %w", err)
			}
			k.PathExists = pu.Path["PathExists"]
			k.PathUnit = ps.FragmentPath
		}
	}
	k.Live = live(ks, ps)
	return k, contents[0], nil
}

// live reports whether a kubelet runs, is starting or starts again by
// itself: kubelet.service active (or activating, reloading, deactivating)
// or enabled, or kubelet.path (which starts it when its file appears)
// active or enabled.
func live(ks, ps UnitState) bool {
	switch ks.ActiveState {
	case "active", "activating", "reloading", "deactivating":
		return true
	}
	return strings.HasPrefix(ks.UnitFileState, "enabled") ||
		ps.Loaded() && (ps.ActiveState == "active" || strings.HasPrefix(ps.UnitFileState, "enabled"))
}

// RestartedAtAnnotation is the annotation host.restart-static-pod sets on
// a static pod's manifest (a changed manifest is a new pod to the
// kubelet, which stops the old one and starts it again); the kubelet
// copies it to the mirror pod, where kube.wait-static-pod looks for it.
const RestartedAtAnnotation = "kedge.dev/restarted-at"

// ImageVariable is the unit environment variable holding the kubelet's
// image in every layout Kedge knows.
const ImageVariable = "KUBELET_IMAGE"

// ImageDropIn is the drop-in a kubelet image swap writes.
const ImageDropIn = "/etc/systemd/system/kubelet.service.d/10-image.conf"

// imageTarget is the drop-in a swap (or an etcd upgrade) writes the
// image variable into: the one that sets it last when that is an
// operator's drop-in setting nothing else (it is rewritten whole), else
// Kedge's own, dropIn. A drop-in that sets the image among other
// settings is refused: writing beside it would leave a dead setting (it
// sorts before dropIn) or none at all (it sorts after).
func imageTarget(u Unit, variable, dropIn string) (target, refused string) {
	from := u.EnvironmentFrom[variable]
	switch {
	case from == "" || from == dropIn || len(u.Files) > 0 && from == u.Files[0]:
		return dropIn, ""
	case path.Dir(from) != path.Dir(dropIn):
		return "", fmt.Sprintf("%s sets %s outside %s: Kedge writes the image where operators set it, there; move the setting into a drop-in of its own in %s",
			from, variable, path.Dir(dropIn), path.Dir(dropIn))
	case u.sole[from] != variable:
		return "", fmt.Sprintf("%s sets %s among other settings: Kedge writes the image where it is set and will not rewrite the rest; move %s into a drop-in of its own",
			from, variable, variable)
	}
	return from, ""
}

// overrides reports the file that sets variable last when it is a
// drop-in systemd reads after dropIn (drop-ins apply in file name order,
// whatever their directory).
func overrides(u Unit, variable, dropIn string) string {
	from := u.EnvironmentFrom[variable]
	if from == "" || from == dropIn || from == u.Files[0] {
		return ""
	}
	if path.Base(from) > path.Base(dropIn) {
		return from
	}
	return ""
}

// classify names the layout from the kubelet unit and its run command.
func classify(k *Kubelet, fragment []byte) (kind, why string) {
	run, where, file, err := findRun(k)
	if err != nil {
		return KindUnknown, err.Error()
	}
	k.Runtime, k.Args, k.Volumes, k.RunFrom = run.runtime, run.args, run.volumes, file
	kedge := strings.HasPrefix(string(fragment), KedgeMarker)
	switch {
	case kedge:
		return KindKedge, fmt.Sprintf("%s starts with Kedge's marker; %s run in %s", k.Unit.Files[0], run.runtime, where)
	case k.PathExists == "":
		return KindUnknown, fmt.Sprintf("kubelet.service runs the kubelet with %s but was not written by Kedge and has no kubelet.path (PathExists=) as Typhoon's has", run.runtime)
	case run.runtime == "docker" && where == "ExecStartPre" && run.detached:
		return KindTyphoonFlatcar, fmt.Sprintf("docker run -d in ExecStartPre, kubelet.path waits for %s", k.PathExists)
	case run.runtime == "podman" && where == "ExecStart":
		return KindTyphoonFCOS, fmt.Sprintf("podman run in ExecStart, kubelet.path waits for %s", k.PathExists)
	}
	return KindUnknown, fmt.Sprintf("%s run in %s is neither Typhoon's Flatcar (docker run -d in ExecStartPre) nor its Fedora CoreOS (podman run in ExecStart) kubelet", run.runtime, where)
}

// findRun finds the container run that starts the kubelet from
// ${KUBELET_IMAGE}: the command, where it is (ExecStartPre or ExecStart)
// and the unit file it was read from.
func findRun(k *Kubelet) (runCommand, string, string, error) {
	for _, c := range []struct {
		where string
		lines []string
		from  []string
	}{{"ExecStartPre", k.Unit.ExecStartPre, k.Unit.execStartPreFrom}, {"ExecStart", k.Unit.ExecStart, k.Unit.execStartFrom}} {
		for i, line := range c.lines {
			words, err := Command(line)
			if err != nil {
				return runCommand{}, "", "", fmt.Errorf("kubelet.service %s: %w", c.where, err)
			}
			if len(words) < 2 || words[1] != "run" || !slices.Contains(words, "${"+ImageVariable+"}") {
				continue
			}
			rt := path.Base(words[0])
			if rt != "docker" && rt != "podman" {
				continue
			}
			run, err := parseRun(rt, words[2:])
			if err != nil {
				return runCommand{}, "", "", fmt.Errorf("kubelet.service %s: %s run: %w", c.where, rt, err)
			}
			file := ""
			if i < len(c.from) {
				file = c.from[i]
			}
			return run, c.where, file, nil
		}
	}
	return runCommand{}, "", "", fmt.Errorf("kubelet.service runs no docker or podman container from ${%s}", ImageVariable)
}

type runCommand struct {
	runtime  string
	name     string
	detached bool
	envFiles []string
	volumes  map[string]string
	image    string
	args     []string
}

// Flags of docker/podman run that take a value; others are switches.
var runValueFlags = map[string]bool{
	"name": true, "v": true, "volume": true, "network": true, "net": true, "pid": true, "env-file": true,
	"log-driver": true, "user": true, "u": true, "entrypoint": true, "e": true, "env": true,
	"ipc": true, "uts": true, "security-opt": true, "cgroupns": true, "cgroup-parent": true,
	"mount": true, "device": true, "restart": true, "label": true, "l": true, "workdir": true, "w": true,
	"log-opt": true, "hostname": true, "stop-timeout": true, "cap-add": true, "cap-drop": true,
}

var runSwitches = map[string]bool{
	"d": true, "detach": true, "privileged": true, "rm": true, "i": true, "t": true, "interactive": true,
	"tty": true, "read-only": true, "init": true, "replace": true,
}

func parseRun(rt string, words []string) (runCommand, error) {
	run := runCommand{runtime: rt, volumes: map[string]string{}}
	for i := 0; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "-") {
			run.image, run.args = w, words[i+1:]
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(w, "-"), "=")
		switch {
		case runSwitches[name]:
		case runValueFlags[name]:
			if !hasVal {
				if i+1 >= len(words) {
					return run, fmt.Errorf("%s needs a value", w)
				}
				i++
				val = words[i]
			}
		default:
			return run, fmt.Errorf("flag %s is not one Kedge reads", w)
		}
		switch name {
		case "d", "detach":
			run.detached = true
		case "name":
			run.name = val
		case "env-file":
			run.envFiles = append(run.envFiles, val)
		case "v", "volume":
			parts := strings.Split(val, ":")
			if len(parts) < 2 {
				return run, fmt.Errorf("volume %q has no container path", val)
			}
			run.volumes[path.Clean(parts[1])] = path.Clean(parts[0])
		}
	}
	if run.image == "" {
		return run, errors.New("no image")
	}
	return run, nil
}

// hostPath maps a path in a container to the host through its volumes
// (the longest mount that holds it); ok is false when no volume does.
func hostPath(volumes map[string]string, p string) (string, bool) {
	p = path.Clean(p)
	best := ""
	for c := range volumes {
		if (p == c || strings.HasPrefix(p, c+"/") || c == "/") && len(c) > len(best) {
			best = c
		}
	}
	if best == "" {
		return "", false
	}
	rest := strings.TrimPrefix(p, best)
	return path.Join(volumes[best], rest), true
}

// flagValue returns the value of the last --name=value (or --name value)
// in args.
func flagValue(args []string, name string) string {
	v := ""
	for i, a := range args {
		if s, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			v = s
		} else if a == "--"+name && i+1 < len(args) {
			v = args[i+1]
		}
	}
	return v
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
