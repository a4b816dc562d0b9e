// Package textfmt owns the text helpers every chat channel shares: turning
// the Markdown an LLM writes into a platform's markup (Telegram HTML) or
// into plain text, and cutting long text into parts under a platform's
// size limit without breaking markup (a cut inside a code block closes it
// and reopens it, same language, in the next part).
//
// A Markdown table, which no platform renders, is laid out as an aligned
// monospace block (table.go).
//
// mrkdwn.go holds Slack's side: Markdown to mrkdwn, its splitter, and
// Slack message text (mentions, links, entities) back to plain text.
//
// Whatever the text holds, the work is bounded: inline Markdown renders
// in linear time (inline.go), tables pad by at most half the answer's
// size plus 4 KB, and an answer is cut at MaxAnswerBytes
// (128 KB, with a note) before it is formatted, so formatting and
// splitting one allocate a bounded amount (1 MB in: at most 64 MB).
//
// It imports nothing internal; any package under channels/ may use it.
package textfmt
