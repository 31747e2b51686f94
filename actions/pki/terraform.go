package pki

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// ExportTerraformAction is the action name of ExportTerraform.
const ExportTerraformAction = "pki.export-terraform"

// ExportTerraformInput names a Typhoon controller whose trust has been
// rotated and where in the cluster's Vault to keep what Typhoon's
// Terraform hands out.
type ExportTerraformInput struct {
	Target target.SSH   `json:"target"`
	Vault  target.Vault `json:"vault"`
	Kind   string       `json:"kind" kedge:"required" doc:"the controller's layout (host.layout's kind): typhoon-flatcar or typhoon-fcos"`
	CA     string       `json:"ca" kedge:"required" doc:"the cluster CA the exported files must hold alone (PEM)"`
	Path   string       `json:"path" kedge:"required" doc:"the KV path to write, e.g. kedge/clusters/NAME/terraform"`
}

// ExportTerraformResult says where the export is and what it holds; no
// content (every field is a credential).
type ExportTerraformResult struct {
	Path    string `json:"path"`
	Version int    `json:"version"`
	// Fields are the KV fields written: kubeconfig-kubelet,
	// kubeconfig-admin and assets.
	Fields []string `json:"fields"`
	// Assets are the bundle's entries, as assets_dist names them.
	Assets []string `json:"assets"`
	// TokenID is the bootstrap token's public id the kubelet kubeconfig
	// carries.
	TokenID string `json:"tokenID"`
}

func init() {
	spec.Register(spec.Row{Name: ExportTerraformAction, Doc: "keep in the cluster's Vault (KV, a new version) what Typhoon's Terraform hands out, read from a Typhoon controller after a CA rotation: the kubelets' bootstrap kubeconfig (kubeconfig-kubelet), the admin kubeconfig (kubeconfig-admin) and the assets bundle a controller it (re)creates is copied (assets_dist in ssh.tf's one-file form); refused, not retried, unless every file holds the cluster CA given alone, each certificate is issued by its CA and matches its key, and the bootstrap kubeconfig carries a token; no content in the result",
		In: ExportTerraformInput{}, Out: ExportTerraformResult{}, Timeout: 2 * time.Minute,
		Summary: `export what Typhoon's Terraform hands out, as rotated, from{{.On}} to {{.In "path"}}`})
}
