package textfmt

import (
	"html"
	"strings"
)

// HTMLToPlain turns Telegram HTML back into plain text: tags removed,
// entities decoded, links as "label (url)". It is the fallback when a
// platform rejects the markup of a part.
func HTMLToPlain(s string) string {
	var b strings.Builder
	var hrefs []string // stack of open <a> targets ("" for other tags)
	var starts []int   // where each open tag's text began
	for i := 0; i < len(s); {
		switch s[i] {
		case '<':
			end := strings.IndexByte(s[i:], '>')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			tag := s[i : i+end+1]
			i += end + 1
			if strings.HasPrefix(tag, "</") {
				if n := len(hrefs); n > 0 {
					href, start := hrefs[n-1], starts[n-1]
					hrefs, starts = hrefs[:n-1], starts[:n-1]
					if href != "" && b.String()[start:] != href {
						b.WriteString(" (" + href + ")")
					}
				}
				continue
			}
			href := ""
			if tagName(tag) == "a" {
				href = html.UnescapeString(attr(tag, "href"))
			}
			hrefs = append(hrefs, href)
			starts = append(starts, b.Len())
		case '&':
			end := strings.IndexByte(s[i:], ';')
			if end < 0 || end > 10 {
				b.WriteByte('&')
				i++
				continue
			}
			b.WriteString(html.UnescapeString(s[i : i+end+1]))
			i += end + 1
		default:
			j := strings.IndexAny(s[i:], "<&")
			if j < 0 {
				j = len(s) - i
			}
			b.WriteString(s[i : i+j])
			i += j
		}
	}
	return b.String()
}

// attr returns the value of a double-quoted attribute of a tag.
func attr(tag, name string) string {
	_, v, ok := strings.Cut(tag, " "+name+`="`)
	if !ok {
		return ""
	}
	v, _, _ = strings.Cut(v, `"`)
	return v
}
