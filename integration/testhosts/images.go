package testhosts

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ImageStore is where a host's container runtime stand-in keeps its local
// images, one "REFERENCE DIGEST PROGRAM [ARGS...]" a line (the format is
// in standins/docker/doc.go). There is no registry: `docker pull` and
// `docker run` of an image not listed here fail.
const ImageStore = "/var/lib/kedge-lab/image-store"

// CRIImageStore is the ctr stand-in's store: the images of containerd's
// k8s.io namespace, the kubelet's (the format is ImageStore's; PROGRAM is
// not used). They are not docker's, as on a real host. Every other
// containerd namespace is empty, and there is no registry: `ctr images
// pull` of an image not listed here fails.
const CRIImageStore = "/var/lib/kedge-lab/cri-image-store"

// PullLog is where the container stand-in (docker, podman) and the ctr
// stand-in note each pull, a line "TIME PROGRAM REFERENCE" (UTC, RFC 3339
// with nanoseconds).
const PullLog = "/var/lib/kedge-lab/pulls"

// Image is one image in a host's local store: its NAME:TAG, and the
// program (with leading arguments) that stands for its entrypoint.
type Image struct {
	Ref        string
	Entrypoint []string
}

// Digest is the image's digest, made from its reference: the image also
// answers to NAME@DIGEST.
func (i Image) Digest() string {
	s := sha256.Sum256([]byte(i.Ref))
	return "sha256:" + hex.EncodeToString(s[:])
}

// NameAtDigest is the image's reference by digest, NAME@sha256:HEX.
func (i Image) NameAtDigest() string {
	name := i.Ref
	if j := strings.LastIndex(name, ":"); j > strings.LastIndex(name, "/") {
		name = name[:j]
	}
	return name + "@" + i.Digest()
}

func (i Image) line() string {
	return fmt.Sprintf("%s %s %s\n", i.Ref, i.Digest(), strings.Join(i.Entrypoint, " "))
}

// KubeletSim is the kubelet simulator's path on every host.
const KubeletSim = StandInDir + "/kubelet-sim"

// LabImages are the images every host has from the start: the kubelet
// images the tests and `make dev` run (quay.io/poseidon/kubelet v1.35.0 to
// v1.35.49, v1.36.0 to v1.36.9 and v1.31.14, whose tag is the version the
// simulator reports, and for v1.35.0-9 and v1.36.0-9 also the -amd64 and
// build-SHA tags Typhoon uses, which hold the version in the image: see
// KubeletBuildTag) and the control plane's images at the versions Kedge renders
// by default, each mapped to the program a test installs with
// InstallProgram. Images a test means to be missing (quay.io/other/...)
// are not here.
func LabImages() []Image {
	var out []Image
	for _, v := range []struct{ minor, patches int }{{35, 50}, {36, 10}} {
		for p := range v.patches {
			out = append(out, Image{Ref: fmt.Sprintf("quay.io/poseidon/kubelet:v1.%d.%d", v.minor, p), Entrypoint: []string{KubeletSim}})
			// Typhoon's arch-suffixed tags and build-SHA tags: the
			// version is in the image (its kubelet's --version), not
			// in the tag.
			if p < 10 {
				version := fmt.Sprintf("v1.%d.%d", v.minor, p)
				entry := []string{"/usr/bin/env", "KEDGE_LAB_KUBELET_VERSION=" + version, KubeletSim}
				out = append(out,
					Image{Ref: "quay.io/poseidon/kubelet:" + version + "-amd64", Entrypoint: entry},
					Image{Ref: "quay.io/poseidon/kubelet:" + KubeletBuildTag(version), Entrypoint: entry})
			}
		}
	}
	// Four minors behind v1.35: a kubelet the skew policy refuses.
	out = append(out, Image{Ref: "quay.io/poseidon/kubelet:v1.31.14", Entrypoint: []string{KubeletSim}})
	return append(out, controlPlaneImages()...)
}

// controlPlaneImages are the control plane's images at the versions Kedge
// renders by default, each mapped to the program a test installs with
// InstallProgram (StandInDir/NAME).
func controlPlaneImages() []Image {
	var out []Image
	for _, ref := range []string{
		"registry.k8s.io/kube-apiserver:v1.35.4",
		"registry.k8s.io/kube-controller-manager:v1.35.4",
		"registry.k8s.io/kube-scheduler:v1.35.4",
		"registry.k8s.io/kube-proxy:v1.35.4",
		"registry.k8s.io/etcd:3.6.16-0",
	} {
		out = append(out, controlPlaneImage(ref))
	}
	return out
}

