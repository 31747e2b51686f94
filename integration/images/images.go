package images

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"kedge.dev/kedge/integration/srcroot"
)

// Versions and names of the images, as Kedge's runbooks name them when the
// inventory does not (runbooks.DefaultKubernetesVersion,
// DefaultImageRepository, DefaultEtcdImage; a test holds them equal) and as
// the test world's tools are built (scripts/kube-tools.sh pins the same
// Kubernetes version).
const (
	// KubeVersion is the version of the binaries in the tools directory.
	KubeVersion = "v1.35.4"
	// ImageRepository holds the control-plane and pause images.
	ImageRepository = "registry.k8s.io"
	// EtcdRef is etcd's image (the etcd in the tools directory is 3.6.16).
	EtcdRef = ImageRepository + "/etcd:3.6.16-0"
	// SwapVersion is the version the second kubelet image's kubelet
	// reports: the same kubelet source re-linked with another version
	// string (KubeletBinary), so that swapping the image is seen in
	// node.status.nodeInfo.kubeletVersion. A prerelease of KubeVersion, so
	// nobody mistakes it for a released Kubernetes.
	SwapVersion = KubeVersion + "-kedge.1"
	// PauseVersion is the pause image's tag, the sandbox image the test
	// world's containerd is configured with.
	PauseVersion = "3.10"
	// KubeletRepository is Typhoon's kubelet image, whose entrypoint is the
	// kubelet (activities/nodefiles's kubelet unit passes it flags only).
	KubeletRepository = "quay.io/poseidon/kubelet"
)

// PauseRef is the pause image's reference.
func PauseRef() string { return ImageRepository + "/pause:" + PauseVersion }

// KubeletRef is the kubelet image of a version, e.g.
// quay.io/poseidon/kubelet:v1.35.4.
func KubeletRef(version string) string { return KubeletRepository + ":" + version }

// ControlPlaneRef is a control-plane component's image (kube-apiserver,
// kube-controller-manager, kube-scheduler, kube-proxy) as the bootstrap
// runbook names it: REPOSITORY/NAME:VERSION; etcd's is EtcdRef.
func ControlPlaneRef(name string) string {
	if name == "etcd" {
		return EtcdRef
	}
	return ImageRepository + "/" + name + ":" + KubeVersion
}

// ControlPlaneComponents are the components ControlPlane makes images of.
var ControlPlaneComponents = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"}

const binDir = "/usr/local/bin"

var pathEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

// PauseBinary builds integration/images/pause (static, CGO_ENABLED=0)
// into the cache, once per source and Go version, and returns its path.
func PauseBinary(ctx context.Context) (string, error) {
	return staticBinary(ctx, "pause")
}

// staticBinary builds integration/images/NAME (static, CGO_ENABLED=0)
// into the cache, once per source and Go version, and returns its path.
func staticBinary(ctx context.Context, name string) (string, error) {
	root, err := srcroot.Dir()
	if err != nil {
		return "", err
	}
	src := filepath.Join(root, "integration", "images", name)
	main, err := os.ReadFile(filepath.Join(src, "main.go"))
	if err != nil {
		return "", err
	}
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(append(main, runtime.Version()...))
	out := filepath.Join(dir, name+"-"+hex.EncodeToString(sum[:8]))
	err = buildOnce(out, func(tmp string) error {
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", tmp, ".")
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %w: %s", name, err, b)
		}
		return nil
	})
	return out, err
}

// Pause is registry.k8s.io/pause:3.10: the pause binary alone.
func Pause(ctx context.Context) (Image, error) {
	bin, err := PauseBinary(ctx)
	if err != nil {
		return Image{}, err
	}
	return Image{Ref: PauseRef(), Entrypoint: []string{"/pause"},
		Files: []File{{Path: "/pause", Source: bin}}}, nil
}

// ControlPlane returns the images of ControlPlaneComponents, each its
// binary from the tools directory in /usr/local/bin (on the PATH, as the
// rendered static pods call them by name) with the libraries it links.
// kube-proxy's also holds iptables, as the upstream image does: kube-proxy
// runs iptables-restore and iptables-save from its own image.
func ControlPlane(tools string) ([]Image, error) {
	return controlPlane(tools, KubeVersion, ControlPlaneComponents)
}

