package textfmt

import (
	"strings"
	"testing"
)

func TestToTelegramHTML(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain escaped", `a < b && c > d "q"`, `a &lt; b &amp;&amp; c &gt; d &quot;q&quot;`},
		{"bold", "**bold** text", "<b>bold</b> text"},
		{"bold underscores", "__bold__", "<b>bold</b>"},
		{"italic star", "an *italic* word", "an <i>italic</i> word"},
		{"italic underscore", "an _italic_ word", "an <i>italic</i> word"},
		{"snake_case untouched", "call my_func_name now", "call my_func_name now"},
		{"bold italic", "***both***", "<b><i>both</i></b>"},
		{"nested", "**bold *and italic* here**", "<b>bold <i>and italic</i> here</b>"},
		{"italic around bold", "*a **b** c*", "<i>a <b>b</b> c</i>"},
		{"strike", "~~gone~~", "<s>gone</s>"},
		{"code span", "use `a<b>*c*` here", "use <code>a&lt;b&gt;*c*</code> here"},
		{"double backtick code", "``a ` b``", "<code>a ` b</code>"},
		{"link", "[the site](https://example.com/a?b=1&c=2)", `<a href="https://example.com/a?b=1&amp;c=2">the site</a>`},
		{"link with parentheses", "[Go](https://en.wikipedia.org/wiki/Go_(programming_language)) is nice", `<a href="https://en.wikipedia.org/wiki/Go_(programming_language)">Go</a> is nice`},
		{"link in parentheses", "(see [Go](https://go.dev/doc))", `(see <a href="https://go.dev/doc">Go</a>)`},
		{"link with unbalanced parenthesis", "[a](https://a.example/x_(y) z)", `<a href="https://a.example/x_(y">a</a> z)`},
		{"link with bold label", "[**x**](https://e.com)", `<a href="https://e.com"><b>x</b></a>`},
		{"javascript link refused", "[x](javascript:alert(1))", "[x](javascript:alert(1))"},
		{"autolink", "<https://e.com/x>", `<a href="https://e.com/x">https://e.com/x</a>`},
		{"heading", "# Title *x*", "<b>Title <i>x</i></b>"},
		{"heading level 3", "### Sub", "<b>Sub</b>"},
		{"bullet list", "- one\n* two\n+ three", "• one\n• two\n• three"},
		{"nested bullet keeps indent", "- a\n  - b", "• a\n  • b"},
		{"ordered list", "1. first\n2. **second**", "1. first\n2. <b>second</b>"},
		{"quote", "> quoted *x*\n> more\nafter", "<blockquote>quoted <i>x</i>\nmore</blockquote>\nafter"},
		{"fence with language", "```go\nif a < b {\n}\n```", "<pre><code class=\"language-go\">if a &lt; b {\n}</code></pre>"},
		{"fence without language", "```\nx & y\n```", "<pre>x &amp; y</pre>"},
		{"unclosed fence runs to end", "```py\nprint(1)", "<pre><code class=\"language-py\">print(1)</code></pre>"},
		{"markdown inside fence literal", "```\n**no**\n```", "<pre>**no**</pre>"},
		{"unmatched star literal", "2 * 3 = 6", "2 * 3 = 6"},
		{"unmatched bold literal", "**open only", "**open only"},
		{"escaped star", `\*not italic\*`, "*not italic*"},
		{"rule", "---", "———"},
		{"paragraphs kept", "a\n\nb", "a\n\nb"},
		{"emoji", "👍 **ok**", "👍 <b>ok</b>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ToTelegramHTML(tt.in)
			if got != tt.want {
				t.Errorf("ToTelegramHTML(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if err := ValidateTelegramHTML(got); err != nil {
				t.Errorf("invalid HTML %q: %v", got, err)
			}
		})
	}
}

func TestToPlain(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"markers removed", "**bold** and *it* and ~~s~~ and `c`", "bold and it and s and c"},
		{"link", "[site](https://e.com)", "site (https://e.com)"},
		{"link same as label", "<https://e.com>", "https://e.com"},
		{"fence verbatim", "```go\na < b\n```", "a < b"},
		{"quote bar", "> hi", "│ hi"},
		{"list", "- a", "• a"},
		{"no escaping", "a < b & c", "a < b & c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ToPlain(tt.in); got != tt.want {
				t.Errorf("ToPlain(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestHTMLToPlain(t *testing.T) {
	tests := []struct{ in, want string }{
		{"<b>x</b> &lt;y&gt; &amp; &quot;z&quot;", `x <y> & "z"`},
		{`<a href="https://e.com/?a=1&amp;b=2">site</a>`, "site (https://e.com/?a=1&b=2)"},
		{`<pre><code class="language-go">a &lt; b</code></pre>`, "a < b"},
		{`<a href="https://e.com">https://e.com</a>`, "https://e.com"},
	}
	for _, tt := range tests {
		if got := HTMLToPlain(tt.in); got != tt.want {
			t.Errorf("HTMLToPlain(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestValidateTelegramHTML(t *testing.T) {
	bad := []string{"<b>x", "<b><i>x</b></i>", "a < b", "a & b", "<div>x</div>", "</b>", "&nbsp;", "x > y"}
	for _, s := range bad {
		if ValidateTelegramHTML(s) == nil {
			t.Errorf("ValidateTelegramHTML(%q) = nil, want an error", s)
		}
	}
	good := []string{"", "<b>x</b>", `<a href="https://e.com">x</a>`, "&lt;&#128077;", `<pre><code class="language-go">x</code></pre>`}
	for _, s := range good {
		if err := ValidateTelegramHTML(s); err != nil {
			t.Errorf("ValidateTelegramHTML(%q) = %v, want nil", s, err)
		}
	}
}

// A line of backticks around text is a code span: "```ls -la```" was
// read as a fence whose language was "ls", so the command vanished (an
// empty block, sent as "(empty answer)") and the lines after it became
// code, on Discord outside the escaping of mass mentions.
func TestOneLineBackticksAreCode(t *testing.T) {
	tests := []struct {
		name, md, want string
		format         func(string) string
	}{
		{"telegram", "```ls -la```\nthen **wait**", "<code>ls -la</code>\nthen <b>wait</b>", ToTelegramHTML},
		{"slack", "```ls -la```\nthen **wait**", "`ls -la`\nthen *wait*", ToSlackMrkdwn},
		{"plain", "```ls -la```", "ls -la", ToPlain},
		{"discord", "```ls -la```\n@everyone", "```ls -la```\n@\u200beveryone", ToDiscord},
		{"telegram fence", "```go\nx\n```", `<pre><code class="language-go">x</code></pre>`, ToTelegramHTML},
		{"telegram bare fence", "```\nx\n```", "<pre>x</pre>", ToTelegramHTML},
		{"telegram info with a backtick", "```go `x`\ny\n```", `<pre><code class="language-go">y</code></pre>`, ToTelegramHTML},
		{"draft", "```ls -la```", "```ls -la```", CloseMarkdown},
	}
	for _, tt := range tests {
		if got := tt.format(tt.md); got != tt.want {
			t.Errorf("%s: %q\n got %q\nwant %q", tt.name, tt.md, got, tt.want)
		}
	}
	if parts := SplitMarkdown("```ls -la```\n"+strings.Repeat("word ", 500), 1000); strings.HasPrefix(parts[1], "```") {
		t.Errorf("a one-line code span is carried as a fence into the next part: %q", parts[1][:20])
	}
}
