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
	// quote writes a block quote whose body writes itself into the
	// builder it is given.
	quote(b *strings.Builder, body func(*strings.Builder))
	// table writes a table laid out as aligned plain text (table.go).
	table(b *strings.Builder, text string)
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
	out, _ := renderWork(md, r)
	return out
}

// MaxAnswerBytes bounds the text an answer is formatted from: past it
// the answer is cut, with a note (about 32 Telegram messages' worth). An
// answer comes from a model (a provider may send megabytes), and its
// formatting and splitting cost a multiple of its size.
const MaxAnswerBytes = 128 << 10

// answerCut is the note that ends an answer cut at MaxAnswerBytes.
const answerCut = "\n\n[… the rest of the answer is left out: it is longer than 128 KB]"

// capAnswer cuts md at MaxAnswerBytes (at a rune boundary), with a note.
func capAnswer(md string) string {
	if len(md) <= MaxAnswerBytes {
		return md
	}
	n := MaxAnswerBytes
	for n > 0 && !utf8.RuneStart(md[n]) {
		n--
	}
	return md[:n] + answerCut
}

// renderWork is render, also returning the steps it took.
func renderWork(md string, r renderer) (string, int) {
	md = strings.ReplaceAll(capAnswer(md), "\r\n", "\n")
	w := newWork(md)
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
			if j == len(lines) {
				// A fence left open ends the code at the end of the text,
				// without the text's last line break.
				for len(code) > 0 && code[len(code)-1] == "" {
					code = code[:len(code)-1]
				}
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
			r.quote(&b, func(qb *strings.Builder) {
				for k, l := range body {
					if k > 0 {
						qb.WriteByte('\n')
					}
					renderLine(qb, r, l, w)
				}
			})
			i = j - 1
		case heading(trimmed) != "":
			nl()
			r.open(&b, "b")
			inline(&b, r, heading(trimmed), w)
			r.close(&b, "b")
		case isRule(trimmed):
			nl()
			r.text(&b, "———")
		default:
			if text, end, ok := tableAt(lines, i, w); ok {
				nl()
				r.table(&b, text)
				i = end - 1
				continue
			}
			nl()
			r.text(&b, indent)
			renderLine(&b, r, trimmed, w)
		}
	}
	return b.String(), w.steps
}

// renderLine renders one non-block line: a list item or inline text.
func renderLine(b *strings.Builder, r renderer, line string, w *work) {
	if rest, ok := bulletItem(line); ok {
		r.text(b, r.bullet())
		inline(b, r, rest, w)
		return
	}
	inline(b, r, line, w)
}

// isFence reports whether t (a line, its indent trimmed) opens or closes
// a fenced code block. A line that ends with as many backticks as it
// starts with, around text ("```ls -la```"), is a code span, as in
// CommonMark, not a block that would swallow the text after it.
func isFence(t string) bool {
	if strings.HasPrefix(t, "~~~") {
		return true
	}
	if !strings.HasPrefix(t, "```") {
		return false
	}
	n := run(t, 0, '`')
	return n == len(t) || !strings.HasSuffix(t[n:], t[:n])
}

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
func (htmlRenderer) quote(b *strings.Builder, body func(*strings.Builder)) {
	b.WriteString("<blockquote>")
	body(b)
	b.WriteString("</blockquote>")
}
func (htmlRenderer) table(b *strings.Builder, text string) {
	b.WriteString("<pre>")
	escapeTo(b, text)
	b.WriteString("</pre>")
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
func (plainRenderer) quote(b *strings.Builder, body func(*strings.Builder)) {
	// Prefix each quoted line with a bar so the quote stays visible.
	prefixLines(b, body, "│ ")
}

// prefixLines writes what body writes with prefix before each line. The
// body is written apart, so a quote costs its own size, not the size of
// what came before it.
func prefixLines(b *strings.Builder, body func(*strings.Builder), prefix string) {
	var q strings.Builder
	body(&q)
	for i, l := range strings.Split(q.String(), "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(prefix)
		b.WriteString(l)
	}
}
func (plainRenderer) table(b *strings.Builder, text string) { b.WriteString(text) }
func (plainRenderer) bullet() string                        { return "• " }
