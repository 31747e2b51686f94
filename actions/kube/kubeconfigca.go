package kube

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// UpdateKubeconfigAction changes the CA data or the credential of the
// kubeconfig the worker reaches the cluster with.
const UpdateKubeconfigAction = "kube.update-kubeconfig"

// UpdateKubeconfigInput says what to change in the kubeconfig the
// inventory's kubernetes.kubeconfig names (on the worker).
type UpdateKubeconfigInput struct {
	Cluster     target.Kube `json:"cluster"`
	CA          string      `json:"ca,omitempty" doc:"the CA(s) to trust the API servers with (PEM): every cluster's certificate-authority-data"`
	Certificate string      `json:"certificate,omitempty" doc:"a new client certificate (PEM) for the current context's user, with privateKey"`
	PrivateKey  string      `json:"privateKey,omitempty" doc:"the new client certificate's key (PEM)"`
	// Restore puts back a previous result's file (the undo): refused
	// unless it differs from the file now in CA data and client
	// credentials only.
	Restore string `json:"restore,omitempty" doc:"a previous result's kubeconfig to put back (the undo): refused unless it differs from the file now only in CA data and client credentials"`
}

// UpdateKubeconfigResult says what changed. Previous is the file as it
// was (restore puts it back; it holds a credential, sealed
// by the payload codec); CommonName and Organization are the subject of
// the current context's client certificate before the change, for a
// reissue of the same identity.
type UpdateKubeconfigResult struct {
	Changed      bool     `json:"changed"`
	Previous     string   `json:"previous"`
	CommonName   string   `json:"commonName"`
	Organization []string `json:"organization"`
}

func init() {
	spec.Register(spec.Row{Name: UpdateKubeconfigAction, Doc: "change the kubeconfig the worker reaches the cluster with (the inventory's kubernetes.kubeconfig): its clusters' CA data, or its user's embedded client certificate; saved as kube.save-kubeconfig saves; the file as it was is returned for the undo (kube.save-kubeconfig)",
		In: UpdateKubeconfigInput{}, Out: UpdateKubeconfigResult{}, Timeout: 30 * time.Second,
		Summary: `update the admin kubeconfig`})
}
