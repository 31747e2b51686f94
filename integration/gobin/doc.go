// Package gobin builds the test world's Go programs (the kedge CLI, the
// kubelet simulator) where the next build finds them: one directory per
// source tree under the user's cache, so `go build -o` sees its last
// output up to date and does not link it again (a link of the CLI is
// ~15 CPU seconds, and every test package that runs the CLI built it
// afresh into a temporary directory).
package gobin
