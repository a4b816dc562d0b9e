package textfmt

import (
	"fmt"
	"strings"
)

// telegramTags are the tags Telegram's HTML parse mode accepts (the ones
// this package writes, plus the rest of the documented set).
var telegramTags = map[string]bool{
	"b": true, "strong": true, "i": true, "em": true, "u": true, "ins": true,
	"s": true, "strike": true, "del": true, "code": true, "pre": true,
	"a": true, "blockquote": true, "tg-spoiler": true, "span": true, "tg-emoji": true,
}

// ValidateTelegramHTML checks s the way Telegram's parser would: only
// known tags, properly nested and closed; '<' and '&' only as tag or
// entity starts; only the named entities Telegram knows. It returns the
// first problem with its byte offset.
func ValidateTelegramHTML(s string) error {
	var stack []string
	for i := 0; i < len(s); {
		switch s[i] {
		case '<':
			end := strings.IndexByte(s[i:], '>')
			if end < 0 {
				return fmt.Errorf("offset %d: unterminated tag", i)
			}
			tag := s[i : i+end+1]
			if strings.HasPrefix(tag, "</") {
				name := tag[2 : len(tag)-1]
				n := len(stack)
				if n == 0 || stack[n-1] != name {
					return fmt.Errorf("offset %d: closing %s does not match the open tags %v", i, tag, stack)
				}
				stack = stack[:n-1]
			} else {
				name := tagName(tag)
				if !telegramTags[name] {
					return fmt.Errorf("offset %d: tag %q is not supported by Telegram", i, name)
				}
				if strings.Count(tag, `"`)%2 != 0 {
					return fmt.Errorf("offset %d: unbalanced quotes in %s", i, tag)
				}
				stack = append(stack, name)
			}
			i += end + 1
		case '>':
			return fmt.Errorf("offset %d: bare '>'", i)
		case '&':
			end := strings.IndexByte(s[i:], ';')
			if end < 0 {
				return fmt.Errorf("offset %d: bare '&'", i)
			}
			ent := s[i : i+end+1]
			switch {
			case ent == "&lt;", ent == "&gt;", ent == "&amp;", ent == "&quot;":
			case strings.HasPrefix(ent, "&#") && len(ent) > 3:
			default:
				return fmt.Errorf("offset %d: unknown entity %q", i, ent)
			}
			i += end + 1
		default:
			i++
		}
	}
	if len(stack) > 0 {
		return fmt.Errorf("unclosed tags at the end: %v", stack)
	}
	return nil
}
