package guard

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/opentalon/opentalon/core"
)

// FuzzCheck runs arbitrary plugin output through the post-execution
// guard. Invariants: the output is rejected only when it is not text;
// otherwise what the LLM gets is valid UTF-8 without NUL, C0, bidi
// override or tag characters, holds exactly one [plugin_output] block,
// no forbidden shape survives in the normalized view of the block, and
// a benign corpus text comes through unchanged, and the check allocates
// at most 64 times the output (plus 4 MB). The seed corpus is
// testdata/fuzz/FuzzCheck plus testdata/corpus.json.
func FuzzCheck(f *testing.F) {
	c := loadCorpus(f)
	benign := map[string]bool{}
	for _, p := range c.Payloads {
		f.Add(p.Text)
	}
	for _, b := range c.Benign {
		f.Add(b.Text)
		benign[b.Text] = true
	}
	s, err := NewSanitizer(nil)
	if err != nil {
		f.Fatal(err)
	}
	p := New(fakeResolver{}, s, nil)
	call := core.ToolCall{ID: "c", Plugin: "p", Action: "a"}
	f.Fuzz(func(t *testing.T, content string) {
		var res core.ToolResult
		if alloc := allocated(func() { res = p.Check(call, core.ToolResult{CallID: "c", Content: content}, 1<<20) }); alloc > 64*uint64(len(content))+4<<20 {
			t.Fatalf("%d bytes of output allocated %d", len(content), alloc)
		}
		textErr := CheckText(content)
		if res.Error == GenericError {
			if textErr == nil {
				t.Fatalf("text output %q was rejected", content)
			}
			return
		}
		if textErr != nil {
			t.Fatalf("output that is not text (%v) was accepted: %+v", textErr, res)
		}
		if res.Error != "" {
			t.Fatalf("unexpected error %q", res.Error)
		}
		out := ForLLM(res)
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 reaches the LLM: %q", out)
		}
		if i := strings.IndexFunc(out, func(r rune) bool { return r == 0 || stripped(r) }); i >= 0 {
			t.Fatalf("a control, bidi or tag character at %d reaches the LLM: %q", i, out)
		}
		if strings.Count(out, OpenMarker) != 1 || strings.Count(out, CloseMarker) != 1 {
			t.Fatalf("want exactly one block: %q", out)
		}
		inner, ok := Unwrap(res.Content)
		if !ok {
			t.Fatalf("not one block: %q", out)
		}
		if s.Matches(inner) {
			t.Fatalf("a forbidden shape survives in %q (from %q)", inner, content)
		}
		if benign[content] && inner != content {
			t.Fatalf("benign text changed: %q → %q", content, inner)
		}
	})
}
