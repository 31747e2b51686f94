package chatops

import (
	"sync"
	"time"
)

// replays remembers each signed webhook request, by its signature, for as
// long as its timestamp is fresh (after that verifyHook refuses it as
// stale): the same signed bytes sent again never start a second run,
// during the first or after it. One webhook server's memory: replicas
// behind a load balancer each keep their own, and the request ID (signed)
// makes retries land on the run they started wherever they arrive.
type replays struct {
	mu   sync.Mutex
	seen map[string]*replay
}

type replay struct {
	expires time.Time
	resp    *HookResponse // nil while the first is being handled
}

// claim records sig as being handled and reports true, or, for a
// signature already seen, reports false with the first request's answer
// (nil while it is being handled).
func (r *replays) claim(sig string, expires, now time.Time) (*HookResponse, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]*replay{}
	}
	for k, e := range r.seen {
		if now.After(e.expires) {
			delete(r.seen, k)
		}
	}
	if e, ok := r.seen[sig]; ok {
		return e.resp, false
	}
	r.seen[sig] = &replay{expires: expires}
	return nil, true
}

// finish records the answer a claimed request got.
func (r *replays) finish(sig string, resp HookResponse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.seen[sig]; ok {
		e.resp = &resp
	}
}

// release forgets a claimed request that started nothing.
func (r *replays) release(sig string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.seen[sig]; ok && e.resp == nil {
		delete(r.seen, sig)
	}
}
