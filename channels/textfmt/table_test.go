package textfmt

import (
	"fmt"
	"strings"
	"testing"
)

// tableRenderers are the four formats a table is shown in.
var tableRenderers = []struct {
	name   string
	format func(string) string
	// block is how the format shows a laid-out table.
	block func(aligned string) string
}{
	{"telegram", ToTelegramHTML, func(a string) string { return "<pre>" + Escape(a) + "</pre>" }},
	{"slack", ToSlackMrkdwn, func(a string) string { return "```\n" + a + "\n```" }},
	{"discord", ToDiscord, func(a string) string { return "```\n" + a + "\n```" }},
	{"plain", ToPlain, func(a string) string { return a }},
}

// A GFM table is sent as an aligned monospace block on every platform,
// not as rows of pipes (none of them renders Markdown tables).
func TestTables(t *testing.T) {
	tests := []struct {
		name string
		md   string
		// want is the laid-out table; text around it is in before/after.
		before, want, after string
	}{
		{
			name: "alignment",
			md:   "| Fruit | Qty | Price | Note |\n|:------|----:|:-----:|------|\n| apple | 3 | 1.5 | ripe |\n| kiwi | 12 | 0.25 | - |",
			want: "Fruit | Qty | Price | Note\n" +
				"------+-----+-------+-----\n" +
				"apple |   3 |  1.5  | ripe\n" +
				"kiwi  |  12 | 0.25  | -",
		},
		{
			name: "no outer pipes",
			md:   "a | b\n--- | ---\nlonger | x",
			want: "a      | b\n-------+--\nlonger | x",
		},
		{
			name: "inline markup in cells is its text",
			md:   "| **Name** | Code | Link |\n|---|---|---|\n| *it* and __b__ | `x := 1` | [docs](https://go.dev/doc) |\n| ~~old~~ | a \\| b | <https://a.example> |",
			want: "Name     | Code   | Link\n" +
				"---------+--------+--------------------------\n" +
				"it and b | x := 1 | docs (https://go.dev/doc)\n" +
				"old      | a | b  | https://a.example",
		},
		{
			name: "east asian wide characters take two columns",
			md:   "| 名前 | n |\n|---|---|\n| ab | 1 |\n| 日本語 | 2 |",
			want: "名前   | n\n-------+--\nab     | 1\n日本語 | 2",
		},
		{
			name: "ragged rows: missing cells empty, extra cells dropped",
			md:   "| a | b |\n|---|---|\n| x |\n| 1 | 2 | 3 |",
			want: "a | b\n--+--\nx\n1 | 2",
		},
		{
			name:   "next to text",
			md:     "Prices:\n| item | € |\n|---|--:|\n| tea | 2 |\nThat is all.",
			before: "Prices:\n",
			want:   "item | €\n-----+--\ntea  | 2",
			after:  "\nThat is all.",
		},
	}
	for _, tt := range tests {
		for _, r := range tableRenderers {
			t.Run(tt.name+"/"+r.name, func(t *testing.T) {
				want := r.block(tt.want)
				if r.name == "slack" {
					want = "```\n" + slackEscape(tt.want) + "\n```"
				}
				want = tt.before + want + tt.after
				if got := r.format(tt.md); got != want {
					t.Errorf("%s(%q)\n got:\n%s\nwant:\n%s", r.name, tt.md, got, want)
				}
			})
		}
	}
}

func slackEscape(s string) string {
	var b strings.Builder
	slackEscapeTo(&b, s)
	return b.String()
}

// What the cells hold is escaped for the platform, and nothing in them
// can end the block early.
func TestTableEscaping(t *testing.T) {
	md := "| a | b |\n|---|---|\n| x < y | Tom & Jerry |\n| \\`\\`\\` | <b>no</b> |"
	tests := []struct {
		format func(string) string
		want   string
	}{
		{ToTelegramHTML, "<pre>a     | b\n------+------------\nx &lt; y | Tom &amp; Jerry\n```   | &lt;b&gt;no&lt;/b&gt;</pre>"},
		{ToSlackMrkdwn, "```\na     | b\n------+------------\nx &lt; y | Tom &amp; Jerry\n`\u200b`\u200b`   | &lt;b&gt;no&lt;/b&gt;\n```"},
		{ToDiscord, "```\na     | b\n------+------------\nx < y | Tom & Jerry\n`\u200b`\u200b`   | <b>no</b>\n```"},
	}
	for _, tt := range tests {
		got := tt.format(md)
		if got != tt.want {
			t.Errorf("got:\n%q\nwant:\n%q", got, tt.want)
		}
	}
	if err := ValidateTelegramHTML(ToTelegramHTML(md)); err != nil {
		t.Error(err)
	}
	if err := ValidateSlackMrkdwn(ToSlackMrkdwn(md)); err != nil {
		t.Error(err)
	}
}

