package textfmt

import (
	"fmt"
	"strings"
	"testing"
)

func TestToSlackMrkdwn(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"reserved characters escaped", `a < b && c > d "q"`, `a &lt; b &amp;&amp; c &gt; d "q"`},
		{"no mention can be written", "ping <@U123> and <!channel>", "ping &lt;@U123&gt; and &lt;!channel&gt;"},
		{"bold", "**bold** text", "*bold* text"},
		{"bold underscores", "__bold__", "*bold*"},
		{"italic star", "an *italic* word", "an _italic_ word"},
		{"italic underscore", "an _italic_ word", "an _italic_ word"},
		{"snake_case untouched", "call my_func_name now", "call my_func_name now"},
		{"bold italic", "***both***", "*_both_*"},
		{"strike", "~~gone~~", "~gone~"},
		{"code span escaped", "use `a<b>&c` here", "use `a&lt;b&gt;&amp;c` here"},
		{"link", "[the site](https://example.com/a?b=1&c=2)", "<https://example.com/a?b=1&amp;c=2|the site>"},
		{"link with parentheses", "[Go](https://en.wikipedia.org/wiki/Go_(programming_language)) is nice", "<https://en.wikipedia.org/wiki/Go_(programming_language)|Go> is nice"},
		{"link label escaped", "[a <b> & c](https://e.com)", "<https://e.com|a &lt;b&gt; &amp; c>"},
		{"link target with reserved characters", "[x](https://e.com/a|b>c)", "<https://e.com/a%7Cb%3Ec|x>"},
		{"autolink", "<https://e.com/x>", "<https://e.com/x|https://e.com/x>"},
		{"javascript link refused", "[x](javascript:alert(1))", "[x](javascript:alert(1))"},
		{"heading", "# Title", "*Title*"},
		{"heading with bold inside", "## The **real** title", "*The real title*"},
		{"bullet list", "- one\n* two\n+ three", "• one\n• two\n• three"},
		{"nested bullet keeps indent", "- a\n  - **b**", "• a\n  • *b*"},
		{"ordered list", "1. first\n2. **second**", "1. first\n2. *second*"},
		{"quote", "> quoted *x*\n> more\nafter", "> quoted _x_\n> more\nafter"},
		{"fence drops the language", "```go\nif a < b {\n}\n```", "```\nif a &lt; b {\n}\n```"},
		{"markdown inside fence literal", "```\n**no** & <b>\n```", "```\n**no** &amp; &lt;b&gt;\n```"},
		{"unclosed fence closed", "```py\nprint(1)", "```\nprint(1)\n```"},
		{"escaped star", `\*not italic\*`, "*not italic*"},
		{"paragraphs kept", "a\n\nb", "a\n\nb"},
		{"emoji", "👍 **ok**", "👍 *ok*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ToSlackMrkdwn(tt.in)
			if got != tt.want {
				t.Errorf("ToSlackMrkdwn(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if err := ValidateSlackMrkdwn(got); err != nil {
				t.Errorf("invalid mrkdwn %q: %v", got, err)
			}
		})
	}
}

func TestValidateSlackMrkdwn(t *testing.T) {
	bad := []string{"a & b", "a < b", "x > y", "```\ncode", "<@U1", "&amp"}
	for _, s := range bad {
		if ValidateSlackMrkdwn(s) == nil {
			t.Errorf("ValidateSlackMrkdwn(%q) = nil, want an error", s)
		}
	}
	good := []string{"", "*b* _i_ ~s~", "<https://e.com|x> <@U1> <#C1|general>", "&lt;&gt;&amp;", "> a quote", "```\nx\n```"}
	for _, s := range good {
		if err := ValidateSlackMrkdwn(s); err != nil {
			t.Errorf("ValidateSlackMrkdwn(%q) = %v, want nil", s, err)
		}
	}
}

func TestSplitSlackMrkdwnKeepsBlocksAndReferencesWhole(t *testing.T) {
	// A long answer with code blocks crossing part boundaries, escaped
	// characters and links everywhere.
	var md strings.Builder
	for i := range 60 {
		fmt.Fprintf(&md, "Paragraph %d says **bold** & <angles> with [a link](https://e.com/%d?a=1&b=2).\n\n", i, i)
		if i%9 == 4 {
			md.WriteString("```go\n")
			for j := range 30 {
				fmt.Fprintf(&md, "x%d := a < b && c > d // %d\n", j, j)
			}
			md.WriteString("```\n\n")
		}
	}
	mrkdwn := ToSlackMrkdwn(md.String())
	const limit = 1000
	parts := SplitSlackMrkdwn(mrkdwn, limit)
	if len(parts) < 5 {
		t.Fatalf("%d units in %d parts; want several", Len(mrkdwn), len(parts))
	}
	var joined strings.Builder
	for i, p := range parts {
		if n := Len(p); n > limit {
			t.Fatalf("part %d is %d units, over %d", i, n, limit)
		}
		if err := ValidateSlackMrkdwn(p); err != nil {
			t.Fatalf("part %d is not valid mrkdwn: %v\n%s", i, err, p)
		}
		joined.WriteString(strings.ReplaceAll(p, "```", ""))
	}
	// Nothing is lost: every link and every code line is in some part.
	for i := range 60 {
		if !strings.Contains(joined.String(), fmt.Sprintf("<https://e.com/%d?a=1&amp;b=2|a link>", i)) {
			t.Fatalf("link %d was cut or lost", i)
		}
	}
	if n := strings.Count(joined.String(), "a &lt; b &amp;&amp; c &gt; d"); n != 7*30 {
		t.Fatalf("%d code lines in the parts, want %d", n, 7*30)
	}
}

func TestSplitSlackMrkdwnNeverCutsAReference(t *testing.T) {
	in := strings.Repeat("x", 60) + "<https://e.com|e>" + "&amp;"
	parts := SplitSlackMrkdwn(in, 64)
	want := []string{strings.Repeat("x", 60), "<https://e.com|e>&amp;"}
	if fmt.Sprint(parts) != fmt.Sprint(want) {
		t.Fatalf("SplitSlackMrkdwn = %q, want %q", parts, want)
	}
	// A code block cut in two is closed and reopened.
	code := "```\n" + strings.Repeat("line of code\n", 10) + "```"
	parts = SplitSlackMrkdwn(code, 64)
	if len(parts) < 2 {
		t.Fatalf("parts = %q", parts)
	}
	for i, p := range parts {
		if !strings.HasPrefix(p, "```\n") || !strings.HasSuffix(p, "\n```") {
			t.Errorf("part %d is not a whole code block: %q", i, p)
		}
	}
}

func TestFromSlack(t *testing.T) {
	names := map[string]string{"U1": "alice", "U2": ""}
	user := func(id string) string { return names[id] }
	tests := []struct{ in, want string }{
		{"hi <@U1>, see <@U2>", "hi @alice, see @U2"},
		{"<@U3|bob> in <#C1|general> and <#C2>", "@bob in #general and #C2"},
		{"<!here> <!channel> <!subteam^S1|@devs>", "@here @channel @devs"},
		{"<https://e.com/a?b=1&amp;c=2|the site> and <https://x.org>", "the site (https://e.com/a?b=1&c=2) and https://x.org"},
		{"<mailto:a@b.c|a@b.c>", "a@b.c"},
		{"a &lt; b &amp;&amp; c &gt; d", "a < b && c > d"},
		{"a < b and > c & d", "a < b and > c & d"},
		{"```x &lt;y&gt;```", "```x <y>```"},
	}
	for _, tt := range tests {
		if got := FromSlack(tt.in, user); got != tt.want {
			t.Errorf("FromSlack(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
