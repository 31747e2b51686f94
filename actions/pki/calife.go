package pki

import (
	"time"

	"kedge.dev/kedge/actions/spec"
)

// CheckCALifeAction is the action name of CheckCALife.
const CheckCALifeAction = "pki.check-ca-life"

// NamedCA is a CA and what to call it in a message.
type NamedCA struct {
	Name        string `json:"name"`
	Certificate string `json:"certificate"`
}

// CheckCALifeInput names the CAs a renewal signs with and its window.
type CheckCALifeInput struct {
	CAs       []NamedCA `json:"cas" kedge:"required" doc:"[{name, certificate}]: the CAs the renewal signs with (PEM), named for the message, e.g. the cluster CA"`
	Threshold string    `json:"threshold,omitempty" kedge:"duration" doc:"the renewal window: what ends within it is renewed (default 720h)"`
}

// CALife is when one CA ends.
type CALife struct {
	Name     string `json:"name"`
	Subject  string `json:"subject"`
	NotAfter string `json:"notAfter"`
}

// CheckCALifeResult lists the CAs and when they end.
type CheckCALifeResult struct {
	CAs []CALife `json:"cas"`
}

func init() {
	spec.Register(spec.Row{Name: CheckCALifeAction, Doc: "refuse a renewal whose CA ends within its window (threshold): what is renewed from that CA cannot outlive it; fails before anything changes, naming the CA, when it ends and the CA rotation runbook (ca-rotation) to run first",
		In: CheckCALifeInput{}, Out: CheckCALifeResult{}, Timeout: 30 * time.Second,
		Summary: `check {{.Count "cas" "CA"}} end after the renewal window`})
}
