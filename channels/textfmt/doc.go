// Package textfmt owns the text helpers every chat channel shares: turning
// the Markdown an LLM writes into a platform's markup (Telegram HTML) or
// into plain text, and cutting long text into parts under a platform's
// size limit without breaking markup (a cut inside a code block closes it
// and reopens it, same language, in the next part).
//
// mrkdwn.go holds Slack's side: Markdown to mrkdwn, its splitter, and
// Slack message text (mentions, links, entities) back to plain text.
//
// It imports nothing internal; any package under channels/ may use it.
package textfmt
