package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/textfmt"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

// fakeQueue is a queueStore holding es, every one listed whatever the
// query.
type fakeQueue struct {
	es []store.QueueEntry
}

func (f fakeQueue) QueueEntries(context.Context, store.QueueQuery) ([]store.QueueEntry, error) {
	return f.es, nil
}

func (f fakeQueue) QueueEntry(_ context.Context, id int64) (store.QueueEntry, bool, error) {
	for _, e := range f.es {
		if e.ID == id {
			return e, true, nil
		}
	}
	return store.QueueEntry{}, false, nil
}

func (f fakeQueue) QueueTally(context.Context, string, time.Time) (store.QueueTally, error) {
	t := store.QueueTally{ByStatus: map[string]int{}}
	for _, e := range f.es {
		t.ByStatus[e.Status]++
	}
	return t, nil
}

func (f fakeQueue) ReplyForRequest(context.Context, int64, core.ConversationKey) (*core.Reply, error) {
	return nil, nil
}

// TestQueueOutputNeutralisesTerminalEscapes: what users wrote (a name, a
// file's name, a message) and what a provider answered (an error) cannot
// drive the operator's terminal: no control character, bidirectional
// override or stray byte reaches it, in the list, in show or in JSON.
func TestQueueOutputNeutralisesTerminalEscapes(t *testing.T) {
	now := time.Now()
	conv := core.ConversationKey{Channel: "telegram", Chat: "42", Thread: "t\x1b]0;owned\x07"}
	evil := "Mallory\x1b[2J\x1b]0;pwned\x07\u009b31m\u202egnp.exe\r\x7f\xff\tTab"
	es := []store.QueueEntry{{
		ID: 7, Kind: core.EventMessage, Conversation: conv, DedupeKey: "telegram:m:1\x1b[1m", Status: core.StatusFailed,
		CreatedAt: now, UpdatedAt: now, LastError: "provider said \x1b[31mno\x1b[0m\r\nretry", Attempts: 1,
		Message: &core.Inbound{UserID: "42", UserName: evil, Text: "hi\x1b[8m", Context: "q\u009b", Origin: "plugin:\x1b[5m",
			Files: []core.InboundFile{{Kind: core.MediaDocument, Name: "a\x1b[1mb.pdf", MIME: "application/\x1b[7mpdf"}}},
	}, {
		ID: 8, Kind: core.EventReaction, Conversation: conv, Status: core.StatusQueued, CreatedAt: now, UpdatedAt: now,
		Reaction: &core.Reaction{UserID: "u\x1b[1m", Emoji: "\x1b[5m👍", MessageID: "9\u202e"},
	}, {
		ID: 9, Kind: core.EventScheduled, Conversation: conv, Status: core.StatusQueued, CreatedAt: now, UpdatedAt: now,
		Firing: &core.Firing{ScheduleID: 3, Source: "user\x1b[1m", Creator: "c\x1b[1m", Plugin: "p\x1b[1m", Action: "a\x07",
			Args: map[string]string{"k\x1b[1m": "v"}, Prompt: "go\x1b[1m"},
	}}
	db := fakeQueue{es: es}
	outputs := map[string]string{}
	for _, tc := range []struct {
		name string
		run  func(out *bytes.Buffer) error
	}{
		{"list", func(out *bytes.Buffer) error {
			return runQueueList(t.Context(), db, now, queueArgs{status: "all", limit: 50}, out)
		}},
		{"list --json", func(out *bytes.Buffer) error {
			return runQueueList(t.Context(), db, now, queueArgs{status: "all", limit: 50, json: true}, out)
		}},
		{"show message", func(out *bytes.Buffer) error { return runQueueShow(t.Context(), db, now, queueArgs{show: 7}, out) }},
		{"show reaction", func(out *bytes.Buffer) error { return runQueueShow(t.Context(), db, now, queueArgs{show: 8}, out) }},
		{"show firing", func(out *bytes.Buffer) error { return runQueueShow(t.Context(), db, now, queueArgs{show: 9}, out) }},
		{"show --json", func(out *bytes.Buffer) error {
			return runQueueShow(t.Context(), db, now, queueArgs{show: 7, json: true}, out)
		}},
	} {
		var out bytes.Buffer
		if err := tc.run(&out); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		s := out.String()
		outputs[tc.name] = s
		for i, r := range strings.ReplaceAll(s, "\n", "") {
			if r == '\uFFFD' || (r < 0x20) || (r >= 0x7f && r <= 0x9f) || r == '\u202e' || r == '\u2028' {
				t.Errorf("%s prints %U at byte %d:\n%q", tc.name, r, i, s)
				break
			}
		}
	}
	// What was neutralised is still shown, as an escape.
	for name, want := range map[string][]string{
		"list":          {`Mallory\x1b[2J\x1b]0;pwned\x07\u009b31m\u202egnp.exe\x0d\x7f\xff Tab`, `provider said \x1b[31mno\x1b[0m ⏎ retry`, `telegram:42:t\x1b]0;owned\x07`},
		"show message":  {`a\x1b[1mb.pdf (document, application/\x1b[7mpdf)`, `"hi\x1b[8m"`, `plugin:\x1b[5m`, `telegram:m:1\x1b[1m`},
		"show reaction": {`removed \x1b[5m👍 on message 9\u202e`},
		"show firing":   {`p\x1b[1m.a\x07 (arguments: k\x1b[1m)`, `c\x1b[1m`},
	} {
		for _, w := range want {
			if !strings.Contains(outputs[name], w) {
				t.Errorf("%s: want %s in\n%s", name, w, outputs[name])
			}
		}
	}
	// The JSON says the same as what was stored.
	var item queueItemJSON
	if err := json.Unmarshal([]byte(outputs["show --json"]), &item); err != nil || item.UserName != strings.ToValidUTF8(evil, "\uFFFD") {
		t.Errorf("show --json read back: %q, %v", item.UserName, err)
	}
}

// TestQueueTableAlignsWideCharacters: a name in wide characters (two
// columns each on a terminal) does not push its row's later columns out
// of line with the others'.
func TestQueueTableAlignsWideCharacters(t *testing.T) {
	now := time.Now()
	conv := core.ConversationKey{Channel: "telegram", Chat: "42"}
	var es []store.QueueEntry
	for i, name := range []string{"bob", "山田太郎", "José", "Jose\u0301"} {
		es = append(es, store.QueueEntry{ID: int64(i + 1), Kind: core.EventMessage, Conversation: conv, Status: core.StatusQueued,
			CreatedAt: now, UpdatedAt: now, Message: &core.Inbound{UserID: "1", UserName: name}})
	}
	var out bytes.Buffer
	if err := runQueueList(t.Context(), fakeQueue{es: es}, now, queueArgs{status: core.StatusQueued, limit: 50}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")[1:] // after the counts
	col := -1
	for _, l := range lines {
		i := max(strings.Index(l, "STATUS"), strings.Index(l, "queued"))
		if i < 0 {
			t.Fatalf("no status in %q", l)
		}
		at := textfmt.DisplayWidth(l[:i])
		if col >= 0 && at != col {
			t.Fatalf("the STATUS column starts at column %d in one row and %d in another:\n%s", col, at, out.String())
		}
		col = at
	}
}
