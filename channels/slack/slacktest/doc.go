// Package slacktest is a fake Slack for tests, in the spirit of
// net/http/httptest: Web API methods (auth.test, apps.connections.open,
// chat.postMessage, chat.postEphemeral, reactions.add/remove,
// conversations.replies, users.info) and a slash command's response_url
// on 127.0.0.1, and a Socket Mode WebSocket that sends hello, envelopes
// and pings, accepts the Origin header slack-go sends, records
// acknowledgements and delivers an unacknowledged envelope again as Slack
// does. It also builds and signs Events API requests for events mode.
// Driven through github.com/slack-go/slack, it speaks the real wire
// format; nothing reaches the internet.
package slacktest
