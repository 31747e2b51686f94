// Package mtls makes the certificates a team's Temporal runs with mutual
// TLS: a CA kept beside them, a server certificate for the frontend (and
// its internode traffic), and one client certificate per program that
// dials it (the worker, the webhook, `kedge setup`, the Web UI, the admin
// tools, operators, viewers). Files are written once: existing ones are
// kept, so running it again adds only what is missing.
//
// Each certificate carries a role (role.go), which Kedge's Temporal server
// authorizes every call by (internal/temporalauth): operator, viewer,
// worker (with the task queues it may poll), admin, and system for the
// server's own. The encoding of a role in a certificate lives here only:
// IdentityOf is what the server reads. This package must never issue a
// certificate without a role, nor keep one whose role is not the one
// asked for.
package mtls
