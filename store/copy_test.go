package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

// TestCopySQLiteIntoPostgres: everything a single machine kept moves to
// PostgreSQL with its ids; new ids never repeat old ones (pruned ones
// included); a re-run copies nothing twice.
func TestCopySQLiteIntoPostgres(t *testing.T) {
	ctx := context.Background()
	src := openTest(t, Options{})
	conv := core.ConversationKey{Channel: "telegram", Chat: "42"}
	// A few requests answered, then pruned from the queue (their ids
	// stay referred to by replies and history).
	var lastReq int64
	sess, _ := src.ActiveSession(ctx, conv)
	for i := range 3 {
		id, _, err := src.Enqueue(ctx, msgItem(conv, string(rune('a'+i)), "q"))
		if err != nil {
			t.Fatal(err)
		}
		items, _, _ := src.Claim(ctx, 1, time.Now())
		if _, err := src.SaveReply(ctx, &core.Reply{RequestID: id, SessionID: sess.ID, Conversation: conv, Text: "answer", Parts: []string{"answer"}, Model: "fake/big", TaskType: "chat"},
			[]core.ChatMessage{{Role: core.RoleUser, Content: "question with a \x00 NUL"}, {Role: core.RoleAssistant, Content: "answer"}}); err != nil {
			t.Fatal(err)
		}
		if err := src.Finish(ctx, id, items[0].Lease, core.StatusDone, ""); err != nil {
			t.Fatal(err)
		}
		lastReq = id
	}
	// A database written before history was cleaned on the way in holds
	// the NUL bytes PostgreSQL refuses: the copy repairs them.
	if _, err := src.w.DB.Exec(`UPDATE messages SET content = ? WHERE role = 'user'`, "question with a \x00 NUL"); err != nil {
		t.Fatal(err)
	}
	if _, err := src.w.DB.Exec(`DELETE FROM queue`); err != nil {
		t.Fatal(err)
	}
	running, _, _ := src.Enqueue(ctx, msgItem(conv, "r", "was running at the crash"))
	src.Claim(ctx, 1, time.Now())
	mem, _ := src.SaveMemory(ctx, core.Memory{Owner: "telegram:42", Content: "Prefers answers in French", Tags: []string{"lang"}})
	src.UpdateAffinity(ctx, "chat", "fake/big", func(a core.Affinity) core.Affinity { a.Positives, a.Pos = 5, 4.5; return a })
	src.PluginStateSet(ctx, "weather", "bin", "\x00\xff\x01")
	src.LuaKVSet(ctx, "greet.lua", "k", "v\x00")
	src.RequestPairing(ctx, core.Pairing{Channel: "telegram", UserID: "42", Code: "ABC123"})
	src.AddSchedule(ctx, core.Schedule{Source: "chat", Interval: time.Hour, Prompt: "ping", Conversation: conv})
	src.AddUsage(ctx, core.UsageRecord{Conversation: conv.String(), Model: "fake/big", InputTokens: 10, CostUSD: 0.5})

	dst := openPG(t, Options{})
	report, err := dst.CopyFrom(ctx, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	repaired := 0
	for _, c := range report {
		if c.Copied != c.Rows {
			t.Errorf("%s: %d of %d rows copied", c.Table, c.Copied, c.Rows)
		}
		repaired += c.Repaired
	}
	if repaired != 3 {
		t.Errorf("%d texts repaired; want the 3 questions with a NUL byte", repaired)
	}
	// History, memories, affinity, plugin state and Lua KV are there.
	h, err := dst.History(ctx, sess.ID, 10)
	if err != nil || len(h) != 6 || h[0].Content != "question with a  NUL" {
		t.Fatalf("history on PostgreSQL = %+v, %v", h, err)
	}
	if ms, err := dst.Memories(ctx, core.MemoryQuery{Owner: "telegram:42", Text: "french"}); err != nil || len(ms) != 1 || ms[0].ID != mem {
		t.Fatalf("memory search on PostgreSQL = %+v, %v", ms, err)
	}
	if as, _ := dst.Affinities(ctx); len(as) != 1 || as[0].Positives != 5 {
		t.Fatalf("affinity = %+v", as)
	}
	if v, _, _ := dst.PluginStateGet(ctx, "weather", "bin"); v != "\x00\xff\x01" {
		t.Fatalf("plugin state = %q", v)
	}
	if n, b, _ := dst.PluginStateUsage(ctx, "weather"); n != 1 || b != 6 {
		t.Fatalf("plugin state usage = %d keys %d bytes; want it rebuilt (1, 6)", n, b)
	}
	if v, _, _ := dst.LuaKVGet(ctx, "greet.lua", "k"); v != "v\x00" {
		t.Fatalf("lua kv = %q", v)
	}
	// The item the source left running is taken back at once.
	items, _, err := dst.Claim(ctx, 5, time.Now())
	if err != nil || len(items) != 1 || items[0].ID != running || items[0].Interruptions != 1 {
		t.Fatalf("claim on PostgreSQL = %+v, %v; want the interrupted item", items, err)
	}
	// New ids go past every old one.
	id, _, err := dst.Enqueue(ctx, msgItem(conv, "new", "new"))
	if err != nil || id <= running || id <= lastReq {
		t.Fatalf("a new queue id = %d (%v); want past %d", id, err, running)
	}
	s2, err := dst.NewSession(ctx, conv)
	if err != nil || s2.ID <= sess.ID {
		t.Fatalf("a new session id = %d (%v); want past %d", s2.ID, err, sess.ID)
	}
	m2, _ := dst.SaveMemory(ctx, core.Memory{Owner: "x", Content: "y"})
	if m2 <= mem {
		t.Fatalf("a new memory id = %d; want past %d", m2, mem)
	}
	// Again: nothing new to copy, nothing changed.
	report, err = dst.CopyFrom(ctx, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range report {
		if c.Copied != 0 {
			t.Errorf("re-run copied %d rows of %s", c.Copied, c.Table)
		}
	}
	if n, b, _ := dst.PluginStateUsage(ctx, "weather"); n != 1 || b != 6 {
		t.Fatalf("plugin state usage after a re-run = %d keys %d bytes", n, b)
	}
}

// TestCopyMediaBytesIntoPostgres: the bytes of the media files, which
// SQLite keeps only in its media directory, reach media_bytes, so a
// replica with an empty data directory reads them; a row whose file is
// gone is skipped and counted; a re-run does not read a file again.
func TestCopyMediaBytesIntoPostgres(t *testing.T) {
	ctx := context.Background()
	src := openTest(t, Options{})
	photo := make([]byte, 3<<20)
	rand.Read(photo)
	kept, err := src.StoreMedia(ctx, "telegram:photo-1", "image/jpeg", bytes.NewReader(photo), int64(len(photo)))
	if err != nil {
		t.Fatal(err)
	}
	chart, err := src.PutMedia(ctx, []byte("a chart the bot made"), "image/png")
	if err != nil {
		t.Fatal(err)
	}
	gone, err := src.StoreMedia(ctx, "telegram:doc-1", "application/pdf", bytes.NewReader([]byte("%PDF-1.7 a document")), 1000)
	if err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(filepath.Dir(src.Path()), MediaDir)
	if err := os.Remove(filepath.Join(local, gone.SHA256)); err != nil {
		t.Fatal(err)
	}

	dst := openPG(t, Options{}) // its data directory is empty
	var told []CopiedTable
	report, err := dst.CopyFrom(ctx, src, func(c CopiedTable) { told = append(told, c) })
	if err != nil {
		t.Fatal(err)
	}
	want := CopiedTable{Table: MediaBytesTable, Rows: 2, Copied: 2, Missing: 1}
	if got := report[len(report)-1]; got != want {
		t.Fatalf("media bytes copied: %+v; want %+v", got, want)
	}
	if got := told[len(told)-1]; got != want {
		t.Fatalf("done was told %+v; want %+v", got, want)
	}
	if got, err := dst.ReadMedia(ctx, kept.SHA256); err != nil || !bytes.Equal(got, photo) {
		t.Fatalf("ReadMedia of the photo on PostgreSQL: %d bytes, %v; want the photo's %d", len(got), err, len(photo))
	}
	if got, err := dst.ReadMedia(ctx, chart); err != nil || string(got) != "a chart the bot made" {
		t.Fatalf("ReadMedia of the chart on PostgreSQL = %q, %v", got, err)
	}
	if f, ok, err := dst.MediaBySource(ctx, "telegram:photo-1"); err != nil || !ok || f.SHA256 != kept.SHA256 {
		t.Fatalf("MediaBySource of the photo on PostgreSQL = %+v %v %v; want it found", f, ok, err)
	}
	if _, err := dst.ReadMedia(ctx, gone.SHA256); core.ErrorKind(err) != core.KindNotFound {
		t.Fatalf("ReadMedia of the file gone before the copy: %v; want not found", err)
	}

	// Again, the photo's file gone meanwhile: the target has its bytes,
	// nothing is read or copied again.
	if err := os.Remove(filepath.Join(local, kept.SHA256)); err != nil {
		t.Fatal(err)
	}
	report, err = dst.CopyFrom(ctx, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := report[len(report)-1], (CopiedTable{Table: MediaBytesTable, Rows: 2, Missing: 1}); got != want {
		t.Fatalf("media bytes on a re-run: %+v; want %+v", got, want)
	}
}

// TestRenameConversation: a conversation's sessions move to another; when
// that one has an active session already, the moved ones join it ended,
// so it keeps its own.
func TestRenameConversation(t *testing.T) {
	ctx := context.Background()
	db := openPG(t, Options{})
	from := core.ConversationKey{Channel: "console", Chat: "local"}
	to := core.ConversationKey{Channel: "console", Chat: "local", Thread: "host-a"}
	old, err := db.ActiveSession(ctx, from)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := db.RenameConversation(ctx, from.String(), to.String()); err != nil || n != 1 {
		t.Fatalf("rename: %d, %v", n, err)
	}
	got, err := db.ActiveSession(ctx, to)
	if err != nil || got.ID != old.ID {
		t.Fatalf("the active session of %s is %d (%v); want the moved %d", to, got.ID, err, old.ID)
	}
	// Again, with to active already: from's new session moves as ended.
	again, err := db.ActiveSession(ctx, from)
	if err != nil || again.ID == old.ID {
		t.Fatalf("a new session of %s: %d, %v", from, again.ID, err)
	}
	if n, err := db.RenameConversation(ctx, from.String(), to.String()); err != nil || n != 1 {
		t.Fatalf("rename onto an active session: %d, %v", n, err)
	}
	if got, err := db.ActiveSession(ctx, to); err != nil || got.ID != old.ID {
		t.Fatalf("after the second rename %s's active session is %d (%v); want %d still", to, got.ID, err, old.ID)
	}
}

// TestCopyRefusesDivergedDatabases: after a copy, gateways wrote to both
// databases (one went back to SQLite for a while), so both gave the next
// ids to different rows. A re-run used to skip the SQLite rows as "there
// already" and report success; it refuses now, copying nothing, and a
// re-run that finds only its own rows again still copies what is new.
func TestCopyRefusesDivergedDatabases(t *testing.T) {
	ctx := context.Background()
	src := openTest(t, Options{})
	dst := openPG(t, Options{})
	conv := core.ConversationKey{Channel: "telegram", Chat: "42"}
	if _, _, err := src.Enqueue(ctx, msgItem(conv, "a", "before the copy")); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.CopyFrom(ctx, src, nil); err != nil {
		t.Fatal(err)
	}
	// Only SQLite goes on: a re-run copies the new row.
	if _, _, err := src.Enqueue(ctx, msgItem(conv, "b", "on SQLite only")); err != nil {
		t.Fatal(err)
	}
	report, err := dst.CopyFrom(ctx, src, nil)
	if err != nil {
		t.Fatalf("a re-run with rows new to SQLite only: %v", err)
	}
	for _, c := range report {
		if c.Table == "queue" && c.Copied != 1 {
			t.Fatalf("queue: %d of %d rows copied; want the new one", c.Copied, c.Rows)
		}
	}
	// Both go on: the same next id names two different requests.
	sid, _, err := src.Enqueue(ctx, msgItem(conv, "c", "on SQLite"))
	if err != nil {
		t.Fatal(err)
	}
	did, _, err := dst.Enqueue(ctx, msgItem(conv, "d", "on PostgreSQL"))
	if err != nil {
		t.Fatal(err)
	}
	if sid != did {
		t.Fatalf("ids %d and %d: the set-up needs the same next id on both", sid, did)
	}
	// Made in the same millisecond they would look alike: they were not.
	if _, err := src.w.DB.ExecContext(ctx, `UPDATE queue SET created_at = created_at - 1 WHERE id = ?`, sid); err != nil {
		t.Fatal(err)
	}
	report, err = dst.CopyFrom(ctx, src, nil)
	var clash CopyClashError
	if !errors.As(err, &clash) || !strings.Contains(err.Error(), "queue") || !strings.Contains(err.Error(), "nothing was copied") {
		t.Fatalf("a re-run after both diverged: %v; want a CopyClashError naming the queue", err)
	}
	if len(report) != 0 {
		t.Fatalf("a refused copy reported %+v; want nothing copied", report)
	}
}

// TestCopyRerunAfterCompactionOnSQLite: after a first copy the gateway
// went on on SQLite alone (the documented way: run it again to copy what
// is new) and compacted a conversation's history. The summary takes the
// id of the newest message it replaces, with a creation time of its own:
// the same id, two times, yet nobody wrote to PostgreSQL. That re-run is
// no divergence and copies what is new.
func TestCopyRerunAfterCompactionOnSQLite(t *testing.T) {
	ctx := context.Background()
	src := openTest(t, Options{})
	dst := openPG(t, Options{})
	conv := core.ConversationKey{Channel: "telegram", Chat: "42"}
	s, err := src.ActiveSession(ctx, conv)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []core.ChatMessage
	for _, c := range []string{"u1", "a1", "u2", "a2", "u3", "a3"} {
		msgs = append(msgs, core.ChatMessage{Role: core.RoleUser, Content: c})
	}
	if err := src.AppendMessages(ctx, s.ID, msgs); err != nil {
		t.Fatal(err)
	}
	// Written a while before the compaction, as they are.
	if _, err := src.w.DB.ExecContext(ctx, `UPDATE messages SET created_at = created_at - 60000`); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.CopyFrom(ctx, src, nil); err != nil {
		t.Fatal(err)
	}
	if n, err := src.CompactHistory(ctx, s.ID, 2, "sum of u1..a2"); err != nil || n != 4 {
		t.Fatalf("compact: replaced %d (%v), want 4", n, err)
	}
	if _, _, err := src.Enqueue(ctx, msgItem(conv, "b", "on SQLite only")); err != nil {
		t.Fatal(err)
	}
	report, err := dst.CopyFrom(ctx, src, nil)
	if err != nil {
		t.Fatalf("a re-run after a compaction on SQLite only: %v; want what is new copied", err)
	}
	for _, c := range report {
		if c.Table == "queue" && c.Copied != 1 {
			t.Fatalf("queue: %d of %d rows copied; want the new one", c.Copied, c.Rows)
		}
	}
}