// NextControlPlane returns the images of the API server, controller
// manager, scheduler and kube-proxy of another release (the next minor's
// tools directory, scripts/kube-tools.sh next), tagged version: what
// cluster-upgrade's manifests and kube-proxy's DaemonSet name.
func NextControlPlane(tools, version string) ([]Image, error) {
	return controlPlane(tools, version, []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"})
}

// BadFlag is the image of a control-plane component of a release (the
// next minor's tools directory, tagged version) that cannot start: its
// binary is run with a flag it does not know (integration/images/badflag),
// and exits as the real program does.
func BadFlag(ctx context.Context, tools, version, name string) (Image, error) {
	wrapper, err := staticBinary(ctx, "badflag")
	if err != nil {
		return Image{}, err
	}
	path := filepath.Join(binDir, name)
	files, err := BinaryFiles(filepath.Join(tools, name), path+".real")
	if err != nil {
		return Image{}, err
	}
	files = append(files, File{Path: path, Source: wrapper})
	return Image{Ref: ImageRepository + "/" + name + ":" + version, Env: pathEnv, Files: files}, nil
}

func controlPlane(tools, version string, names []string) ([]Image, error) {
	var out []Image
	for _, name := range names {
		files, err := BinaryFiles(filepath.Join(tools, name), filepath.Join(binDir, name))
		if err != nil {
			return nil, err
		}
		if name == "kube-proxy" {
			ipt, err := IptablesFiles()
			if err != nil {
				return nil, err
			}
			files = dedupe(append(files, ipt...))
		}
		ref := ControlPlaneRef(name)
		if name != "etcd" {
			ref = ImageRepository + "/" + name + ":" + version
		}
		out = append(out, Image{Ref: ref, Env: pathEnv, Files: files})
	}
	return out, nil
}

// iptablesMulti is the machine's iptables (nf_tables backend), and
// xtablesDirs where its extensions are, which it loads at run time.
const (
	iptablesMulti = "/usr/sbin/xtables-nft-multi"
	xtablesDirs   = "/usr/lib/*/xtables"
)

// IptablesFiles are the machine's iptables with the nf_tables backend:
// the multi-call binary, its names (iptables, iptables-save,
// iptables-restore and the ip6tables ones) and its extensions, each with
// the libraries it links.
func IptablesFiles() ([]File, error) {
	files, err := BinaryFiles(iptablesMulti, iptablesMulti)
	if err != nil {
		return nil, fmt.Errorf("iptables (scripts/deps.sh installs it): %w", err)
	}
	for _, v := range []string{"iptables", "ip6tables"} {
		for _, suffix := range []string{"", "-save", "-restore", "-nft", "-nft-save", "-nft-restore"} {
			files = append(files, File{Path: "/usr/sbin/" + v + suffix, Link: filepath.Base(iptablesMulti)})
		}
	}
	exts, err := filepath.Glob(filepath.Join(xtablesDirs, "*.so"))
	if err != nil || len(exts) == 0 {
		return nil, fmt.Errorf("no iptables extensions in %s (%v)", xtablesDirs, err)
	}
	for _, e := range exts {
		f, err := BinaryFiles(e, e)
		if err != nil {
			return nil, err
		}
		files = append(files, f...)
	}
	return dedupe(files), nil
}

// Kubelet returns quay.io/poseidon/kubelet:VERSION: the kubelet of that
// version (KubeletBinary) as the entrypoint, and kubectl (for
// delete-node.service, which runs it with --entrypoint kubectl), each with
// the C library and dynamic loader it links.
func Kubelet(ctx context.Context, tools, version string) (Image, error) {
	kubelet, err := KubeletBinary(ctx, tools, version)
	if err != nil {
		return Image{}, err
	}
	return KubeletOf(tools, kubelet, version)
}

// KubeletOf is quay.io/poseidon/kubelet:VERSION made of the kubelet
// binary given (e.g. the next minor's tools directory's) and the tools
// directory's kubectl.
func KubeletOf(tools, kubelet, version string) (Image, error) {
	files, err := BinaryFiles(kubelet, filepath.Join(binDir, "kubelet"))
	if err != nil {
		return Image{}, err
	}
	kubectl, err := BinaryFiles(filepath.Join(tools, "kubectl"), filepath.Join(binDir, "kubectl"))
	if err != nil {
		return Image{}, err
	}
	return Image{Ref: KubeletRef(version), Entrypoint: []string{filepath.Join(binDir, "kubelet")}, Env: pathEnv,
		Files: dedupe(append(files, kubectl...))}, nil
}

// KubeletBinary returns a kubelet that reports version: the tools
// directory's for KubeVersion; for another version, the same source
// re-linked with that version string, the way scripts/kube-tools.sh sets
// it, into the cache. The re-link reuses the Go build cache that
// kube-tools.sh filled (seconds); with a cold Go build cache it compiles
// the kubelet again (many minutes).
func KubeletBinary(ctx context.Context, tools, version string) (string, error) {
	if version == KubeVersion {
		return filepath.Join(tools, "kubelet"), nil
	}
	if strings.ContainsAny(version, " \t'\"") || !strings.HasPrefix(version, "v") {
		return "", fmt.Errorf("kubelet version %q: want vMAJOR.MINOR.PATCH[-suffix]", version)
	}
	root, err := srcroot.Dir()
	if err != nil {
		return "", err
	}
	mod := filepath.Join(root, "integration", "tools", "kube")
	sum, err := os.ReadFile(filepath.Join(mod, "go.sum"))
	if err != nil {
		return "", err
	}
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(append(append(sum, runtime.Version()...), version...))
	out := filepath.Join(dir, "kubelet-"+version+"-"+hex.EncodeToString(h[:8]))
	err = buildOnce(out, func(tmp string) error {
		ldflags := "-s -w -X k8s.io/component-base/version.gitVersion=" + version +
			" -X k8s.io/client-go/pkg/version.gitVersion=" + version
		cmd := exec.CommandContext(ctx, "go", "build", "-ldflags", ldflags, "-o", tmp, "k8s.io/kubernetes/cmd/kubelet")
		cmd.Dir = mod
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("re-link the kubelet as %s: %w: %s", version, err, b)
		}
		return nil
	})
	return out, err
}

