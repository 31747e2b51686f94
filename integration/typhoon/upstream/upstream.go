package upstream

import (
	"embed"
	"fmt"
	"io/fs"
	"strings"
)

//go:embed typhoon terraform-render-bootstrap SHA256SUMS
var files embed.FS

// Roots of the two upstream trees inside FS.
const (
	// Typhoon is the root of poseidon/typhoon at v1.35.4.
	Typhoon = "typhoon"
	// Bootstrap is the root of poseidon/terraform-render-bootstrap at the
	// commit Typhoon v1.35.4 pins.
	Bootstrap = "terraform-render-bootstrap"
)

// Paths of the templates, relative to FS.
const (
	FlatcarController = Typhoon + "/bare-metal/flatcar-linux/kubernetes/butane/controller.yaml"
	FlatcarWorker     = Typhoon + "/bare-metal/flatcar-linux/kubernetes/worker/butane/worker.yaml"
	FCOSController    = Typhoon + "/bare-metal/fedora-coreos/kubernetes/butane/controller.yaml"
	FCOSWorker        = Typhoon + "/bare-metal/fedora-coreos/kubernetes/worker/butane/worker.yaml"

	KubeconfigAdmin     = Bootstrap + "/resources/kubeconfig-admin"
	KubeconfigBootstrap = Bootstrap + "/resources/kubeconfig-bootstrap"
	StaticManifests     = Bootstrap + "/resources/static-manifests"
	Manifests           = Bootstrap + "/resources/manifests"
	CoreDNS             = Bootstrap + "/resources/coredns"
	Cilium              = Bootstrap + "/resources/cilium"
)

// FS returns the vendored files under their upstream relative paths,
// prefixed by Typhoon or Bootstrap, and SHA256SUMS.
func FS() fs.FS { return files }

// ReadFile returns one vendored file, name relative to FS.
func ReadFile(name string) ([]byte, error) { return files.ReadFile(name) }

// Heredoc is the body of `NAME = <<EOF … EOF` in the vendored file,
// with its final newline, as Terraform reads it.
func Heredoc(file, name string) (string, error) {
	data, err := files.ReadFile(file)
	if err != nil {
		return "", err
	}
	_, rest, ok := strings.Cut(string(data), name+" = <<EOF\n")
	if !ok {
		return "", fmt.Errorf("%s: no heredoc %s", file, name)
	}
	body, _, ok := strings.Cut(rest, "\nEOF\n")
	if !ok {
		return "", fmt.Errorf("%s: heredoc %s is not closed", file, name)
	}
	return body + "\n", nil
}
