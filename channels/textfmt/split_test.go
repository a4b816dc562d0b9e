package textfmt

import (
	"fmt"
	"strings"
	"testing"
)

// checkParts asserts the invariants every split must keep.
func checkParts(t testing.TB, parts []string, limit int, isHTML bool) {
	t.Helper()
	for i, p := range parts {
		if n := Len(p); n > limit {
			t.Fatalf("part %d is %d units, over the limit %d: %q", i, n, limit, p)
		}
		if isHTML {
			if err := ValidateTelegramHTML(p); err != nil {
				t.Fatalf("part %d is not valid Telegram HTML: %v\n%q", i, err, p)
			}
		} else if strings.Count(p, "```")%2 != 0 {
			t.Fatalf("part %d has an unbalanced code fence: %q", i, p)
		}
		if strings.TrimSpace(HTMLToPlain(p)) == "" {
			t.Fatalf("part %d shows nothing: %q", i, p)
		}
	}
}

func TestSplitHTMLShortIsOnePart(t *testing.T) {
	in := "<b>hello</b> world"
	got := SplitHTML(in, 4096)
	if len(got) != 1 || got[0] != in {
		t.Fatalf("SplitHTML(short) = %q, want [%q]", got, in)
	}
}

func TestSplitHTMLBoundaries(t *testing.T) {
	para := strings.Repeat("word ", 15) // 75 chars
	tests := []struct {
		name      string
		in        string
		limit     int
		wantParts []string
	}{
		{
			name:      "paragraph boundary preferred",
			in:        strings.TrimSpace(para) + "\n\n" + strings.TrimSpace(para),
			limit:     100,
			wantParts: []string{strings.TrimSpace(para), strings.TrimSpace(para)},
		},
		{
			name:      "line boundary when no paragraph",
			in:        "line one is here\nline two is here\nline three is here\nline four is here\nline five is here",
			limit:     71,
			wantParts: []string{"line one is here\nline two is here\nline three is here\nline four is here", "line five is here"},
		},
		{
			name:      "word boundary when no line",
			in:        strings.Repeat("abcdefghi ", 10),
			limit:     64,
			wantParts: []string{"abcdefghi abcdefghi abcdefghi abcdefghi abcdefghi abcdefghi", "abcdefghi abcdefghi abcdefghi abcdefghi"},
		},
		{
			name:      "hard cut in one long word",
			in:        strings.Repeat("x", 100),
			limit:     64,
			wantParts: []string{strings.Repeat("x", 64), strings.Repeat("x", 36)},
		},
		{
			name:      "entity never cut",
			in:        strings.Repeat("x", 62) + "&amp;y",
			limit:     64,
			wantParts: []string{strings.Repeat("x", 62), "&amp;y"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SplitHTML(tt.in, tt.limit)
			if fmt.Sprint(got) != fmt.Sprint(tt.wantParts) {
				t.Errorf("SplitHTML\n got %q\nwant %q", got, tt.wantParts)
			}
			checkParts(t, got, tt.limit, true)
		})
	}
}

func TestSplitHTMLReopensCodeBlockWithLanguage(t *testing.T) {
	var code strings.Builder
	for i := range 40 {
		fmt.Fprintf(&code, "fmt.Println(%d) // a < b\n", i)
	}
	md := "Here is code:\n\n```go\n" + code.String() + "```\n\nDone."
	parts := SplitHTML(ToTelegramHTML(md), 300)
	if len(parts) < 3 {
		t.Fatalf("want the block split over several parts, got %d", len(parts))
	}
	checkParts(t, parts, 300, true)
	inCode := 0
	for i, p := range parts {
		if strings.Contains(p, "fmt.Println") {
			inCode++
			if !strings.Contains(p, `<pre><code class="language-go">`) || !strings.HasSuffix(p, "</code></pre>") && !strings.Contains(p, "</code></pre>") {
				t.Errorf("part %d has code outside a go block: %q", i, p)
			}
		}
	}
	if inCode < 2 {
		t.Fatalf("code appears in %d parts, want it carried over at least 2", inCode)
	}
	// No text is lost: joined plain text has every line.
	var all strings.Builder
	for _, p := range parts {
		all.WriteString(HTMLToPlain(p) + "\n")
	}
	for i := range 40 {
		if !strings.Contains(all.String(), fmt.Sprintf("fmt.Println(%d) // a < b", i)) {
			t.Fatalf("line %d lost in the split", i)
		}
	}
}

