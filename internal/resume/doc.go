// Package resume tells a long activity where an earlier attempt of it
// got to: Load reads the attempt's heartbeat details (a drain's evicted
// pods, a wait's start, an upload's bytes), and StartedAt and Began
// read when that work began.
//
// On runs where Temporal retries actions (internal/attempt), the details
// are Temporal's own: the last an attempt recorded reach the next one
// (activity.GetHeartbeatDetails), and the worker's interceptor drops
// them after a failure, so only a lost attempt is resumed.
//
// Runs started before that retry each attempt in the workflow, as an
// activity of its own: for them, After (in the workflow) takes the last
// heartbeat details of an attempt that ended in a heartbeat timeout, and
// Interceptor writes them, still sealed as the worker sealed them (the
// payload codec), into the header of the next attempt's activity task
// and makes them readable to Load on the worker that runs it, opened in
// the activity's own serialization context (a payload sealed for another
// run or action does not open). internal/attempt's interceptor embeds
// it.
//
// Heartbeat details reach Temporal (sealed when the codec is on): an
// activity heartbeats progress, never a secret. This package does no I/O
// and must not import any activity package.
package resume
