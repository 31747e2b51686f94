// Package mtls makes the certificates a team's Temporal runs with mutual
// TLS: a CA kept beside them, a server certificate for the frontend (and
// its internode traffic), and one client certificate per program that
// dials it (the worker, the webhook, `kedge setup`, the Web UI, the admin
// tools, operators). Files are written once: existing ones are kept, so
// running it again adds only what is missing.
package mtls
