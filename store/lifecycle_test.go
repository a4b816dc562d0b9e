package store

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
)

// addTurn stores a question and its answer in sess as a reply to request.
func addTurn(t *testing.T, db *DB, sess core.Session, request int64, q, a string) *core.Reply {
	t.Helper()
	r := &core.Reply{RequestID: request, SessionID: sess.ID, Conversation: sess.Conversation, Text: a, Parts: []string{a},
		Model: "m/x", TaskType: "chat", Usage: core.Usage{InputTokens: 10, OutputTokens: 2}}
	id, err := db.SaveReply(context.Background(), r, []core.ChatMessage{{Role: core.RoleUser, Content: q}, {Role: core.RoleAssistant, Content: a}})
	if err != nil {
		t.Fatal(err)
	}
	r.ID = id
	return r
}

func TestExpireSessionsWithFakeClock(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	db := openTest(t, Options{Now: clk.Now, SessionTTL: 24 * time.Hour})
	idle := core.ConversationKey{Channel: "telegram", Chat: "idle"}
	busy := core.ConversationKey{Channel: "telegram", Chat: "busy"}

	old, err := db.ActiveSession(ctx, idle)
	if err != nil {
		t.Fatal(err)
	}
	reply := addTurn(t, db, old, 0, "what is up", "not much")
	if _, err := db.AddSignal(ctx, core.Signal{Kind: core.SignalReaction, Polarity: core.Positive, ReplyID: reply.ID, At: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := db.AddUsage(ctx, core.UsageRecord{At: clk.Now(), SessionID: old.ID, Conversation: idle.String(), Model: "m/x", Purpose: "chat", InputTokens: 10}); err != nil {
		t.Fatal(err)
	}
	// /new ends the busy conversation's first session but keeps it readable.
	first, _ := db.ActiveSession(ctx, busy)
	addTurn(t, db, first, 0, "q1", "a1")
	if _, err := db.NewSession(ctx, busy); err != nil {
		t.Fatal(err)
	}

	clk.Advance(23 * time.Hour)
	current, _ := db.ActiveSession(ctx, busy) // used again: its idle clock restarts
	addTurn(t, db, current, 0, "q2", "a2")
	if n, err := db.ExpireSessions(ctx); err != nil || n != 0 {
		t.Fatalf("after 23h: expired %d (%v), want none", n, err)
	}
	if recs, _ := db.ConversationSessions(ctx, busy); len(recs) != 2 || recs[0].Active || !recs[1].Active {
		t.Fatalf("busy sessions after /new = %+v; want the ended one readable and the active one", recs)
	}

	clk.Advance(2 * time.Hour) // idle and the ended session: 25h without use
	n, err := db.ExpireSessions(ctx)
	if err != nil || n != 2 {
		t.Fatalf("after 25h: expired %d (%v), want 2 (the idle session and the ended one)", n, err)
	}
	if _, err := db.Session(ctx, old.ID); core.ErrorKind(err) != core.KindNotFound {
		t.Fatalf("expired session still there: %v", err)
	}
	if msgs, _ := db.Transcript(ctx, old.ID); len(msgs) != 0 {
		t.Fatalf("messages of the expired session remain: %+v", msgs)
	}
	// The reply, its signal and the usage ledger stay.
	kept, err := db.Reply(ctx, reply.ID)
	if err != nil || kept == nil || kept.Text != "not much" || kept.SessionID != 0 {
		t.Fatalf("reply after expiry = %+v, %v; want it kept with no session", kept, err)
	}
	if sigs, _ := db.SignalsForReply(ctx, reply.ID); len(sigs) != 1 {
		t.Fatalf("signals after expiry = %+v", sigs)
	}
	if rows, _ := db.UsageTotals(ctx, clk.Now().Add(-48*time.Hour), "chat", ""); len(rows) != 1 || rows[0].InputTokens != 10 {
		t.Fatalf("usage after expiry = %+v", rows)
	}
	recs, _ := db.ConversationSessions(ctx, busy)
	if len(recs) != 1 || recs[0].ID != current.ID {
		t.Fatalf("busy sessions = %+v; want only the one used 2h ago", recs)
	}
	// The idle conversation starts afresh.
	fresh, _ := db.ActiveSession(ctx, idle)
	if fresh.ID == old.ID {
		t.Fatal("the expired session came back")
	}
	addTurn(t, db, fresh, 0, "q3", "a3")

	// A conversation with a request running is not swept under it.
	clk.Advance(48 * time.Hour)
	if _, _, err := db.Enqueue(ctx, msgItem(busy, "77", "slow one")); err != nil {
		t.Fatal(err)
	}
	if items, _, _ := db.Claim(ctx, 5, clk.Now()); len(items) != 1 {
		t.Fatalf("claimed %+v", items)
	}
	if n, _ := db.ExpireSessions(ctx); n != 1 {
		t.Fatalf("expired %d; want only the idle conversation's session", n)
	}
	if _, err := db.Session(ctx, current.ID); err != nil {
		t.Fatalf("the running conversation's session was deleted: %v", err)
	}
	// The newest session stays as an emptied, ended row, so its id is
	// never handed out again (the usage ledger refers to it).
	recs, _ = db.ConversationSessions(ctx, idle)
	if len(recs) != 1 || recs[0].ID != fresh.ID || recs[0].Active {
		t.Fatalf("idle sessions after expiry = %+v; want the newest one kept, ended", recs)
	}
	if msgs, _ := db.Transcript(ctx, fresh.ID); len(msgs) != 0 {
		t.Fatalf("the expired newest session kept its history: %+v", msgs)
	}
	if n, _ := db.ExpireSessions(ctx); n != 0 {
		t.Fatalf("an emptied session expired again: %d", n)
	}
	if next, _ := db.ActiveSession(ctx, idle); next.ID <= fresh.ID {
		t.Fatalf("new session id %d reuses an expired one (newest %d)", next.ID, fresh.ID)
	}
}

func TestExpireSessionsOffWithoutTTL(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	db := openTest(t, Options{Now: clk.Now})
	s, _ := db.ActiveSession(ctx, core.ConversationKey{Channel: "c", Chat: "1"})
	clk.Advance(10 * 365 * 24 * time.Hour)
	if n, err := db.ExpireSessions(ctx); n != 0 || err != nil {
		t.Fatalf("expired %d (%v) with state.session_ttl 0", n, err)
	}
	if again, _ := db.ActiveSession(ctx, s.Conversation); again.ID != s.ID {
		t.Fatal("a session ended although sessions are kept forever")
	}
}

func TestCompactHistoryKeepsSummaryAtHead(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, Options{})
	s, _ := db.ActiveSession(ctx, core.ConversationKey{Channel: "c", Chat: "1"})
	var msgs []core.ChatMessage
	for _, c := range []string{"u1", "a1", "u2", "a2", "u3", "a3"} {
		role := core.RoleUser
		if c[0] == 'a' {
			role = core.RoleAssistant
		}
		msgs = append(msgs, core.ChatMessage{Role: role, Content: c})
	}
	if err := db.AppendMessages(ctx, s.ID, msgs); err != nil {
		t.Fatal(err)
	}
	n, err := db.CompactHistory(ctx, s.ID, 2, "sum of u1..a2")
	if err != nil || n != 4 {
		t.Fatalf("compact: replaced %d (%v), want 4", n, err)
	}
	// More messages arrive after the summary; the summary stays first
	// even when the limit leaves out older messages.
	if err := db.AppendMessages(ctx, s.ID, []core.ChatMessage{{Role: core.RoleUser, Content: "u4"}, {Role: core.RoleAssistant, Content: "a4"}}); err != nil {
		t.Fatal(err)
	}
	h, err := db.History(ctx, s.ID, 3)
	if err != nil {
		t.Fatal(err)
	}
	got := contents(h)
	if got != "sum of u1..a2|a3|u4|a4" || h[0].Role != core.RoleSystem {
		t.Fatalf("history = %s (head role %s)", got, h[0].Role)
	}
	// A second compaction folds the old summary in.
	if n, err := db.CompactHistory(ctx, s.ID, 2, "sum of everything to a3"); err != nil || n != 3 {
		t.Fatalf("second compact: replaced %d (%v), want 3 (the old summary, u3, a3)", n, err)
	}
	h, _ = db.History(ctx, s.ID, 100)
	if got := contents(h); got != "sum of everything to a3|u4|a4" {
		t.Fatalf("history after the second compaction = %s", got)
	}
	tr, _ := db.Transcript(ctx, s.ID)
	if !tr[0].Summary || tr[1].Summary {
		t.Fatalf("summary flags = %v %v", tr[0].Summary, tr[1].Summary)
	}
	if n, err := db.CompactHistory(ctx, s.ID, 10, "nothing"); n != 0 || err != nil {
		t.Fatalf("compact keeping more than there is: %d, %v", n, err)
	}
}

func contents(h []core.ChatMessage) string {
	s := ""
	for i, m := range h {
		if i > 0 {
			s += "|"
		}
		s += m.Content
	}
	return s
}

func TestSessionStateRoundTrip(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, Options{})
	conv := core.ConversationKey{Channel: "c", Chat: "1"}
	s, _ := db.ActiveSession(ctx, conv)
	st := core.SessionState{RecentTools: []string{"git.pull", "ci.build"}, ActiveModel: "m/x", ActiveProfile: "p:1", Step: "deploy", StepIndex: 2, Compactions: 1}
	if err := db.SetSessionState(ctx, s.ID, st); err != nil {
		t.Fatal(err)
	}
	if err := db.AddSessionUsage(ctx, s.ID, core.Usage{InputTokens: 100, OutputTokens: 20}); err != nil {
		t.Fatal(err)
	}
	got, _ := db.ActiveSession(ctx, conv)
	if got.State.Step != "deploy" || got.State.StepIndex != 2 || len(got.State.RecentTools) != 2 || got.State.ActiveProfile != "p:1" || got.Usage.InputTokens != 100 {
		t.Fatalf("session = %+v", got)
	}
	// /new starts with no state.
	n, _ := db.NewSession(ctx, conv)
	if n.State.Step != "" || len(n.State.RecentTools) != 0 {
		t.Fatalf("new session state = %+v", n.State)
	}
}