// BinaryFiles returns the files that run the binary bin at path inside an
// image: bin itself and, when it is linked dynamically, every library ldd
// names (the C library, the dynamic loader), each at the path ldd gives.
func BinaryFiles(bin, path string) ([]File, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, err
	}
	files := []File{{Path: path, Source: bin}}
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		// "not a dynamic executable": nothing else to add.
		return files, nil
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		lib := libraryPath(sc.Text())
		if lib == "" {
			continue
		}
		real, err := filepath.EvalSymlinks(lib)
		if err != nil {
			return nil, fmt.Errorf("%s links %s: %w", bin, lib, err)
		}
		files = append(files, File{Path: lib, Source: real})
	}
	return files, nil
}

// libraryPath is the file of one line of ldd's output:
// "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or
// "/lib64/ld-linux-x86-64.so.2 (0x...)"; "" for the vDSO.
func libraryPath(line string) string {
	line = strings.TrimSpace(line)
	if _, after, ok := strings.Cut(line, "=>"); ok {
		line = strings.TrimSpace(after)
	}
	p, _, _ := strings.Cut(line, " ")
	if !strings.HasPrefix(p, "/") {
		return ""
	}
	return p
}

func dedupe(files []File) []File {
	seen := map[string]bool{}
	var out []File
	for _, f := range files {
		if !seen[f.Path] {
			seen[f.Path] = true
			out = append(out, f)
		}
	}
	return out
}

// Import loads docker-archives into the containerd at sock, in the k8s.io
// namespace the CRI plugin (and so the kubelet) uses, unpacked for its
// default snapshotter.
func Import(ctx context.Context, sock string, archives ...string) error {
	return ImportVia(ctx, nil, sock, archives...)
}

// ImportVia is Import with ctr run under a command prefix, e.g. nsenter
// into the mount namespace where sock is.
func ImportVia(ctx context.Context, prefix []string, sock string, archives ...string) error {
	for _, a := range archives {
		args := append(append(slices.Clone(prefix), "ctr", "-a", sock, "-n", "k8s.io", "images", "import"), a)
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("import %s into %s: %w: %s", filepath.Base(a), sock, err, b)
		}
	}
	return nil
}

// Build returns the archives of imgs (Archive each).
func Build(imgs ...Image) ([]string, error) {
	var out []string
	for _, img := range imgs {
		a, err := Archive(img)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}
