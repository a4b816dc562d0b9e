package core

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// EditDistance is the Levenshtein distance between a and b, counted in
// runes. Config suggestions and model-name suggestions both use it.
func EditDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// CleanText is s as every store can hold it: NUL bytes dropped (a
// PostgreSQL TEXT cannot hold one, and no chat platform shows one) and
// bytes that are not UTF-8 replaced with U+FFFD. A clean s is returned
// as it is, without a copy.
func CleanText(s string) string {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
}

// AnswerLine ends the context a channel quotes (Inbound.Context), after
// a blank line: what follows it in a prompt (Inbound.Prompt) is the
// user's own words.
const AnswerLine = "The message to answer:\n"

// LeftOutReply is the whole context of a message that replies to one
// from someone who may not talk to the bot: nothing of theirs is quoted.
const LeftOutReply = "(This message replies to one from someone who may not talk to me; it is left out.)\n\n" + AnswerLine

// OwnWords is the user's own words of a message as the LLM was given it
// (Inbound.Prompt, stored so in the history): what follows AnswerLine,
// or all of it when no context was quoted.
func OwnWords(prompt string) string {
	if _, own, ok := strings.Cut(prompt, "\n"+AnswerLine); ok {
		return own
	}
	return prompt
}

// QuoteLines quotes s for an LLM prompt: every line starts with "> ".
// Any line break starts a line (\r\n, \n, \r, \v, \f, U+0085, U+2028,
// U+2029), so no text of s can stand on a line of its own and pass for
// the frame around the quote.
func QuoteLines(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.Map(func(r rune) rune {
		switch r {
		case '\r', '\v', '\f', '\u0085', '\u2028', '\u2029':
			return '\n'
		}
		return r
	}, s)
	return "> " + strings.ReplaceAll(s, "\n", "\n> ")
}

// MaxSpeakerRunes bounds a speaker's name as the LLM is shown it.
const MaxSpeakerRunes = 40

// SpeakerName is a user's display name as the LLM may be shown it in a
// group conversation (ChatMessage.Name, the system prompt's line on who
// speaks): the name is the user's own text, so every control, format and
// line-breaking character becomes a space, runs of space become one, and
// the rest is trimmed and cut at MaxSpeakerRunes. A name cannot start a
// line of its own (a forged turn) or run on for a paragraph.
func SpeakerName(name string) string {
	var b strings.Builder
	space := false
	n := 0
	for _, r := range CleanText(name) {
		if unicode.IsControl(r) || unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) || unicode.In(r, unicode.Zl, unicode.Zp) {
			space = b.Len() > 0
			continue
		}
		if n == MaxSpeakerRunes {
			break
		}
		if space {
			if n+1 == MaxSpeakerRunes {
				break
			}
			b.WriteByte(' ')
			n++
			space = false
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}
