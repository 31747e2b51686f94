// Package upstream holds files of Typhoon v1.35.4 and of the
// terraform-render-bootstrap commit it pins, copied unchanged from the
// upstream repositories (see SOURCE.md for the URLs, commits, licenses and
// how to refresh them), and serves them to the test world as an fs.FS.
//
// The files are test fixtures kept byte for byte: a test checks each one
// against SHA256SUMS. They are rendered by the sibling packages tftemplate
// (Terraform's templatefile) and butane (what Ignition writes on a host).
//
// It is test infrastructure only.
package upstream