func TestSplitHTML10000WithCodeBlocks(t *testing.T) {
	md := longReply(10000)
	parts := SplitHTML(ToTelegramHTML(md), 4096)
	if len(parts) < 3 {
		t.Fatalf("got %d parts, want at least 3 for %d chars", len(parts), len(md))
	}
	checkParts(t, parts, 4096, true)
}

// longReply builds Markdown of about n characters mixing prose, lists
// and code blocks, the way an LLM answers.
func longReply(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "## Step %d\n\nThis is **paragraph %d** with *emphasis*, `inline <code>` and a [link](https://example.com/%d?a=1&b=2).\n\n", i, i, i)
		b.WriteString("- first point & more\n- second point\n\n")
		fmt.Fprintf(&b, "```go\nfunc step%d() {\n", i)
		for j := range 12 {
			fmt.Fprintf(&b, "\tif x < %d && y > %d { return }\n", j, j)
		}
		b.WriteString("}\n```\n\n")
	}
	return b.String()
}

func TestSplitMarkdown(t *testing.T) {
	var code strings.Builder
	for i := range 30 {
		fmt.Fprintf(&code, "print(%d)\n", i)
	}
	md := "intro text\n\n```python\n" + code.String() + "```\n\nthe end"
	parts := SplitMarkdown(md, 120)
	checkParts(t, parts, 120, false)
	for i, p := range parts {
		if strings.Contains(p, "print(") && !strings.Contains(p, "```python\n") {
			t.Errorf("part %d has code without a reopened python fence: %q", i, p)
		}
	}
	if !strings.HasPrefix(parts[0], "intro text") || !strings.HasSuffix(parts[len(parts)-1], "the end") {
		t.Errorf("first/last part lost text: %q", parts)
	}
	if got := SplitMarkdown("short", 2000); len(got) != 1 || got[0] != "short" {
		t.Errorf("SplitMarkdown(short) = %q", got)
	}
}

func TestSplitHTMLDropsOversizedTagInsteadOfOverflowing(t *testing.T) {
	long := "https://e.com/" + strings.Repeat("a", 200)
	in := `<a href="` + long + `">label</a> ` + strings.Repeat("text ", 30)
	parts := SplitHTML(in, 100)
	checkParts(t, parts, 100, true)
	if !strings.Contains(parts[0], "label") {
		t.Errorf("label text lost: %q", parts)
	}
}

func FuzzSplitHTML(f *testing.F) {
	f.Add("**bold** and `code` and ```go\nx := 1 < 2\n```\n\n> quote\n- list", 100)
	f.Add(longReply(3000), 500)
	f.Add("[a](https://e.com) ~~s~~ _i_ ***bi*** &<>\"", 64)
	f.Add("```\n"+strings.Repeat("line of code\n", 50)+"```", 80)
	f.Fuzz(func(t *testing.T, md string, limit int) {
		if limit < 0 {
			limit = -limit
		}
		limit = MinLimit + limit%4096
		html := ToTelegramHTML(md)
		if err := ValidateTelegramHTML(html); err != nil {
			t.Fatalf("ToTelegramHTML(%q) is invalid: %v\n%q", md, err, html)
		}
		parts := SplitHTML(html, limit)
		checkParts(t, parts, limit, true)
		if strings.TrimSpace(HTMLToPlain(html)) != "" && len(parts) == 0 {
			t.Fatalf("visible text %q produced no parts", html)
		}
		mdParts := SplitMarkdown(md, limit)
		for i, p := range mdParts {
			if n := Len(p); n > limit {
				t.Fatalf("markdown part %d is %d units, over %d", i, n, limit)
			}
		}
	})
}

func BenchmarkFormat10000(b *testing.B) {
	md := longReply(10000)
	b.SetBytes(int64(len(md)))
	for b.Loop() {
		_ = SplitHTML(ToTelegramHTML(md), 4096)
	}
}
