// Package slackmsg renders what Kedge says in Slack about a run: the
// pause that asks for a decision with its Continue, Abort and Restore
// buttons (their action IDs and the value they carry), progress, the
// result, and the mrkdwn helpers they are made of (escaping, links,
// clipping what a sender typed).
//
// The webhook server (chatops) and the chat.follow activity
// (activities/chat) both send these messages, and the worker links the
// activity but never the webhook server, so the messages live here,
// below both. It renders only: it never posts, reads a run or links an
// activity package (scripts/layers.sh checks the last).
package slackmsg
