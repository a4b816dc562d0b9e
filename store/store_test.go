package store

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
)

func openTest(t testing.TB, o Options) *DB {
	t.Helper()
	db, err := Open(context.Background(), t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func msgItem(conv core.ConversationKey, id, text string) core.QueueItem {
	in := core.Inbound{Conversation: conv, MessageID: id, Text: text}
	return core.QueueItem{Kind: core.EventMessage, Conversation: conv, DedupeKey: conv.Channel + ":m:" + id, Message: &in}
}

func TestQueueDedupe(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	conv := core.ConversationKey{Channel: "telegram", Chat: "1"}
	id1, dup, err := db.Enqueue(ctx, msgItem(conv, "10", "hi"))
	if err != nil || dup || id1 == 0 {
		t.Fatalf("first enqueue: id=%d dup=%v err=%v", id1, dup, err)
	}
	_, dup, err = db.Enqueue(ctx, msgItem(conv, "10", "hi again"))
	if err != nil || !dup {
		t.Fatalf("second enqueue of the same message id: dup=%v err=%v, want dup", dup, err)
	}
	if _, _, err := db.Enqueue(ctx, core.QueueItem{Kind: core.EventMessage}); core.ErrorKind(err) != core.KindInvalid {
		t.Fatalf("empty dedupe key: err=%v, want invalid", err)
	}
}

func TestClaimOrdersPerConversation(t *testing.T) {
	c := clock.NewFake(time.Unix(1_700_000_000, 0))
	db := openTest(t, Options{Now: c.Now})
	ctx := context.Background()
	a := core.ConversationKey{Channel: "console", Chat: "a"}
	b := core.ConversationKey{Channel: "console", Chat: "b"}
	for i, it := range []core.QueueItem{msgItem(a, "1", "a1"), msgItem(a, "2", "a2"), msgItem(b, "3", "b1")} {
		if _, _, err := db.Enqueue(ctx, it); err != nil {
			t.Fatalf("enqueue %d: %v", i, err)
		}
	}
	items, _, err := db.Claim(ctx, 10, c.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(items); got != "a1,b1" {
		t.Fatalf("first claim = %s, want a1,b1 (one head per conversation)", got)
	}
	if items, _, _ = db.Claim(ctx, 10, c.Now()); len(items) != 0 {
		t.Fatalf("claim while both conversations run = %s, want nothing", texts(items))
	}
	id, lease := items0(t, db, a)
	if err := db.Finish(ctx, id, lease, core.StatusDone, ""); err != nil {
		t.Fatal(err)
	}
	items, _, _ = db.Claim(ctx, 10, c.Now())
	if got := texts(items); got != "a2" {
		t.Fatalf("claim after a1 done = %s, want a2", got)
	}
}

// items0 returns the id and lease of the running item of conv.
func items0(t *testing.T, db *DB, conv core.ConversationKey) (int64, int64) {
	t.Helper()
	var id, lease int64
	if err := db.r.QueryRow(`SELECT id, lease FROM queue WHERE conversation = ? AND status = 'running'`, conv.String()).Scan(&id, &lease); err != nil {
		t.Fatal(err)
	}
	return id, lease
}

func texts(items []core.QueueItem) string {
	var s []string
	for _, it := range items {
		s = append(s, it.Message.Text)
	}
	return strings.Join(s, ",")
}

func TestClaimLimitAndRetryDelay(t *testing.T) {
	c := clock.NewFake(time.Unix(1_700_000_000, 0))
	db := openTest(t, Options{Now: c.Now})
	ctx := context.Background()
	for i := range 3 {
		conv := core.ConversationKey{Channel: "console", Chat: fmt.Sprint(i)}
		db.Enqueue(ctx, msgItem(conv, fmt.Sprint(i), fmt.Sprint("m", i)))
	}
	items, _, _ := db.Claim(ctx, 2, c.Now())
	if len(items) != 2 {
		t.Fatalf("claim 2 returned %d", len(items))
	}
	due := c.Now().Add(10 * time.Second)
	if err := db.Retry(ctx, items[0].ID, items[0].Lease, due, "boom"); err != nil {
		t.Fatal(err)
	}
	got, next, _ := db.Claim(ctx, 5, c.Now())
	if texts(got) != "m2" || !next.Equal(time.UnixMilli(due.UnixMilli())) {
		t.Fatalf("claim = %s next=%v; want m2 and next=%v", texts(got), next, due)
	}
	c.Advance(10 * time.Second)
	got, _, _ = db.Claim(ctx, 5, c.Now())
	if len(got) != 1 || got[0].ID != items[0].ID || got[0].Attempts != 1 {
		t.Fatalf("after the delay: %+v, want the retried item with 1 attempt", got)
	}
	st, attempts, lastErr, _ := db.QueueStatus(ctx, items[0].ID)
	if st != core.StatusRunning || attempts != 1 || lastErr != "boom" {
		t.Fatalf("status=%s attempts=%d err=%q", st, attempts, lastErr)
	}
}

// TestRestartTakesBackAndEdit: a restarted sole claimer takes back what
// the process before it left running, as an interruption.
func TestRestartTakesBackAndEdit(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conv := core.ConversationKey{Channel: "telegram", Chat: "5"}
	db.Enqueue(ctx, msgItem(conv, "1", "first"))
	db.Enqueue(ctx, msgItem(conv, "2", "second"))
	if ok, err := db.EditQueued(ctx, "telegram:m:2", "second, edited"); !ok || err != nil {
		t.Fatalf("edit queued: %v %v", ok, err)
	}
	items, _, _ := db.Claim(ctx, 1, time.Now())
	if ok, _ := db.EditQueued(ctx, "telegram:m:1", "too late"); ok {
		t.Fatal("edit of a running message was applied")
	}
	db.Close() // the crash
	db, err = Open(ctx, dir, Options{SoleClaimer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	again, _, _ := db.Claim(ctx, 5, time.Now())
	if len(again) != 1 || again[0].ID != items[0].ID || again[0].Message.Text != "first" || again[0].Attempts != 0 || again[0].Interruptions != 1 {
		t.Fatalf("after requeue claim = %+v", again)
	}
	db.Finish(ctx, again[0].ID, again[0].Lease, core.StatusDone, "")
	last, _, _ := db.Claim(ctx, 5, time.Now())
	if texts(last) != "second, edited" {
		t.Fatalf("edited text = %q", texts(last))
	}
	if err := db.Finish(ctx, last[0].ID, last[0].Lease, "bogus", ""); core.ErrorKind(err) != core.KindInvalid {
		t.Fatalf("finish with bad status: %v", err)
	}
}

// TestHistoryRowsIndependent: each history entry read back is the entry
// written, whatever the rows before it held (the rows are read into
// shared destinations; nothing of one row may show in the next).
func TestHistoryRowsIndependent(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	s, err := db.ActiveSession(ctx, core.ConversationKey{Channel: "console", Chat: "rows"})
	if err != nil {
		t.Fatal(err)
	}
	att := core.Attachment{Kind: core.MediaImage, MIME: "image/png", SHA256: strings.Repeat("a", 64)}
	msgs := []core.ChatMessage{
		{Role: core.RoleUser, Content: "look", Attachments: []core.Attachment{att}},
		{Role: core.RoleAssistant, ToolCalls: []core.ToolCall{{ID: "c1", Plugin: "calc", Action: "eval", Args: map[string]string{"x": "1"}}}},
		{Role: core.RoleTool, ToolCallID: "c1", Content: "1"},
		{Role: core.RoleAssistant, Content: "one"},
		{Role: core.RoleUser, Content: ""},
		{Role: core.RoleAssistant, Content: "again"},
	}
	if err := db.AppendMessages(ctx, s.ID, msgs); err != nil {
		t.Fatal(err)
	}
	h, err := db.History(ctx, s.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	h2, _, err := db.HistoryAndMemories(ctx, s.ID, 0, "someone")
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range [][]core.ChatMessage{h, h2} {
		if len(got) != len(msgs) {
			t.Fatalf("history has %d entries, want %d: %+v", len(got), len(msgs), got)
		}
		for i, m := range msgs {
			g := got[i]
			if g.Role != m.Role || g.Content != m.Content || g.ToolCallID != m.ToolCallID ||
				len(g.ToolCalls) != len(m.ToolCalls) || len(g.Attachments) != len(m.Attachments) {
				t.Errorf("entry %d = %+v, want %+v", i, g, m)
			}
		}
	}
}

func TestSessionsAndHistory(t *testing.T) {
	c := clock.NewFake(time.Unix(1_700_000_000, 0))
	db := openTest(t, Options{Now: c.Now, SessionTTL: time.Hour})
	ctx := context.Background()
	conv := core.ConversationKey{Channel: "console", Chat: "local"}
	s1, err := db.ActiveSession(ctx, conv)
	if err != nil {
		t.Fatal(err)
	}
	if s2, _ := db.ActiveSession(ctx, conv); s2.ID != s1.ID {
		t.Fatalf("second ActiveSession = %d, want %d", s2.ID, s1.ID)
	}
	msgs := []core.ChatMessage{
		{Role: core.RoleUser, Content: "2+2?"},
		{Role: core.RoleAssistant, ToolCalls: []core.ToolCall{{ID: "c1", Plugin: "calc", Action: "eval", Args: map[string]string{"x": "2+2"}}}},
		{Role: core.RoleTool, ToolCallID: "c1", Content: "4"},
		{Role: core.RoleAssistant, Content: "4"},
	}
	r := &core.Reply{RequestID: 7, SessionID: s1.ID, Conversation: conv, Text: "4", Parts: []string{"4"}, Model: "m", Usage: core.Usage{InputTokens: 10, OutputTokens: 2}}
	id, err := db.SaveReply(ctx, r, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if id2, _ := db.SaveReply(ctx, r, msgs); id2 != id {
		t.Fatalf("saving a second reply for one request = %d, want the first %d", id2, id)
	}
	h, err := db.History(ctx, s1.ID, 0)
	if err != nil || len(h) != 4 || h[0].Content != "2+2?" || h[1].ToolCalls[0].Args["x"] != "2+2" || h[2].ToolCallID != "c1" {
		t.Fatalf("history = %+v err=%v", h, err)
	}
	if h, _ := db.History(ctx, s1.ID, 2); len(h) != 2 || h[1].Content != "4" || h[0].Role != core.RoleTool {
		t.Fatalf("limited history = %+v", h)
	}
	s, _ := db.Session(ctx, s1.ID)
	if s.Usage.InputTokens != 10 || s.Usage.OutputTokens != 2 {
		t.Fatalf("session usage = %+v", s.Usage)
	}
	db.SetPins(ctx, s1.ID, "fake/big", "")
	fresh, err := db.NewSession(ctx, conv)
	if err != nil || fresh.ID == s1.ID || fresh.ModelPin != "fake/big" {
		t.Fatalf("new session = %+v err=%v", fresh, err)
	}
	if n, _ := db.MessageCount(ctx, fresh.ID); n != 0 {
		t.Fatalf("fresh session has %d messages", n)
	}
	c.Advance(2 * time.Hour)
	if expired, _ := db.ActiveSession(ctx, conv); expired.ID == fresh.ID {
		t.Fatal("session idle past the TTL was reused")
	}
}

func TestDeliveries(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	conv := core.ConversationKey{Channel: "telegram", Chat: "9"}
	s, _ := db.ActiveSession(ctx, conv)
	id, err := db.SaveReply(ctx, &core.Reply{RequestID: 1, SessionID: s.ID, Conversation: conv, Text: "ab", Parts: []string{"a", "b"}, Model: "x/y", TaskType: "chat"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.MarkSent(ctx, id, 0, "100"); err != nil {
		t.Fatal(err)
	}
	r, _ := db.ReplyForRequest(ctx, 1, conv)
	if r == nil || r.Sent[0] != "100" || r.Sent[1] != "" {
		t.Fatalf("reply = %+v", r)
	}
	db.MarkSent(ctx, id, 1, "101")
	if got, _ := db.ReplyByPlatformID(ctx, "telegram", "101"); got == nil || got.ID != id || got.Model != "x/y" || got.TaskType != "chat" {
		t.Fatalf("reply by platform id = %+v", got)
	}
	if got, _ := db.ReplyByPlatformID(ctx, "slack", "101"); got != nil {
		t.Fatal("a delivery was found under another channel")
	}
	if got, _ := db.ReplyForRequest(ctx, 99, conv); got != nil {
		t.Fatal("reply for an unknown request")
	}
	if got, _ := db.ReplyForRequest(ctx, 1, core.ConversationKey{Channel: "telegram", Chat: "10"}); got != nil {
		t.Fatal("a reply was returned for a request of another chat")
	}
	if got, _ := db.ReplyForRequest(ctx, 1, core.ConversationKey{Channel: "telegram", Chat: "9", Thread: "3"}); got != nil {
		t.Fatal("a reply was returned for a request of another thread")
	}
	if last, _ := db.LastReply(ctx, s.ID); last == nil || last.ID != id {
		t.Fatalf("last reply = %+v", last)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.w.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 0)`)
	db.Close()
	_, err = OpenFile(context.Background(), filepath.Join(dir, FileName), Options{})
	if err == nil || !strings.Contains(err.Error(), "newer") || !strings.Contains(err.Error(), "state.data_dir") || !strings.Contains(err.Error(), "opentalon restore FILE") {
		t.Fatalf("open of a newer database: %v", err)
	}
}

func TestReopenKeepsData(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	db, _ := Open(ctx, dir, Options{})
	conv := core.ConversationKey{Channel: "console", Chat: "x"}
	db.Enqueue(ctx, msgItem(conv, "1", "kept"))
	db.Close()
	db, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	items, _, _ := db.Claim(ctx, 1, time.Now())
	if texts(items) != "kept" {
		t.Fatalf("after reopen: %q", texts(items))
	}
}

// BenchmarkQueue measures submit → claim → done on the real SQLite file.
func BenchmarkQueue(b *testing.B) {
	db := openTest(b, Options{})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		conv := core.ConversationKey{Channel: "bench", Chat: fmt.Sprint(i % 50)}
		if _, _, err := db.Enqueue(ctx, msgItem(conv, fmt.Sprint(i), "hello")); err != nil {
			b.Fatal(err)
		}
		items, _, err := db.Claim(ctx, 1, time.Now())
		if err != nil || len(items) != 1 {
			b.Fatalf("claim: %v %d", err, len(items))
		}
		if err := db.Finish(ctx, items[0].ID, items[0].Lease, core.StatusDone, ""); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// BenchmarkClaimHeads measures one Claim with many queued rows: 2,000
// messages waiting in 200 conversations (the heads are read off the
// pending index; the cost must grow with the heads, not with every row).
func BenchmarkClaimHeads(b *testing.B) {
	db := openTest(b, Options{})
	ctx := context.Background()
	for i := range 2000 {
		conv := core.ConversationKey{Channel: "bench", Chat: fmt.Sprint(i % 200)}
		if _, _, err := db.Enqueue(ctx, msgItem(conv, fmt.Sprint(i), "hello")); err != nil {
			b.Fatal(err)
		}
	}
	// Claimed heads stay running: every later Claim finds none free.
	if items, _, err := db.Claim(ctx, 200, time.Now()); err != nil || len(items) != 200 {
		b.Fatalf("claim: %v %d", err, len(items))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := db.Claim(ctx, 4, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}

// The database file is private whatever the umask (it holds the
// conversations), and so are the WAL and shared-memory files SQLite makes
// beside it; creating it logs one line, not one per migration.
func TestOpenCreatesAPrivateFileAndLogsOneLine(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := t.TempDir()
	var logs bytes.Buffer
	db, err := Open(context.Background(), dir, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, _, err := db.Enqueue(context.Background(), msgItem(core.ConversationKey{Channel: "console", Chat: "x"}, "1", "hi")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{FileName, FileName + "-wal", FileName + "-shm"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %04o; want 0600", name, fi.Mode().Perm())
		}
	}
	if n := strings.Count(logs.String(), "\n"); n != 1 || !strings.Contains(logs.String(), "created the database") {
		t.Errorf("opening a new database logged %d lines; want one:\n%s", n, logs.String())
	}
}