// Only a header row followed by a delimiter row makes a table: a table
// inside a code fence and lines that only have pipes stay as they are.
func TestNotTables(t *testing.T) {
	tests := []struct{ name, md string }{
		{"in a code fence", "```\n| a | b |\n|---|---|\n| 1 | 2 |\n```"},
		{"in a tilde fence", "~~~md\n| a | b |\n|---|---|\n~~~"},
		{"pipes without a delimiter row", "a | b\nc | d"},
		{"a shell pipeline", "run ps aux | grep go | wc -l\nthen wait"},
		{"delimiter with other cell count", "| a | b |\n|---|\n| 1 | 2 |"},
		{"a rule after a line with a pipe", "a | b\n---"},
		{"delimiter without dashes", "| a | b |\n|:|:|"},
		{"in a quote", "> | a | b |\n> |---|---|"},
	}
	for _, tt := range tests {
		for _, r := range tableRenderers {
			t.Run(tt.name+"/"+r.name, func(t *testing.T) {
				got := r.format(tt.md)
				if r.name == "discord" && got != tt.md {
					t.Errorf("ToDiscord(%q) = %q; want it untouched", tt.md, got)
				}
				// Laid out, a table loses its outer pipes and its
				// delimiter row, and gains a rule.
				if strings.Count(got, "|") != strings.Count(tt.md, "|") || strings.Contains(got, "-+-") {
					t.Errorf("%s(%q) = %q; want its pipes and lines kept", r.name, tt.md, got)
				}
			})
		}
	}
	// Untouched means as before: pipes kept, lines kept.
	if got := ToPlain("a | b\nc | d"); got != "a | b\nc | d" {
		t.Errorf("ToPlain = %q", got)
	}
	if got := ToTelegramHTML("```\n| a | b |\n|---|---|\n```"); got != "<pre>| a | b |\n|---|---|</pre>" {
		t.Errorf("ToTelegramHTML = %q", got)
	}
}

// longTable is a table of n rows, about 40 characters each.
func longTable(n int) string {
	var b strings.Builder
	b.WriteString("Results:\n\n| # | name | score |\n|--:|:-----|------:|\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "| %d | player %d with a **name** | %d |\n", i, i, i*7)
	}
	b.WriteString("\nThat is all.")
	return b.String()
}

// A table longer than a message is cut at line boundaries, and its block
// is closed at the end of each part and reopened at the start of the
// next, so each part shows aligned rows.
func TestLongTableSplitsIntoBlocks(t *testing.T) {
	md := longTable(400)
	tests := []struct {
		name       string
		parts      []string
		limit      int
		open, shut string
	}{
		{"telegram", SplitHTML(ToTelegramHTML(md), 4096), 4096, "<pre>", "</pre>"},
		{"slack", SplitSlackMrkdwn(ToSlackMrkdwn(md), 4000), 4000, "```\n", "\n```"},
		{"discord", SplitMarkdown(ToDiscord(md), DiscordLimit), DiscordLimit, "```\n", "\n```"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.parts) < 3 {
				t.Fatalf("%d parts; the test wants a table cut more than once", len(tt.parts))
			}
			checkParts(t, tt.parts, tt.limit, tt.name == "telegram")
			last := len(tt.parts) - 1
			for i, p := range tt.parts {
				body := p
				if i == 0 {
					body = strings.TrimPrefix(p, "Results:\n\n")
				}
				if i == last {
					body = strings.TrimSuffix(p, "\n\nThat is all.")
				}
				if !strings.HasPrefix(body, tt.open) || !strings.HasSuffix(body, tt.shut) {
					t.Fatalf("part %d is not one closed block: %q … %q", i, p[:min(len(p), 40)], p[max(len(p)-40, 0):])
				}
				inner := strings.TrimSuffix(strings.TrimPrefix(body, tt.open), tt.shut)
				for _, row := range strings.Split(inner, "\n") {
					if strings.Contains(row, "**") || strings.HasPrefix(row, "|") || row == "" {
						t.Fatalf("part %d has a row not laid out: %q", i, row)
					}
				}
			}
		})
	}
}

// A table of any shape costs a bounded output: padding adds at most the
// answer's size plus tableRoom, past which cells are only separated.
func TestTableOutputIsBounded(t *testing.T) {
	for _, name := range []string{"table-wide", "table-rows", "table-many"} {
		md := adversarialInput(name, 64<<10)
		for _, r := range tableRenderers {
			out := r.format(md)
			if len(out) > 3*len(md)+tableRoom {
				t.Errorf("%s/%s: %d bytes in, %d out", name, r.name, len(md), len(out))
			}
		}
	}
	// A long cell sticks out of its column instead of padding every row.
	md := "| a | b |\n|---|---|\n| " + strings.Repeat("x", 500) + " | 1 |\n| y | 2 |"
	want := "a" + strings.Repeat(" ", maxColumn-1) + " | b\n" + strings.Repeat("-", maxColumn) + "-+--\n" +
		strings.Repeat("x", 500) + " | 1\ny" + strings.Repeat(" ", maxColumn-1) + " | 2"
	if got := ToPlain(md); got != want {
		t.Errorf("a long cell:\n%s", got)
	}
}
