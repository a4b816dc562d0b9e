package textfmt

import (
	"fmt"
	"strings"
	"testing"
)

func TestToDiscordEscapesMassMentionsOutsideCode(t *testing.T) {
	const z = "\u200b"
	tests := []struct{ in, want string }{
		{"hello @everyone and @here!", "hello @" + z + "everyone and @" + z + "here!"},
		{"@Everyone @HERE", "@" + z + "Everyone @" + z + "HERE"},
		{"mail me@example.com, ping <@123>", "mail me@example.com, ping <@123>"},
		{"run `echo @everyone` now @here", "run `echo @everyone` now @" + z + "here"},
		{"``a ` @here`` @here", "``a ` @here`` @" + z + "here"},
		{"an unclosed ` @here", "an unclosed ` @" + z + "here"},
		{"```sh\nwall @everyone\n```\n@everyone", "```sh\nwall @everyone\n```\n@" + z + "everyone"},
		{"~~~\n@here\n~~~", "~~~\n@here\n~~~"},
		{"no mentions **bold**", "no mentions **bold**"},
	}
	for _, tt := range tests {
		if got := ToDiscord(tt.in); got != tt.want {
			t.Errorf("ToDiscord(%q)\n = %q\nwant %q", tt.in, got, tt.want)
		}
	}
}

// fenceBalanced reports whether every fence a part opens it closes.
func fenceBalanced(part string) bool {
	open := false
	for _, line := range strings.Split(part, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			open = !open
		}
	}
	return !open
}

func TestDiscordSplitKeepsFencesBalanced(t *testing.T) {
	var b strings.Builder
	b.WriteString("Here is the program you asked for, @everyone:\n\n```go\n")
	for i := 0; b.Len() < 5000; i++ {
		fmt.Fprintf(&b, "fmt.Println(%d) // @here stays in code\n", i)
	}
	b.WriteString("```\n\nThat is all.")
	parts := SplitMarkdown(ToDiscord(b.String()), DiscordLimit)
	if len(parts) < 3 {
		t.Fatalf("a 5,000-character reply gave %d parts", len(parts))
	}
	for i, p := range parts {
		if Len(p) > DiscordLimit {
			t.Errorf("part %d is %d long", i, Len(p))
		}
		if !fenceBalanced(p) {
			t.Errorf("part %d has unbalanced fences:\n%s", i, p)
		}
		if i > 0 && strings.Contains(p, "fmt.Println") && !strings.HasPrefix(p, "```go\n") {
			t.Errorf("part %d continues the code without reopening the go fence", i)
		}
	}
	if !strings.Contains(parts[0], "@\u200beveryone") || !strings.Contains(parts[1], "// @here stays") {
		t.Errorf("escaping outside code / keeping code: %q ... %q", parts[0][:80], parts[1][:80])
	}
}

// A code block cut across messages closes right after its last line of
// code in each part: the fence used to follow an empty line, which
// Discord and Slack show as a blank last line of the block (and
// Telegram's </pre> a line break).
func TestSplitClosesFenceRightAfterTheCode(t *testing.T) {
	var code strings.Builder
	code.WriteString("```go\n")
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&code, "fmt.Println(%d)\n", i)
	}
	closed := code.String() + "```"
	tests := []struct {
		name  string
		parts []string
	}{
		{"discord", SplitMarkdown(ToDiscord(closed), DiscordLimit)},
		{"discord/unclosed", SplitMarkdown(ToDiscord(code.String()), DiscordLimit)},
		{"slack", SplitSlackMrkdwn(ToSlackMrkdwn(closed), 1000)},
		{"slack/unclosed", SplitSlackMrkdwn(ToSlackMrkdwn(code.String()), 1000)},
		{"short unclosed", SplitMarkdown("```\ncode\n", DiscordLimit)},
		{"telegram", SplitHTML(ToTelegramHTML(closed), 1000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.parts) < 2 && tt.name != "short unclosed" {
				t.Fatalf("%d parts; the test wants a cut code block", len(tt.parts))
			}
			for i, p := range tt.parts {
				if tt.name == "telegram" {
					if !strings.HasSuffix(p, "</code></pre>") || strings.HasSuffix(p, "\n</code></pre>") {
						t.Errorf("part %d does not end right after its code: …%q", i, p[len(p)-30:])
					}
					continue
				}
				if !strings.HasSuffix(p, "```") || !fenceBalanced(p) {
					t.Fatalf("part %d does not end with its closing fence: %q", i, p)
				}
				if strings.HasSuffix(p, "\n\n```") {
					t.Errorf("part %d has an empty line before its closing fence: …%q", i, p[len(p)-30:])
				}
			}
		})
	}
}
