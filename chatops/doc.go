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
// The server holds no state that matters. Exactly-once comes from
// Temporal: a runbook started from chat or a webhook gets a workflow ID
// derived from its request (RUNBOOK/CLUSTER/id-HASH of its Slack trigger_id
// or X-Kedge-Request-Id, else RUNBOOK/CLUSTER/SIGNEDTIME-HASH of its
// signature; HASH keyed with the secret that verified it), started with a
// reuse policy that never starts an ID twice, so the same request answers
// with the run it started: replayed, retried, after a restart or after
// other runs. One run of a runbook per cluster at a time is checked beside
// every open run under RUNBOOK/CLUSTER/ (`kedge run`'s too). Approvals go
// through the same workflow updates as `kedge approve`, with an update ID
// derived from the click, so a replayed click is applied once.
//
// Progress, approval buttons and the final result are posted later by the
// chat-follow workflow (workflows/chatfollow.go) and its chat.follow
// activity (activities/chat) on a worker, never by the webhook process; a
// worker does not link this package, and this package links no activity:
// the messages both send are slackmsg's, the response_url policy both
// check is internal/responseurl's. This package must never log a
// secret: not the signing secret, not an HMAC key, not a bot token, not a
// signature.
package chatops
