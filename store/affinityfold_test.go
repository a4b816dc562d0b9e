package store

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

// TestConcurrentFoldsWaitInsteadOfAborting: on PostgreSQL many
// transactions fold into one affinity row at once (every judged message
// folds into its task and model's row). Each waits for the row's lock and
// folds what the one before wrote: every fold counts, the first ones
// (which find no row) included, and no transaction is aborted and run
// again. SERIALIZABLE aborted all but one of them at a time: under load
// some lost ten times in a row and their request (LLM call and all) ran
// again.
func TestConcurrentFoldsWaitInsteadOfAborting(t *testing.T) {
	db := openPG(t, Options{})
	ctx := context.Background()
	fold := func(a core.Affinity) core.Affinity { a.Pos++; a.Positives++; return a }
	const workers, each = 12, 6
	before := db.Trips()
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for range each {
				sig := core.Signal{Kind: "accepted", Polarity: core.Positive, Model: "fake/big", TaskType: "chat", Weight: 1}
				var err error
				if w%2 == 0 {
					// The message path: a usage row and the signal in one
					// statement (usageAndSignal), then the fold.
					d := &core.Deferred{Owner: db}
					d.AddUsage(core.UsageRecord{Conversation: "telegram:1", Model: "fake/big"})
					d.AddSignal(core.DeferredSignal{Signal: sig, Task: "chat", Model: "fake/big", Fold: fold})
					err = db.WriteDeferred(ctx, d)
				} else {
					_, err = db.AddSignalAndAffinity(ctx, sig, "chat", "fake/big", fold)
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a fold failed: %v", err)
	}
	rows, err := db.Affinities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Positives != workers*each || rows[0].Pos != workers*each {
		t.Fatalf("affinity rows %+v; want one with %d positives (every fold counted)", rows, workers*each)
	}
	if got := db.Trips().Sub(before).Writes; got != workers*each {
		t.Errorf("%d folds took %d write transactions; want one each (none aborted and run again)", workers*each, got)
	}
}

// TestFilledDraftIsFilledOnce: on PostgreSQL (READ COMMITTED) two saves
// of one streamed reply that both read it as a draft fill it once: the
// second finds it filled and stands aside, so its history entries and
// tokens are recorded once. With more entries than one statement holds,
// the save reads the draft, then fills it.
func TestFilledDraftIsFilledOnce(t *testing.T) {
	db := openPG(t, Options{})
	ctx := context.Background()
	c := core.ConversationKey{Channel: "telegram", Chat: "draft"}
	in := core.Inbound{Conversation: c, MessageID: "1", Text: "stream me", UserID: "u1"}
	req, _, err := db.Enqueue(ctx, core.QueueItem{Kind: core.EventMessage, Conversation: c, DedupeKey: "telegram:draft:m:1", Message: &in})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := db.ActiveSession(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	draft, err := db.BeginReply(ctx, &core.Reply{RequestID: req, SessionID: sess.ID, Conversation: c})
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]core.ChatMessage, messagesPerInsert+2)
	for i := range msgs {
		msgs[i] = core.ChatMessage{Role: core.RoleAssistant, Content: "step"}
	}

	// Both saves read the draft while another transaction holds its row,
	// then fill it one after the other.
	hold, err := db.w.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hold.ExecContext(ctx, `SELECT id FROM replies WHERE id = $1 FOR UPDATE`, draft); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			id, err := db.SaveReply(ctx, &core.Reply{RequestID: req, SessionID: sess.ID, Conversation: c, Text: "done", Parts: []string{"done"},
				Usage: core.Usage{InputTokens: 5}}, msgs)
			if err != nil || id != draft {
				t.Errorf("save = %d, %v; want the draft %d", id, err, draft)
			}
		})
	}
	ended := make(chan struct{})
	go func() { wg.Wait(); close(ended) }()
	waitLockWaiters(t, db, 2, ended) // both saves reach the row's lock
	if err := hold.Commit(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if n, _ := db.MessageCount(ctx, sess.ID); n != len(msgs) {
		t.Errorf("history has %d entries; want the draft's %d, once", n, len(msgs))
	}
	if s, _ := db.Session(ctx, sess.ID); s.Usage.InputTokens != 5 {
		t.Errorf("the session counts %d input tokens; want 5, once", s.Usage.InputTokens)
	}
}

// TestAffinityFoldKeepsItsKey: the row written is the one asked for,
// whatever key the fold's result holds (a fold may return a fresh row).
func TestAffinityFoldKeepsItsKey(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			db := openTest(t, Options{})
			if engine == "postgres" {
				db = openPG(t, Options{})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			fresh := func(a core.Affinity) core.Affinity { return core.Affinity{Pos: a.Pos + 1, Positives: a.Positives + 1} }
			for range 2 {
				if err := db.UpdateAffinity(ctx, "chat", "fake/big", fresh); err != nil {
					t.Fatal(err)
				}
			}
			rows, err := db.Affinities(ctx)
			if err != nil || len(rows) != 1 || rows[0].Task != "chat" || rows[0].Model != "fake/big" || rows[0].Positives != 2 {
				t.Fatalf("affinity rows %+v, %v; want chat/fake/big with 2 positives", rows, err)
			}
		})
	}
}
