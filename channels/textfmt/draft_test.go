package textfmt

import (
	"strings"
	"testing"
)

func TestCloseMarkdown(t *testing.T) {
	cases := map[string]string{
		"plain":                      "plain",
		"Hello **bold":               "Hello **bold**",
		"Hello **bold** and **more":  "Hello **bold** and **more**",
		"a `code":                    "a `code`",
		"trailing **":                "trailing ",
		"code:\n```go\nfunc x() {\n": "code:\n```go\nfunc x() {\n```",
		"code:\n```go\nx\n```\ndone": "code:\n```go\nx\n```\ndone",
		"p1 **a\n\np2":               "p1 **a\n\np2",
		"```\nx ** y\n```\ndone":     "```\nx ** y\n```\ndone",
		"```\na`b\n```\nok `x` y":    "```\na`b\n```\nok `x` y",
		"```\na`b\n```\nok `x":       "```\na`b\n```\nok `x`",
		// "**" inside a code span is code, not a bold marker.
		"use `x**y` and plain": "use `x**y` and plain",
		"use `x**y` and **bo":  "use `x**y` and **bo**",
		// A bold run and a code span open together are both closed.
		"**bold `code": "**bold `code`**",
		"**bold `":     "**bold**",
		// A "~~~" fence is a code block too; a longer fence is closed
		// only by a fence as long, not by the "```" lines inside it.
		"~~~py\nx = 2**3\ny":                "~~~py\nx = 2**3\ny\n~~~",
		"~~~\na `b\n~~~\nok **x":            "~~~\na `b\n~~~\nok **x**",
		"````md\n```\ninner\n```\nmore **x": "````md\n```\ninner\n```\nmore **x\n````",
		// The renderer trims only a fence line's indent: with a space
		// after it, "```ls```" opens a block.
		"```ls``` \n**x": "```ls``` \n**x\n```",
	}
	for in, want := range cases {
		if got := CloseMarkdown(in); got != want {
			t.Errorf("CloseMarkdown(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDraftGrowsAndStaysValid(t *testing.T) {
	var full strings.Builder
	full.WriteString("Intro **bold** text.\n\n```go\n")
	for i := 0; i < 400; i++ {
		full.WriteString("fmt.Println(\"line\")\n")
	}
	full.WriteString("```\nThe end.")
	text := full.String()
	prevParts := 0
	var prevFirst string
	for n := 10; n <= len(text); n += 97 {
		parts := Draft(text[:n], 4096, ToTelegramHTML, telegramVisible)
		if len(parts) < prevParts {
			t.Fatalf("at %d bytes: %d parts, fewer than the %d before", n, len(parts), prevParts)
		}
		for i, p := range parts {
			if err := ValidateTelegramHTML(p.Part); err != nil {
				t.Fatalf("at %d bytes, part %d is not valid Telegram HTML: %v\n%s", n, i, err, p.Part)
			}
			if Len(HTMLToPlain(p.Part)) > 4096 {
				t.Fatalf("at %d bytes, part %d is over 4096 characters", n, i)
			}
		}
		if len(parts) > 1 && prevParts > 1 && parts[0].Raw != prevFirst {
			t.Fatalf("at %d bytes the filled first part changed", n)
		}
		prevParts = len(parts)
		prevFirst = parts[0].Raw
	}
	if prevParts < 2 {
		t.Fatalf("a %d-byte draft fits one part; the test wants a continuation", len(text))
	}
}

// telegramVisible measures a Telegram part as Telegram's limit does.
func telegramVisible(html string) int { return Len(HTMLToPlain(html)) }

// A part formatted longer than its Markdown (escaped mass mentions, HTML
// entities, a table laid out in a code block) still fits the platform's
// limit at every length of the streamed text, and a part once filled
// stays as it was (its message is not updated again).
func TestDraftPartsFitTheLimitAfterFormatting(t *testing.T) {
	answers := map[string]string{
		"mass mentions": strings.Repeat("@everyone look ", 300),
		"entities":      strings.Repeat("a & b < c > d ", 600),
		"table":         "| a | b |\n|---|---|\n" + strings.Repeat("| x | yyyyyyyyyyyyyyyyyyyyyyyyy |\n| zzzzzzzzzzzzzzzzzzzz | w |\n", 80),
	}
	platforms := []struct {
		name   string
		limit  int
		format func(string) string
		size   func(string) int
	}{
		{"discord", DiscordLimit, ToDiscord, nil},
		{"slack", 3900, ToSlackMrkdwn, nil},
		{"telegram", 4096, ToTelegramHTML, telegramVisible},
	}
	for _, pl := range platforms {
		size := pl.size
		if size == nil {
			size = Len
		}
		for name, md := range answers {
			t.Run(pl.name+"/"+name, func(t *testing.T) {
				var filled []string // the parts before the last, at the shorter text
				for n := 100; n <= len(md); n += 41 {
					parts := Draft(md[:n], pl.limit, pl.format, pl.size)
					for i, p := range parts {
						if got := size(p.Part); got > pl.limit {
							t.Fatalf("at %d bytes, part %d is %d long, over the limit of %d", n, i, got, pl.limit)
						}
						if i < len(filled) && p.Raw != filled[i] {
							t.Fatalf("at %d bytes the filled part %d changed", n, i)
						}
					}
					filled = filled[:0]
					for _, p := range parts[:max(len(parts)-1, 0)] {
						filled = append(filled, p.Raw)
					}
				}
			})
		}
	}
}
