package provider

import (
	"encoding/json"
	"testing"
)

// TestContentTextIsTheDecoders: a message content reads as json.Unmarshal
// reads it, whether or not it takes the way around the decoder (a string
// with no escape).
func TestContentTextIsTheDecoders(t *testing.T) {
	tests := []string{
		`""`,
		`"plain text, digits 123 and punctuation!?"`,
		`"héllo wörld — ünïcode 😀"`,
		`"line\nbreak"`,
		`"tab\tand \"quotes\" and \\ backslash"`,
		`"\u00e9 escaped"`,
		`"\ud83d\ude00 surrogate pair"`,
		"\"invalid \xff\xfe utf-8\"",
		"\"truncated \xe2\x82 rune\"",
		`"</script> & <b>"`,
	}
	for _, raw := range tests {
		t.Run(raw, func(t *testing.T) {
			var want string
			if err := json.Unmarshal([]byte(raw), &want); err != nil {
				t.Fatalf("json.Unmarshal(%s): %v", raw, err)
			}
			got, err := contentText(json.RawMessage(raw))
			if err != nil {
				t.Fatalf("contentText(%s): %v", raw, err)
			}
			if got != want {
				t.Errorf("contentText(%s) = %q, json.Unmarshal gives %q", raw, got, want)
			}
		})
	}
}

// TestContentTextParts: null, nothing and an array of parts.
func TestContentTextParts(t *testing.T) {
	for raw, want := range map[string]string{
		``:     "",
		`null`: "",
		`[{"type":"text","text":"a"},{"text":"b"}]`: "ab",
	} {
		if got, err := contentText(json.RawMessage(raw)); err != nil || got != want {
			t.Errorf("contentText(%s) = %q, %v; want %q", raw, got, err, want)
		}
	}
	if _, err := contentText(json.RawMessage(`42`)); err == nil {
		t.Error("contentText(42): want an error")
	}
}

// FuzzContentTextIsTheDecoders: any valid JSON string, quoted from
// arbitrary bytes (escapes, surrogates, invalid UTF-8, control bytes),
// reads as json.Unmarshal reads it.
func FuzzContentTextIsTheDecoders(f *testing.F) {
	for _, s := range []string{"", "plain", `\u00e9`, `\ud83d\ude00`, `\ud83d`, `\/`, "\xff\xfe", "\xe2\x82", "\xed\xa0\x80", "é😀", `a\"b`, `\\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		raw := []byte(`"` + body + `"`)
		if !json.Valid(raw) {
			return // never reaches contentText: the chunk's decode fails first
		}
		var want string
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatalf("json.Unmarshal(%q): %v", raw, err)
		}
		got, err := contentText(json.RawMessage(raw))
		if err != nil || got != want {
			t.Errorf("contentText(%q) = %q, %v; json.Unmarshal gives %q", raw, got, err, want)
		}
	})
}
