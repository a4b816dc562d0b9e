package textfmt

import (
	"fmt"
	"runtime/metrics"
	"strings"
	"testing"
)

// adversarial are inputs built to make a scanner look far ahead for a
// closer that never comes, again and again: each is repeated to the
// wanted size.
var adversarial = map[string]string{
	"brackets":   "[",
	"angles":     "<",
	"link-open":  "[a](",
	"link-paren": "[a](b_(c)",
	"stars":      "*a ",
	"unders":     "_a ",
	"doubles":    "**a ",
	"tildes":     "~~a ",
	"nested":     "*_",
	"backticks":  "`",
	"ticks-grow": "", // runs of 1, 2, 3, ... backticks
	"link-nest":  "", // [[[...x](http://a)](http://a)...
	"quotes":     "> q\nx\n",
	"fences":     "```\nx\n",
	"escapes":    "\\",
	"amps":       "&",
	"slack-refs": "<@U1|",
	"html-tags":  "<b>",
	// One table of many rows; many small tables whose long header pads
	// every row; one table of many wide columns and rows of empty cells.
	"table-rows": "|a|b|\n|-|-|\n",
	"table-many": "| " + strings.Repeat("x", 80) + " |\n|--:|\n" + strings.Repeat("|a|\n", 20) + "\n",
	"table-wide": "",
}

func adversarialInput(name string, n int) string {
	if name == "link-nest" {
		k := n / 12
		return strings.Repeat("[", k) + "x" + strings.Repeat("](http://a)", k)
	}
	if name == "ticks-grow" {
		var b strings.Builder
		for k := 1; b.Len() < n; k++ {
			b.WriteString(strings.Repeat("`", k) + "a")
		}
		return b.String()[:n]
	}
	if name == "table-wide" {
		var b strings.Builder
		b.WriteString("|" + strings.Repeat(strings.Repeat("x", 80)+"|", 100) + "\n|" + strings.Repeat("--:|", 100) + "\n")
		for b.Len() < n {
			b.WriteString(strings.Repeat("|", 101) + "\n")
		}
		return b.String()[:n]
	}
	unit := adversarial[name]
	return strings.Repeat(unit, n/len(unit)+1)[:n]
}

var formatters = map[string]func(string) string{
	"telegram": ToTelegramHTML,
	"slack":    ToSlackMrkdwn,
	"discord":  ToDiscord,
	"plain":    ToPlain,
	"fromslack": func(s string) string {
		return FromSlack(s, func(id string) string { return id })
	},
	"htmltoplain": HTMLToPlain,
	"splithtml":   func(s string) string { return strings.Join(SplitHTML(s, 4096), "") },
	"splitmd":     func(s string) string { return strings.Join(SplitMarkdown(s, 2000), "") },
	"splitslack":  func(s string) string { return strings.Join(SplitSlackMrkdwn(s, 4000), "") },
	"close":       CloseMarkdown,
}

// BenchmarkAdversarial formats each adversarial input of 64 KB with each
// formatter (go test -bench Adversarial ./channels/textfmt/).
func BenchmarkAdversarial(b *testing.B) {
	for _, f := range []string{"telegram", "slack", "discord", "plain", "fromslack", "htmltoplain", "splithtml", "splitmd", "splitslack", "close"} {
		for name := range adversarial {
			in := adversarialInput(name, 64<<10)
			b.Run(fmt.Sprintf("%s/%s", f, name), func(b *testing.B) {
				for b.Loop() {
					formatters[f](in)
				}
			})
		}
	}
}

// Rendering Markdown is linear: on every adversarial input the steps a
// rendering takes grow with its size, a few per byte (64k "[" took 2.8 s
// and 200k 111 s when each opener scanned to the end for its closer).
func TestRenderingIsLinear(t *testing.T) {
	renderers := map[string]renderer{"telegram": htmlRenderer{}, "slack": &mrkdwnRenderer{}, "plain": plainRenderer{}}
	for name := range adversarial {
		for rn, r := range renderers {
			const n = 16 << 10
			_, small := renderWork(adversarialInput(name, n), r)
			_, big := renderWork(adversarialInput(name, 8*n), r)
			if big > 24*8*n || big > 10*small+1000 {
				t.Errorf("%s/%s: %d steps for %d bytes, %d for %d; want a few per byte, growing linearly", rn, name, small, n, big, 8*n)
			}
		}
	}
}

// Nesting past maxNest is shown as text, so its depth does not multiply
// the work.
func TestDeepNestingIsText(t *testing.T) {
	md := strings.Repeat("[", 40) + "x" + strings.Repeat("](https://a.example)", 40)
	out := ToTelegramHTML(md)
	if n := strings.Count(out, "<a href"); n != maxNest {
		t.Fatalf("%d links rendered; want %d, the deeper ones as text:\n%s", n, maxNest, out)
	}
	if strings.Count(out, "<a href") != strings.Count(out, "</a>") {
		t.Fatalf("unbalanced:\n%s", out)
	}
}

// allocated is the bytes the process allocated while fn ran.
func allocated(fn func()) uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	fn()
	metrics.Read(s)
	return s[0].Value.Uint64() - before
}

// pipelines are what the channels do with an answer (Format, Draft) and
// with a Slack message (FromSlack).
var pipelines = map[string]func(string) string{
	"telegram":  func(s string) string { return strings.Join(SplitHTML(ToTelegramHTML(s), 4096), "") },
	"slack":     func(s string) string { return strings.Join(SplitSlackMrkdwn(ToSlackMrkdwn(s), 4000), "") },
	"discord":   func(s string) string { return strings.Join(SplitMarkdown(ToDiscord(s), 2000), "") },
	"plain":     ToPlain,
	"draft":     func(s string) string { return fmt.Sprint(len(Draft(s, 4096, ToTelegramHTML, telegramVisible))) },
	"fromslack": formatters["fromslack"],
}

// Issue 25: what the channels do with text a user or a model wrote
// allocates a bounded amount: 1 MB of any adversarial input at most 64 MB
// (an answer is cut at MaxAnswerBytes first).
func TestFormattersAllocationBound(t *testing.T) {
	if testing.Short() {
		t.Skip("formats 1 MB inputs")
	}
	for f, format := range pipelines {
		for name := range adversarial {
			if raceEnabled && name != "brackets" && name != "quotes" && name != "html-tags" {
				continue
			}
			in := adversarialInput(name, 1<<20)
			if alloc := allocated(func() { format(in) }); alloc > 64<<20 {
				t.Errorf("%s/%s: 1 MB allocated %d MB; want at most 64", f, name, alloc>>20)
			}
		}
	}
}

// FuzzPipelines runs arbitrary text through what the channels do with
// it. Invariants: each allocates at most 64 times its input (plus 4 MB),
// and the Telegram parts are valid Telegram HTML.
func FuzzPipelines(f *testing.F) {
	for name := range adversarial {
		f.Add(adversarialInput(name, 256))
	}
	f.Add("**bold _it `code` it_** [link](https://a.example) > quote\n```go\nx\n```")
	f.Fuzz(func(t *testing.T, in string) {
		for name, p := range pipelines {
			if alloc := allocated(func() { p(in) }); alloc > 64*uint64(len(in))+4<<20 {
				t.Fatalf("%s: %d bytes allocated %d", name, len(in), alloc)
			}
		}
		for _, part := range SplitHTML(ToTelegramHTML(in), 4096) {
			if err := ValidateTelegramHTML(part); err != nil {
				t.Fatalf("invalid Telegram HTML %q: %v", part, err)
			}
		}
	})
}