// TestRepliesMigrationKeepsRows upgrades a database written before
// replies outlived their sessions: replies and deliveries stay, and a
// deleted session leaves its replies in place.
func TestRepliesMigrationKeepsRows(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/" + FileName
	old, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	ms, _ := loadMigrations("migrations")
	must := func(q string, args ...any) {
		t.Helper()
		if _, err := old.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	must(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`)
	for _, m := range ms {
		if m.version >= 40 {
			break
		}
		must(scriptOf(t, m))
		must(`INSERT INTO schema_migrations VALUES (?, ?, 0)`, m.version, m.name)
	}
	must(`INSERT INTO sessions (id, conversation, created_at, last_access) VALUES (1, 'chat:a', 0, 0)`)
	must(`INSERT INTO replies (id, request_id, session_id, conversation, text, parts, model, created_at) VALUES (5, 500, 1, 'chat:a', 'old', '["old"]', 'm/x', 0)`)
	must(`INSERT INTO deliveries (reply_id, part, channel, platform_id, sent_at) VALUES (5, 0, 'chat', 'p-1', 0)`)
	old.Close()

	db, err := OpenFile(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r, err := db.ReplyByPlatformID(ctx, "chat", "p-1")
	if err != nil || r == nil || r.ID != 5 || r.SessionID != 1 || r.Sent[0] != "p-1" {
		t.Fatalf("reply after the migration = %+v, %v", r, err)
	}
	if _, err := db.w.DB.Exec(`DELETE FROM sessions WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	r, err = db.ReplyByPlatformID(ctx, "chat", "p-1")
	if err != nil || r == nil || r.SessionID != 0 {
		t.Fatalf("reply after its session was deleted = %+v, %v; want it kept", r, err)
	}
}
