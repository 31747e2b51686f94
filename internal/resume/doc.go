// Package resume carries a long activity's progress to its next attempt
// when the worker running it is lost.
//
// The runbook workflow retries actions itself (each attempt is an
// activity with one attempt of its own), so Temporal never hands an
// attempt the heartbeat details of the one before, as it does for its
// own retries. Instead:
//
//   - After, in the workflow, takes the last heartbeat details of an
//     attempt that ended in a heartbeat timeout and puts them on the
//     context of the next attempt, still sealed as the activity's worker
//     sealed them (the payload codec): the workflow never opens them.
//   - Interceptor, on every Kedge worker, writes them into the header of
//     that next attempt's activity task (the workflow side) and, on the
//     worker that runs it, makes them readable to the activity (the
//     activity side). The action's input is unchanged, so the plan and
//     what runs stay equal.
//   - Load, in an activity, returns where an earlier attempt got to: its
//     own heartbeat details when Temporal retried it, else the carried
//     ones, opened with the worker's data converter in the activity's own
//     serialization context (a payload sealed for another run or another
//     action does not open).
//
// Heartbeat details reach Temporal (sealed when the codec is on): an
// activity heartbeats progress, never a secret. This package does no I/O
// and must not import any activity package.
package resume
