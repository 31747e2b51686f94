// Package sshpool keeps one verified SSH connection per host per worker
// process and classifies what goes wrong when reaching a host.
//
// Host keys are always verified against the known_hosts file the inventory
// names; an unknown host or a changed key is refused, never trusted on first
// use. Connections are dialled once, shared by concurrent activities (SSH
// multiplexes sessions over one connection), kept alive, and evicted when
// they die. This package must never skip host-key verification and never
// log what travels over a session.
package sshpool
