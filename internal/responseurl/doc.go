// Package responseurl says where Kedge may post to a chat response_url
// and posts there safely: the prefixes a URL must fall under (Slack's own
// by default, or the config's responseURLs), the parsing of a prefix, a
// client that does not follow redirects, and the host to name in logs.
//
// The webhook server (chatops) checks a command's response_url with it
// before starting a run, and the chat.follow activity (activities/chat)
// checks it again before posting, since whoever can start a workflow
// chooses the URL. It is pure policy: it never posts, reads a file or
// imports another Kedge package.
package responseurl
