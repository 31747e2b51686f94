// Package chat is the chat.follow activity: it watches a chat-started run
// (the chat-follow workflow in workflows/ runs it) and posts its pauses,
// progress and result to Slack, to the command's response_url and, once
// that is used up or expired, to the channel with a bot token. It is the
// part of ChatOps a worker links; the webhook server (chatops) is not.
//
// The messages are slackmsg's and the response_url policy is
// internal/responseurl's, shared with the webhook server; this package
// only follows and posts.
package chat
