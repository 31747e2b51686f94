// Package temporalauth is the authorization of Kedge's Temporal server
// (cmd/kedge-temporal, the team install's): a claim mapper that reads the
// role a verified client certificate carries (internal/mtls: operator,
// viewer, worker with the task queues it may poll, admin, and system for
// the server's own), and an authorizer that allows each role the calls
// of one table (table.go) and nothing else.
//
//   - viewer: reads (list, count, describe, history, query, schedules,
//     task queues, search attributes): what the Web UI displays.
//   - operator: a viewer's reads, and starts, signals, updates (approvals),
//     cancels, resets and terminates runs, schedules, batch operations
//     (but deletion).
//   - worker: a viewer's reads (the SDK fetches histories, chat.follow
//     describes and queries the run it follows), polls on the task queues
//     its certificate names (a sticky queue by the queue it stands for)
//     and the answers to the tasks it got.
//   - admin, system: everything (namespaces, search attributes, the admin
//     service; Temporal's own services and system worker).
//
// Health checks and GetSystemInfo are open to every certificate, as in
// Temporal's default authorizer, so a client learns of a missing role
// from the call it is refused.
//
// It must never allow a call the table does not name to anyone but admin
// and system (a call a new Temporal release adds is refused until it is
// classified here), never take a role from anything but a certificate the
// frontend verified against the team's CA, and never log a payload.
//
// What the table cannot see: a worker answering a task it got decides that
// workflow's next commands (activities, child workflows, signals), as any
// Temporal worker does; and Temporal's task tokens are not signed, so a
// worker's certificate can answer a task token it made up. The codec key
// (internal/codec) is what makes such answers mean anything to Kedge.
package temporalauth
