// Package typhoon builds the files of a Typhoon-built cluster for Kedge's
// test world from Typhoon's own templates (package upstream: poseidon/
// typhoon v1.35.4's Butane configs for Flatcar Linux and Fedora CoreOS,
// and the terraform-render-bootstrap commit it pins), rendered with
// Terraform's templatefile semantics (package tftemplate) and laid out as
// Ignition would (package butane). PKI makes what terraform-render-
// bootstrap's tls-*.tf and auth.tf make (three CAs, every certificate
// valid 8760 hours) and renders its kubeconfigs and manifests; the
// world's tests run Typhoon's own layout script on the result. Where the
// world must differ from a real machine (one network namespace for every
// host, no SELinux), the difference is the one patch in patch.go.
//
// It is test infrastructure only.
package typhoon
