package host

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// CertInfoAction reads certificate files on a host.
const CertInfoAction = "host.cert-info"

// CertInfoInput names certificate files (PEM, or kubeconfigs with an
// embedded client certificate) on one host.
type CertInfoInput struct {
	Target    target.SSH `json:"target"`
	Paths     []string   `json:"paths" kedge:"required" doc:"absolute paths of PEM certificates or kubeconfigs"`
	Threshold string     `json:"threshold,omitempty" kedge:"duration" doc:"a certificate is due when it ends within this (default 720h)"`
}

// CertFile is one file's first certificate.
type CertFile struct {
	Path     string `json:"path"`
	Exists   bool   `json:"exists"`
	Subject  string `json:"subject,omitempty"`
	Issuer   string `json:"issuer,omitempty"`
	Serial   string `json:"serial,omitempty"`
	NotAfter string `json:"notAfter,omitempty"`
	Due      bool   `json:"due"`
}

// CertInfoResult lists the files; Due says any of them is due, Earliest
// is the soonest end.
type CertInfoResult struct {
	Files    []CertFile `json:"files"`
	Due      bool       `json:"due"`
	Earliest string     `json:"earliest"`
}

func init() {
	spec.Register(spec.Row{Name: CertInfoAction, Doc: "read certificate files (PEM or kubeconfigs) on the host: when each ends, whether it is due for renewal",
		In: CertInfoInput{}, Out: CertInfoResult{}, Timeout: 5 * time.Minute,
		Summary: `read {{.Count "paths" "certificate"}}{{.On}}`})
}
