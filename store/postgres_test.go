package store

import (
	"context"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store/pgtest"
)

// openPG opens a fresh PostgreSQL database (store/pgtest).
func openPG(t testing.TB, o Options) *DB {
	t.Helper()
	o.Postgres = &Postgres{DSN: pgtest.DSN(t)}
	db, err := Open(context.Background(), t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestPostgresSmoke(t *testing.T) {
	start := time.Now()
	db := openPG(t, Options{})
	t.Logf("open + migrate: %s", time.Since(start))
	ctx := context.Background()
	conv := core.ConversationKey{Channel: "telegram", Chat: "1"}
	id, dup, err := db.Enqueue(ctx, msgItem(conv, "1", "hello"))
	if err != nil || dup || id == 0 {
		t.Fatalf("enqueue: %d %v %v", id, dup, err)
	}
	items, _, err := db.Claim(ctx, 4, time.Now())
	if err != nil || len(items) != 1 {
		t.Fatalf("claim: %v %v", items, err)
	}
	s, err := db.ActiveSession(ctx, conv)
	if err != nil {
		t.Fatal(err)
	}
	rid, err := db.SaveReply(ctx, &core.Reply{RequestID: id, SessionID: s.ID, Conversation: conv, Text: "hi", Parts: []string{"hi"}, Model: "m"},
		[]core.ChatMessage{{Role: core.RoleUser, Content: "hello"}, {Role: core.RoleAssistant, Content: "hi"}})
	if err != nil || rid == 0 {
		t.Fatalf("save reply: %d %v", rid, err)
	}
	if err := db.Finish(ctx, id, items[0].Lease, core.StatusDone, ""); err != nil {
		t.Fatal(err)
	}
	h, err := db.History(ctx, s.ID, 10)
	if err != nil || len(h) != 2 {
		t.Fatalf("history: %v %v", h, err)
	}
	mid, err := db.SaveMemory(ctx, core.Memory{Owner: "telegram:1", Content: "I am analyzing the quarterly budget", Tags: []string{"work"}})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := db.Memories(ctx, core.MemoryQuery{Owner: "telegram:1", Text: "analyze budget"})
	if err != nil || len(ms) != 1 || ms[0].ID != mid {
		t.Fatalf("search: %+v %v", ms, err)
	}
	if _, err := db.UsageSeries(ctx, time.Now().Add(-time.Hour), time.Minute, "channel"); err != nil {
		t.Fatal(err)
	}
}
