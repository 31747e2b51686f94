package slackmsg

import (
	"strings"
	"unicode/utf8"
)

// Esc escapes text for Slack's mrkdwn.
func Esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// Link is <url|label> in mrkdwn.
func Link(url, label string) string {
	return "<" + strings.NewReplacer("|", "%7C", ">", "%3E").Replace(url) + "|" + Esc(label) + ">"
}

// Clip shortens what a sender typed before it is echoed back.
func Clip(s string) string {
	if len(s) <= 60 {
		return s
	}
	for i := 60; i > 0; i-- {
		if utf8.RuneStart(s[i]) {
			return s[:i] + "…"
		}
	}
	return "…"
}

// ClipText is s if it is at most n bytes long; a longer s is cut as Clip
// cuts it (to 60 bytes, whatever n is) and marked "……".
func ClipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Clip(s[:n]) + "…"
}