// controlPlaneImage is ref with the entrypoint StandInDir/NAME, NAME being
// the last component of its repository.
func controlPlaneImage(ref string) Image {
	name := ref
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	return Image{Ref: ref, Entrypoint: []string{StandInDir + "/" + name[strings.LastIndex(name, "/")+1:]}}
}

// CRIImages are the images every simulated host's containerd (namespace
// k8s.io, CRIImageStore) has from the start: the control plane's at the
// versions Kedge renders by default, as the kubelet of a running cluster's
// node has pulled them.
func CRIImages() []Image { return controlPlaneImages() }

// seedImages writes the host's image store with LabImages, before the host
// starts (dir is the host's directory; /var/lib is an overlay whose upper
// layer is dir/varlib-upper).
func seedImages(dir string) error {
	var b strings.Builder
	b.WriteString("# The container stand-in's local images: REFERENCE DIGEST PROGRAM [ARGS...]\n")
	for _, im := range LabImages() {
		b.WriteString(im.line())
	}
	p := filepath.Join(dir, "varlib-upper", strings.TrimPrefix(ImageStore, "/var/lib/"))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(b.String()), 0o644)
}

// seedCRIImages writes the host's CRI image store with CRIImages and makes
// containerd's directory, /var/lib/containerd (whose free space Kedge
// checks), before the host starts. Not for a host with a real containerd.
func seedCRIImages(dir string) error {
	var b strings.Builder
	b.WriteString("# containerd's k8s.io namespace (the ctr stand-in): REFERENCE DIGEST PROGRAM [ARGS...]\n")
	for _, im := range CRIImages() {
		b.WriteString(im.line())
	}
	p := filepath.Join(dir, "varlib-upper", strings.TrimPrefix(CRIImageStore, "/var/lib/"))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		return err
	}
	root := filepath.Join(dir, "varlib-upper", "containerd")
	if err := os.MkdirAll(root, 0o711); err != nil {
		return err
	}
	return os.Chmod(root, 0o711)
}

// AddCRIImage adds an image (NAME:TAG) to the running host's containerd,
// namespace k8s.io, as a pull by the kubelet would. An image already
// there stays as it is.
func (h *Host) AddCRIImage(ref string) error {
	if ref == "" || strings.ContainsAny(ref, " \t\n") {
		return fmt.Errorf("testhosts: %q is not an image reference", ref)
	}
	refs, data, err := h.criImages()
	if err != nil {
		return err
	}
	if slices.Contains(refs, ref) {
		return nil
	}
	return h.WriteFile(CRIImageStore, append(data, controlPlaneImage(ref).line()...), 0o644)
}

// RemoveCRIImage removes an image (NAME:TAG) from the running host's
// containerd, namespace k8s.io, as `crictl rmi` would; it is an error if
// the image is not there.
func (h *Host) RemoveCRIImage(ref string) error {
	refs, data, err := h.criImages()
	if err != nil {
		return err
	}
	if !slices.Contains(refs, ref) {
		return fmt.Errorf("host %s: containerd has no image %s", h.Name, ref)
	}
	var kept []string
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 0 || f[0] != ref {
			kept = append(kept, line)
		}
	}
	return h.WriteFile(CRIImageStore, []byte(strings.Join(kept, "")), 0o644)
}

// criImages is the references in the host's CRI store, and the store.
func (h *Host) criImages() ([]string, []byte, error) {
	if h.realCtr {
		return nil, nil, fmt.Errorf("host %s runs a real containerd: its images are the real ctr's", h.Name)
	}
	data, err := h.ReadFile(CRIImageStore)
	if err != nil && !os.IsNotExist(err) {
		return nil, nil, err
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		data = append(data, '\n')
	}
	var refs []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(f[0], "#") {
			refs = append(refs, f[0])
		}
	}
	return refs, data, nil
}

// AddImage adds an image to the running host's local store, as a pull
// from a registry would.
func (h *Host) AddImage(im Image) error {
	data, err := h.ReadFile(ImageStore)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	return h.WriteFile(ImageStore, append(data, im.line()...), 0o644)
}

// KubeletBuildTag is the lab's build-SHA tag of the kubelet image that
// holds version (v1.35.0-9, v1.36.0-9).
func KubeletBuildTag(version string) string {
	sha := sha256.Sum256([]byte(version))
	return "build-" + hex.EncodeToString(sha[:])[:40]
}
