// Package sshhost holds the actions that act on one host over SSH/SFTP:
// host.run, host.write-file, host.restore-file, host.read-file,
// host.systemd and the others of kedge.dev/kedge/actions/host, as methods
// of Activities. Their names and input and result types are declared
// there (pure data), imported under its own name.
//
// Every action is idempotent where it can be (a write that would change
// nothing is skipped), heartbeats while it works, stops the remote command
// when it is cancelled, and reports failures as Temporal application errors
// with stable types (see errors.go), classified once. Actions never log
// environment values or file content: either may hold secrets.
package sshhost
