package textfmt

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxHrefLen is the longest link target rendered as a link; longer ones
// become "label (url)" text so a splitter never has to carry a huge tag.
const maxHrefLen = 1024

// renderer receives the structure the Markdown parser finds. Two
// implementations exist: Telegram HTML and plain text.
type renderer interface {
	text(b *strings.Builder, s string)
	open(b *strings.Builder, tag string)
	close(b *strings.Builder, tag string)
	link(b *strings.Builder, label func(), url string)
	codeSpan(b *strings.Builder, code string)
	codeBlock(b *strings.Builder, lang, code string)
	quote(b *strings.Builder, body func())
	bullet() string
}

// ToTelegramHTML converts Markdown as LLMs write it (**bold**, *italic*,
// _italic_, `code`, fenced blocks with a language, [links](url), lists,
// > quotes, # headings, ~~strike~~) into the HTML subset Telegram's
// parse_mode=HTML accepts. Everything else is escaped, and the result has
// balanced tags.
func ToTelegramHTML(md string) string { return render(md, htmlRenderer{}) }

// ToPlain converts Markdown into readable plain text: markers removed,
// links as "label (url)", code kept verbatim.
func ToPlain(md string) string { return render(md, plainRenderer{}) }

func render(md string, r renderer) string {
	md = strings.ReplaceAll(md, "\r\n", "\n")
	lines := strings.Split(md, "\n")
	var b strings.Builder
	b.Grow(len(md) + len(md)/8)
	first := true
	nl := func() {
		if !first {
			b.WriteByte('\n')
		}
		first = false
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimLeft(line, " \t")
		indent := line[:len(line)-len(trimmed)]
		switch {
		case isFence(trimmed):
			fence, lang := fenceInfo(trimmed)
			var code []string
			j := i + 1
			for ; j < len(lines); j++ {
				if closesFence(strings.TrimLeft(lines[j], " \t"), fence) {
					break
				}
				code = append(code, lines[j])
			}
			nl()
			r.codeBlock(&b, lang, strings.Join(code, "\n"))
			i = j // the closing fence (or the end) is consumed
		case strings.HasPrefix(trimmed, ">"):
			var body []string
			j := i
			for ; j < len(lines); j++ {
				t := strings.TrimLeft(lines[j], " \t")
				if !strings.HasPrefix(t, ">") {
					break
				}
				t = strings.TrimPrefix(t, ">")
				t = strings.TrimPrefix(t, " ")
				body = append(body, t)
			}
			nl()
			r.quote(&b, func() {
				for k, l := range body {
					if k > 0 {
						b.WriteByte('\n')
					}
					renderLine(&b, r, l)
				}
			})
			i = j - 1
		case heading(trimmed) != "":
			nl()
			r.open(&b, "b")
			inline(&b, r, heading(trimmed))
			r.close(&b, "b")
		case isRule(trimmed):
			nl()
			r.text(&b, "———")
		default:
			nl()
			r.text(&b, indent)
			renderLine(&b, r, trimmed)
		}
	}
	return b.String()
}

// renderLine renders one non-block line: a list item or inline text.
func renderLine(b *strings.Builder, r renderer, line string) {
	if rest, ok := bulletItem(line); ok {
		r.text(b, r.bullet())
		inline(b, r, rest)
		return
	}
	inline(b, r, line)
}

func isFence(t string) bool { return strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") }

func fenceInfo(t string) (fence, lang string) {
	c := t[0]
	n := 0
	for n < len(t) && t[n] == c {
		n++
	}
	lang = strings.TrimSpace(t[n:])
	if f := strings.Fields(lang); len(f) > 0 {
		lang = f[0]
	}
	// A language is a simple identifier; anything else is not a language.
	for _, r := range lang {
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("+-#._", r)) {
			lang = ""
			break
		}
	}
	return t[:n], lang
}

func closesFence(t, fence string) bool {
	if !strings.HasPrefix(t, fence) {
		return false
	}
	return strings.TrimSpace(strings.TrimLeft(t, fence[:1])) == ""
}

func heading(t string) string {
	n := 0
	for n < len(t) && t[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || n >= len(t) || t[n] != ' ' {
		return ""
	}
	h := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(t[n:]), "#"))
	return h
}

