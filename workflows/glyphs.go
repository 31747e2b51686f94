package workflows

// look is how a state shows at a glance: a mark for text (the Web UI's
// details) and an emoji for Slack. One table, so both say the same.
type look struct{ mark, emoji string }

var looks = map[string]look{
	StateSucceeded:  {"✓", ":white_check_mark:"},
	StateFailed:     {"✗", ":x:"},
	StateUndoFailed: {"✗", ":x:"},
	StateRunning:    {"▶", ":arrows_counterclockwise:"},
	StateUndoing:    {"▶", ":arrows_counterclockwise:"},
	StateWaiting:    {"⏸", ":double_vertical_bar:"},
	StateSkipped:    {"–", ":white_circle:"},
	StateNotRun:     {"–", ":white_circle:"},
	StateCancelled:  {"↩", ":leftwards_arrow_with_hook:"},
	StateUndone:     {"↩", ":leftwards_arrow_with_hook:"},
}

// pendingLook is every other state's: not started yet.
var pendingLook = look{"○", ":hourglass:"}

func lookOf(state string) look {
	if l, ok := looks[state]; ok {
		return l
	}
	return pendingLook
}

// StateMark is a state's mark in text.
func StateMark(state string) string { return lookOf(state).mark }

// StateEmoji is a state's Slack emoji.
func StateEmoji(state string) string { return lookOf(state).emoji }
