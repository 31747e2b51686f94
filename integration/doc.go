// Package integration holds Kedge's end-to-end tests and the test world they
// run in: a real Temporal server (embedded, SQLite), real OpenSSH hosts on
// loopback (package testhosts), Kedge's real CLI and worker. Nothing in it
// is mocked; the tests need root (mount namespaces) and the packages that
// `make deps` installs.
//
// The harness is test infrastructure: it must never be pointed at real
// hosts.
package integration
