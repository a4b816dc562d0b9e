package toolkit

import "strings"

// JoinAround joins the text before and after a word the channel removed
// (a mention of the bot): one space between them within a line, none at
// a line's start or end, so the message keeps its lines and indentation.
func JoinAround(before, after string) string {
	before = strings.TrimRight(before, " \t")
	after = strings.TrimLeft(after, " \t")
	if before == "" || after == "" || strings.HasSuffix(before, "\n") || strings.HasPrefix(after, "\n") {
		return before + after
	}
	return before + " " + after
}
