// Package chat posts a chat-started run's progress to Slack: the
// chat.follow activity (the chat-follow workflow in workflows/ runs it)
// and the messages it and the webhook server (chatops) send. It is the
// part of ChatOps a worker links; the webhook server is not.
package chat
