package workflows

import "testing"

// Every state shows as itself: only pending looks pending, and no two
// states that mean different things share a mark or an emoji.
func TestEveryStateHasOneLook(t *testing.T) {
	states := []string{StatePending, StateRunning, StateWaiting, StateSucceeded, StateFailed, StateSkipped,
		StateCancelled, StateNotRun, StateUndoing, StateUndone, StateUndoFailed}
	sameMeaning := map[string]string{StateUndoFailed: StateFailed, StateUndoing: StateRunning, StateNotRun: StateSkipped, StateUndone: StateCancelled}
	meaning := func(s string) string {
		if m, ok := sameMeaning[s]; ok {
			return m
		}
		return s
	}
	byMark, byEmoji := map[string]string{}, map[string]string{}
	for _, s := range states {
		if s != StatePending && lookOf(s) == pendingLook {
			t.Errorf("state %s has no look of its own", s)
		}
		for _, by := range []struct {
			seen map[string]string
			key  string
		}{{byMark, StateMark(s)}, {byEmoji, StateEmoji(s)}} {
			if other, ok := by.seen[by.key]; ok && meaning(other) != meaning(s) {
				t.Errorf("%s and %s both show as %s", other, s, by.key)
			}
			by.seen[by.key] = s
		}
	}
}