func isRule(t string) bool {
	t = strings.ReplaceAll(t, " ", "")
	if len(t) < 3 {
		return false
	}
	for _, c := range []string{"-", "*", "_"} {
		if strings.Trim(t, c) == "" {
			return true
		}
	}
	return false
}

func bulletItem(line string) (string, bool) {
	if len(line) >= 2 && (line[0] == '-' || line[0] == '*' || line[0] == '+') && line[1] == ' ' {
		return line[2:], true
	}
	return "", false
}

// inline renders s with inline formatting. Every construct is matched
// opener-to-closer and its inside rendered recursively, so the output's
// tags are balanced by construction.
func inline(b *strings.Builder, r renderer, s string) {
	lit := 0 // start of pending literal text
	flush := func(end int) {
		if end > lit {
			r.text(b, s[lit:end])
		}
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch c {
		case '\\':
			if i+1 < len(s) && strings.IndexByte("\\`*_~[]()#>-+!|.", s[i+1]) >= 0 {
				flush(i)
				r.text(b, s[i+1:i+2])
				i += 2
				lit = i
				continue
			}
		case '`':
			n := run(s, i, '`')
			if end := findRun(s, i+n, '`', n); end >= 0 {
				flush(i)
				code := s[i+n : end]
				if len(code) > 2 && code[0] == ' ' && code[len(code)-1] == ' ' {
					code = code[1 : len(code)-1]
				}
				r.codeSpan(b, code)
				i = end + n
				lit = i
				continue
			}
			i += n
			continue
		case '[':
			if label, url, end, ok := linkAt(s, i); ok {
				flush(i)
				if strings.TrimSpace(label) == "" {
					label = url
				}
				if len(url) > maxHrefLen {
					inline(b, r, label)
					r.text(b, " ("+url+")")
				} else {
					r.link(b, func() { inline(b, r, label) }, url)
				}
				i = end
				lit = i
				continue
			}
		case '<':
			if end := strings.IndexByte(s[i:], '>'); end > 0 {
				u := s[i+1 : i+end]
				if safeURL(u) && !strings.ContainsAny(u, " <") && len(u) <= maxHrefLen {
					flush(i)
					r.link(b, func() { r.text(b, u) }, u)
					i += end + 1
					lit = i
					continue
				}
			}
		case '*', '_', '~':
			if tag, inner, end, ok := emphasisAt(s, i); ok {
				flush(i)
				r.open(b, tag)
				inline(b, r, inner)
				r.close(b, tag)
				i = end
				lit = i
				continue
			}
			i += run(s, i, c)
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	flush(len(s))
}

func run(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

// findRun finds a run of exactly n c's at or after from.
func findRun(s string, from int, c byte, n int) int {
	for i := from; i < len(s); {
		if s[i] == c {
			m := run(s, i, c)
			if m == n {
				return i
			}
			i += m
			continue
		}
		i++
	}
	return -1
}

// emphasisAt matches **x**, __x__, *x*, _x_ and ~~x~~ starting at i.
func emphasisAt(s string, i int) (tag, inner string, end int, ok bool) {
	c := s[i]
	n := run(s, i, c)
	var width int
	switch {
	case c == '~' && n == 2:
		tag, width = "s", 2
	case c == '~':
		return "", "", 0, false
	case n == 2:
		tag, width = "b", 2
	case n == 1:
		tag, width = "i", 1
	case n >= 3:
		// ***x*** is bold around italic: take the outer ** here.
		tag, width = "b", 2
	default:
		return "", "", 0, false
	}
	if c == '_' && i > 0 && isWordByte(s[i-1]) {
		return "", "", 0, false // snake_case
	}
	start := i + width
	if start >= len(s) || s[start] == ' ' || s[start] == '\n' {
		return "", "", 0, false
	}
	for j := start; j < len(s); {
		switch s[j] {
		case '`':
			m := run(s, j, '`')
			if e := findRun(s, j+m, '`', m); e >= 0 {
				j = e + m
				continue
			}
			j += m
			continue
		case '\\':
			j += 2
			continue
		case c:
			m := run(s, j, c)
			closeAt := -1
			switch {
			case m == width:
				closeAt = j
			case m > width && (width == 2 || m == 3):
				// "***" closing "**" after an inner "*": the closer is the last two.
				closeAt = j + m - width
			}
			if closeAt > start && s[closeAt-1] != ' ' && s[closeAt-1] != '\n' {
				after := closeAt + width
				if c == '_' && after < len(s) && isWordByte(s[after]) {
					j += m
					continue
				}
				return tag, s[start:closeAt], after, true
			}
			j += m
			continue
		}
		j++
	}
	return "", "", 0, false
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// linkAt matches [label](url) starting at i.
func linkAt(s string, i int) (label, url string, end int, ok bool) {
	depth := 0
	j := i
	for ; j < len(s); j++ {
		switch s[j] {
		case '[':
			depth++
		case ']':
			depth--
		case '\n':
			return "", "", 0, false
		}
		if depth == 0 {
			break
		}
	}
	if j >= len(s) || j+1 >= len(s) || s[j+1] != '(' {
		return "", "", 0, false
	}
	close := strings.IndexByte(s[j+2:], ')')
	if close < 0 {
		return "", "", 0, false
	}
	url = strings.TrimSpace(s[j+2 : j+2+close])
	if t, _, found := strings.Cut(url, " "); found {
		url = t // drop a "title"
	}
	if !safeURL(url) {
		return "", "", 0, false
	}
	return s[i+1 : j], url, j + 2 + close + 1, true
}

func safeURL(u string) bool {
	l := strings.ToLower(u)
	for _, p := range []string{"http://", "https://", "tg://", "mailto:"} {
		if strings.HasPrefix(l, p) && len(u) > len(p) {
			return true
		}
	}
	return false
}

// htmlRenderer writes Telegram HTML.
type htmlRenderer struct{}

func (htmlRenderer) text(b *strings.Builder, s string)   { escapeTo(b, s) }
func (htmlRenderer) open(b *strings.Builder, tag string) { b.WriteString("<" + tag + ">") }
func (htmlRenderer) close(b *strings.Builder, tag string) {
	b.WriteString("</" + tag + ">")
}
func (htmlRenderer) link(b *strings.Builder, label func(), url string) {
	b.WriteString(`<a href="`)
	escapeTo(b, url)
	b.WriteString(`">`)
	label()
	b.WriteString("</a>")
}
func (htmlRenderer) codeSpan(b *strings.Builder, code string) {
	b.WriteString("<code>")
	escapeTo(b, code)
	b.WriteString("</code>")
}
func (htmlRenderer) codeBlock(b *strings.Builder, lang, code string) {
	if lang != "" {
		b.WriteString(`<pre><code class="language-`)
		escapeTo(b, lang)
		b.WriteString(`">`)
		escapeTo(b, code)
		b.WriteString("</code></pre>")
		return
	}
	b.WriteString("<pre>")
	escapeTo(b, code)
	b.WriteString("</pre>")
}
func (htmlRenderer) quote(b *strings.Builder, body func()) {
	b.WriteString("<blockquote>")
	body()
	b.WriteString("</blockquote>")
}
func (htmlRenderer) bullet() string { return "• " }

// Escape escapes the characters Telegram's HTML parser treats specially.
func Escape(s string) string {
	var b strings.Builder
	escapeTo(&b, s)
	return b.String()
}

func escapeTo(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '"':
			b.WriteString("&quot;")
		default:
			b.WriteByte(s[i])
		}
	}
}

// plainRenderer writes plain text.
type plainRenderer struct{}

func (plainRenderer) text(b *strings.Builder, s string)     { b.WriteString(s) }
func (plainRenderer) open(*strings.Builder, string)         {}
func (plainRenderer) close(*strings.Builder, string)        {}
func (plainRenderer) codeSpan(b *strings.Builder, c string) { b.WriteString(c) }
func (plainRenderer) link(b *strings.Builder, label func(), url string) {
	start := b.Len()
	label()
	if b.String()[start:] != url {
		b.WriteString(" (" + url + ")")
	}
}
func (plainRenderer) codeBlock(b *strings.Builder, _, code string) { b.WriteString(code) }
func (plainRenderer) quote(b *strings.Builder, body func()) {
	start := b.Len()
	body()
	q := b.String()[start:]
	// Prefix each quoted line with a bar so the quote stays visible.
	s := b.String()[:start]
	b.Reset()
	b.WriteString(s)
	for i, l := range strings.Split(q, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("│ " + l)
	}
}
func (plainRenderer) bullet() string { return "• " }
