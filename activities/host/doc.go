// Package host holds the actions that act on one host over SSH/SFTP:
// host.run, host.write-file, host.restore-file, host.read-file and
// host.systemd, as methods of Activities. The actions' names and input and
// result types are declared in kedge.dev/kedge/actions/host (types.go keeps
// aliases of them here).
//
// Every action is idempotent where it can be (a write that would change
// nothing is skipped), heartbeats while it works, stops the remote command
// when it is cancelled, and reports failures as Temporal application errors
// with stable types (see errors.go), classified once. Actions never log
// environment values or file content: either may hold secrets.
package host
