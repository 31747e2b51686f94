// Package chatops is `kedge webhook`: Slack slash commands, Slack
// interactive approvals and a generic signed webhook that start, inspect
// and decide Kedge runbooks on Temporal.
//
// Every request is authenticated before anything else is read from it
// (Slack's signing secret, or an HMAC-SHA256 key for /hooks/run), its
// timestamp must be within five minutes, and its body is capped. The sender
// is then checked against the authorization config (kind: ChatOps), which
// names the clusters chat may reach and who may start or approve which
// runbooks; every decision is logged as an audit line.
//
// The server holds no state. Exactly-once comes from Temporal: a runbook
// started from chat gets the workflow ID RUNBOOK/CLUSTER, so a second run of
// the same runbook on the same cluster cannot start while one runs, and the
// request that started it is kept in the run's memo, so a retried request
// (same Slack trigger_id or X-Kedge-Request-Id) answers with the run it
// already started. Approvals go through the same workflow updates as
// `kedge approve`, with an update ID derived from the click, so a replayed
// click is applied once.
//
// Progress, approval buttons and the final result are posted later by the
// chat-follow workflow's chat.follow activity on a worker (follow.go), never
// by the webhook process. This package must never log a secret: not the
// signing secret, not an HMAC key, not a bot token, not a signature.
package chatops
