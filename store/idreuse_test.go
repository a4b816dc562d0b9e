package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
	"github.com/opentalon/opentalon/core/gateway"
)

// chats is a fake platform with many chats: the test hands it messages,
// and it records every sent part by chat. A part containing refuse is
// refused for good (the platform rejects it).
type chats struct {
	refuse string
	inbox  chan core.Inbound

	mu   sync.Mutex
	sent map[string][]string
	n    int
}

func newChats(refuse string) *chats {
	return &chats{refuse: refuse, inbox: make(chan core.Inbound, 16), sent: map[string][]string{}}
}

func (c *chats) Name() string { return "chat" }

func (c *chats) Run(ctx context.Context, sink core.Sink) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case in := <-c.inbox:
			if err := sink.Accept(ctx, in); err != nil {
				return err
			}
		}
	}
}

// Format makes one part per "|"-separated piece.
func (c *chats) Format(text string) []string { return strings.Split(text, "|") }
func (c *chats) Close() error                { return nil }

func (c *chats) Send(ctx context.Context, to core.Outbound, part string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refuse != "" && strings.Contains(part, c.refuse) {
		return "", core.Errorf(core.KindInvalid, "the platform refused the part")
	}
	c.sent[to.Conversation.Chat] = append(c.sent[to.Conversation.Chat], part)
	c.n++
	return fmt.Sprint("p", c.n), nil
}

func (c *chats) of(chat string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.sent[chat]...)
}

// say hands the platform a message from chat and waits until chat has
// received want parts in all.
func (c *chats) say(t *testing.T, chat, id, text string, want int) []string {
	t.Helper()
	c.inbox <- core.Inbound{Conversation: core.ConversationKey{Channel: "chat", Chat: chat}, MessageID: id, UserID: chat, Text: text}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if got := c.of(chat); len(got) >= want {
			time.Sleep(50 * time.Millisecond) // anything more would show now
			return c.of(chat)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("chat %s received %q; want %d parts", chat, c.of(chat), want)
	return nil
}

// scripted answers "secret" with a two-part reply whose second part
// holds the secret, and anything else with "answer to <text>".
type scripted struct{}

func (scripted) Answer(ctx context.Context, t core.Turn) (core.Answer, error) {
	text := "answer to " + t.Text
	if t.Text == "secret" {
		text = "Sure.|the secret is 42"
	}
	return core.Answer{Text: text, Model: "fake/m", Messages: []core.ChatMessage{
		{Role: core.RoleUser, Content: t.Text}, {Role: core.RoleAssistant, Content: text}}}, nil
}

// runGateway runs a gateway over db and ch until the returned stop is called.
func runGateway(t *testing.T, db *DB, ch core.Channel, c *clock.Fake) (stop func()) {
	t.Helper()
	g := gateway.New(gateway.Options{Store: db, Agent: scripted{}, Workers: 2, MaxAttempts: 1, Clock: c})
	g.AddChannel(ch)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx, 5*time.Second) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway run: %v", err)
		}
	}
}

// TestOldReplyNeverAnswersANewMessage: a week after a reply was stored
// (with a part never delivered), start-up pruning empties the queue; the
// next messages must get their own answers and nobody else's text.
func TestOldReplyNeverAnswersANewMessage(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := clock.NewFake(time.Unix(1_700_000_000, 0))

	week := 7 * 24 * time.Hour
	db, err := Open(ctx, dir, Options{Now: c.Now, QueueRetention: week})
	if err != nil {
		t.Fatal(err)
	}
	first := newChats("secret")
	stop := runGateway(t, db, first, c)
	// Alice's reply is stored; its second part is refused by the
	// platform, so it stays unsent and the request fails.
	got := first.say(t, "alice", "1", "secret", 1)
	if len(got) != 1 || got[0] != "Sure." {
		t.Fatalf("alice received %q, want the first part only", got)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if st, _, _, _ := db.QueueStatus(ctx, 1); st == core.StatusFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("alice's request never failed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	db.Close()

	c.Advance(8 * 24 * time.Hour)
	db, err = Open(ctx, dir, Options{Now: c.Now, QueueRetention: week})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	second := newChats("")
	stop = runGateway(t, db, second, c) // prunes the week-old rows at start
	defer stop()

	for _, m := range []struct{ chat, id, text string }{
		{"bob", "2", "hi"}, {"carol", "3", "yo"}, {"alice", "4", "again"},
	} {
		got := second.say(t, m.chat, m.id, m.text, 1)
		if want := "answer to " + m.text; len(got) != 1 || got[0] != want {
			t.Errorf("%s received %q, want only %q", m.chat, got, want)
		}
	}
	for _, chat := range []string{"bob", "carol", "alice"} {
		for _, p := range second.of(chat) {
			if strings.Contains(p, "secret") {
				t.Errorf("%s received another request's text %q", chat, p)
			}
		}
	}
}

// TestQueueMigrationKeepsRowsAndSkipsReferencedIDs upgrades a database
// written before queue ids were AUTOINCREMENT: its queued rows stay, and
// new ids start past every id a reply or history entry refers to, even
// when the queue itself is already pruned below them.
func TestQueueMigrationKeepsRowsAndSkipsReferencedIDs(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/" + FileName
	old, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations("migrations")
	if err != nil {
		t.Fatal(err)
	}
	must := func(q string, args ...any) {
		t.Helper()
		if _, err := old.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	must(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`)
	for _, m := range ms {
		if m.version > 3 {
			break
		}
		must(scriptOf(t, m))
		must(`INSERT INTO schema_migrations VALUES (?, ?, 0)`, m.version, m.name)
	}
	must(`INSERT INTO sessions (id, conversation, created_at, last_access) VALUES (1, 'chat:a', 0, 0)`)
	must(`INSERT INTO replies (request_id, session_id, conversation, text, parts, created_at) VALUES (500, 1, 'chat:a', 'old', '["old"]', 0)`)
	must(`INSERT INTO messages (session_id, request_id, role, content, created_at) VALUES (1, 700, 'user', 'q', 0)`)
	must(`INSERT INTO queue (id, dedupe_key, kind, conversation, payload, created_at, updated_at) VALUES (3, 'chat:m:3', 'message', 'chat:b', '{"message":{"Conversation":{"Channel":"chat","Chat":"b"},"MessageID":"3","Text":"still queued"}}', 0, 0)`)
	old.Close()

	db, err := OpenFile(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	items, _, err := db.Claim(ctx, 5, time.Now())
	if err != nil || len(items) != 1 || items[0].ID != 3 || items[0].Message.Text != "still queued" {
		t.Fatalf("claim after the migration = %+v, %v; want the queued row 3", items, err)
	}
	id, _, err := db.Enqueue(ctx, msgItem(core.ConversationKey{Channel: "chat", Chat: "c"}, "9", "new"))
	if err != nil || id <= 700 {
		t.Fatalf("new queue id = %d (%v), want past 700, the highest id a table refers to", id, err)
	}
	// Pruned ids are not handed out again either.
	if _, err := db.w.DB.Exec(`DELETE FROM queue`); err != nil {
		t.Fatal(err)
	}
	next, _, err := db.Enqueue(ctx, msgItem(core.ConversationKey{Channel: "chat", Chat: "c"}, "10", "newer"))
	if err != nil || next <= id {
		t.Fatalf("id after emptying the queue = %d (%v), want past %d", next, err, id)
	}
}
