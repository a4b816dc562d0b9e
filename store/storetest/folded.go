package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

// testFolded checks the reads and writes the message path folds into
// fewer round trips: each returns what its separate parts return.
func testFolded(t *testing.T, e Engine) {
	clock := NewClock()
	db := e.open(t, store.Options{Now: clock.Now, SessionTTL: time.Hour})
	c := conv("folded")

	// A new conversation: the session is created, nothing to judge.
	s, f, err := db.ActiveSessionFollowUp(ctx, c)
	if err != nil || s.ID == 0 || f == nil || f.Last != nil {
		t.Fatalf("a new conversation's session and follow-up = %+v, %+v, %v; want a session and an empty follow-up", s, f, err)
	}
	h, has, err := db.HistoryAndMemories(ctx, s.ID, 10, "telegram:alice")
	if err != nil || len(h) != 0 || has {
		t.Fatalf("history and memories of a new session = %+v, %v, %v; want none", h, has, err)
	}

	// An answer: the follow-up names it and its question, as FollowUp.
	q := mustEnqueue(t, db, msg(c, "1", "question"))
	rid, err := db.SaveReply(ctx, &core.Reply{RequestID: q, SessionID: s.ID, Conversation: c, Text: "answer", Parts: []string{"answer"}, Model: "fake/big", TaskType: "chat"},
		[]core.ChatMessage{{Role: core.RoleUser, Content: "the question"}, {Role: core.RoleAssistant, Content: "answer"}})
	check(t, "save reply", err)
	check(t, "save escalation", db.SaveEscalation(ctx, s.ID, core.EscalationState{Question: "the question", Models: []string{"fake/small"}}))
	want, err := db.FollowUp(ctx, s.ID)
	check(t, "follow-up", err)
	same := func(what string, f *core.FollowUp) {
		t.Helper()
		if f == nil || f.Last == nil || f.Last.ID != rid || f.Last.RequestID != q || f.Last.Model != "fake/big" || f.Question != "the question" ||
			f.Escalation.Question != want.Escalation.Question || len(f.Escalation.Models) != 1 || f.Judged != want.Judged ||
			!f.Last.CreatedAt.Equal(want.Last.CreatedAt) {
			t.Fatalf("%s: follow-up = %+v; want %+v (reply %d)", what, f, want, rid)
		}
		// The asker is the answered request's sender, as RequestSender.
		if f.Asker == nil || f.Asker.UserID != "u1" || f.Asker.Conversation != c || f.Asker.MessageID != "1" {
			t.Fatalf("%s: the follow-up's asker = %+v; want u1's message 1", what, f.Asker)
		}
	}
	same("FollowUp", &want)
	same2, f, err := db.ActiveSessionFollowUp(ctx, c)
	if err != nil || same2.ID != s.ID {
		t.Fatalf("the session again = %+v, %v; want %d", same2, err, s.ID)
	}
	same("fresh session", f)
	// A session not used for a while is touched (a write) and its
	// follow-up still read with it.
	clock.Advance(10 * time.Minute)
	touched, f, err := db.ActiveSessionFollowUp(ctx, c)
	if err != nil || touched.ID != s.ID || !touched.LastAccess.Equal(clock.Now()) {
		t.Fatalf("a stale session = %+v, %v; want %d touched now", touched, err, s.ID)
	}
	same("touched session", f)
	// An answer whose queue item is gone (pruned): the asker is unknown.
	pc := conv("folded-pruned")
	ps, err := db.ActiveSession(ctx, pc)
	check(t, "pruned session", err)
	_, err = db.SaveReply(ctx, &core.Reply{RequestID: q + 1000, SessionID: ps.ID, Conversation: pc, Text: "a", Parts: []string{"a"}, Model: "fake/big", TaskType: "chat"},
		[]core.ChatMessage{{Role: core.RoleUser, Content: "q"}, {Role: core.RoleAssistant, Content: "a"}})
	check(t, "save reply of a pruned request", err)
	if pf, err := db.FollowUp(ctx, ps.ID); err != nil || pf.Last == nil || pf.Asker != nil {
		t.Fatalf("the follow-up of an answer whose request is gone = %+v, %v; want its answer and no asker", pf, err)
	}

	// The history with the memories check: as History, then true once
	// the owner (or anyone, shared) has a memory.
	h, has, err = db.HistoryAndMemories(ctx, s.ID, 10, "telegram:alice")
	if plain, _ := db.History(ctx, s.ID, 10); err != nil || has || len(h) != 2 || len(plain) != 2 || h[0].Content != "the question" || h[1].Content != "answer" {
		t.Fatalf("history and memories = %+v, %v, %v; want the two entries and no memories", h, has, err)
	}
	// A group's user entry keeps its sender's name beside its text, in
	// the reply's entries and in those appended later; the others have
	// none.
	gc := conv("folded-group")
	gs, err := db.ActiveSession(ctx, gc)
	check(t, "group session", err)
	gq := mustEnqueue(t, db, msg(gc, "g1", "group question"))
	_, err = db.SaveReply(ctx, &core.Reply{RequestID: gq, SessionID: gs.ID, Conversation: gc, Text: "a", Parts: []string{"a"}},
		[]core.ChatMessage{{Role: core.RoleUser, Content: "the question"}, {Role: core.RoleAssistant, Content: "answer"},
			{Role: core.RoleUser, Content: "what did I ask?", Name: "@alice"}, {Role: core.RoleAssistant, Content: "a"}})
	check(t, "save reply with a speaker", err)
	check(t, "append with a speaker", db.AppendMessages(ctx, gs.ID, []core.ChatMessage{{Role: core.RoleUser, Content: "and me?", Name: "Bob B"}}))
	named := func(h []core.ChatMessage) string {
		var b []byte
		for _, m := range h {
			b = append(b, m.Name+"|"+m.Content+";"...)
		}
		return string(b)
	}
	const wantNamed = "|the question;|answer;@alice|what did I ask?;|a;Bob B|and me?;"
	if h, err := db.History(ctx, gs.ID, 10); err != nil || named(h) != wantNamed {
		t.Fatalf("history with speakers = %q, %v; want %q", named(h), err, wantNamed)
	}
	if h, _, err := db.HistoryAndMemories(ctx, gs.ID, 10, "telegram:alice"); err != nil || named(h) != wantNamed {
		t.Fatalf("history and memories with speakers = %q, %v; want %q", named(h), err, wantNamed)
	}
	// The transcript (session export) keeps them too.
	if tr, err := db.Transcript(ctx, gs.ID); err != nil {
		t.Fatalf("transcript with speakers: %v", err)
	} else {
		h := make([]core.ChatMessage, len(tr))
		for i, m := range tr {
			h[i] = m.ChatMessage
		}
		if named(h) != wantNamed {
			t.Fatalf("transcript with speakers = %q; want %q", named(h), wantNamed)
		}
	}

	_, err = db.SaveMemory(ctx, core.Memory{Owner: "telegram:bob", Content: "likes tea"})
	check(t, "save memory", err)
	if _, has, _ := db.HistoryAndMemories(ctx, s.ID, 1, "telegram:alice"); has {
		t.Fatal("another user's memory counts for alice")
	}
	if h, has, _ := db.HistoryAndMemories(ctx, s.ID, 1, "telegram:bob"); !has || len(h) != 1 || h[0].Content != "answer" {
		t.Fatalf("bob's history(1) and memories = %+v, %v; want the newest entry and true", h, has)
	}

	// Deferred writes: stored with the reply of the context's Deferred,
	// signal, affinity fold and usage row in its transaction.
	q2 := mustEnqueue(t, db, msg(c, "2", "next"))
	var done []int64
	d := &core.Deferred{Owner: db}
	d.AddUsage(core.UsageRecord{Conversation: c.String(), Model: "fake/big", CostUSD: 0.5, SessionID: s.ID})
	sig := core.Signal{Kind: "accepted", Polarity: core.Positive, ReplyID: rid, Model: "fake/big", TaskType: "chat", Weight: 1, RequestID: q2}
	fold := func(a core.Affinity) core.Affinity { a.Pos++; a.Positives++; return a }
	d.AddSignal(core.DeferredSignal{Signal: sig, Task: "chat", Model: "fake/big", Fold: fold, Done: func(id int64) { done = append(done, id) }})
	start := clock.Now()
	dctx := core.WithDeferred(ctx, d)
	before := db.Trips()
	_, err = db.SaveReply(dctx, &core.Reply{RequestID: q2, SessionID: s.ID, Conversation: c, Text: "two", Parts: []string{"two"}, Model: "fake/big", TaskType: "chat"},
		[]core.ChatMessage{{Role: core.RoleUser, Content: "next"}, {Role: core.RoleAssistant, Content: "two"}})
	check(t, "save reply with deferred writes", err)
	if got := db.Trips().Sub(before); got.Calls != 1 || got.Writes != 1 {
		t.Fatalf("the reply with its deferred writes took %+v; want one write transaction", got)
	}
	if len(done) != 1 || done[0] == 0 {
		t.Fatalf("the deferred signal's Done got %v; want its id", done)
	}
	if u, s := d.Pending(); len(u) != 0 || len(s) != 0 {
		t.Fatalf("written writes still pending: %+v %+v", u, s)
	}
	if spent, _ := db.SpentSince(ctx, start, c.String()); spent != 0.5 {
		t.Fatalf("spent = %v; want the deferred usage row", spent)
	}
	if sigs, _ := db.SignalsForReply(ctx, rid); len(sigs) != 1 || sigs[0].Kind != "accepted" {
		t.Fatalf("signals of the judged reply = %+v; want the deferred acceptance", sigs)
	}
	affs, _ := db.Affinities(ctx)
	if len(affs) != 1 || affs[0].Pos != 1 {
		t.Fatalf("affinity = %+v; want the deferred fold", affs)
	}
	if f, _ := db.FollowUp(ctx, s.ID); !f.Judged && f.Last.ID == rid {
		t.Fatal("the judged reply is not judged")
	}

	// What an item leaves (no reply) is written as it ends, once; the
	// same signal of the same request is not recorded twice; a Deferred
	// of another store is not written by this one's SaveReply; nothing
	// left costs no round trip.
	d2 := &core.Deferred{Owner: db}
	d2.AddUsage(core.UsageRecord{Conversation: c.String(), Model: "fake/big", CostUSD: 0.25})
	d2.AddSignal(core.DeferredSignal{Signal: sig, Task: "chat", Model: "fake/big", Fold: fold, Done: func(id int64) { done = append(done, id) }})
	check(t, "write deferred", db.WriteDeferred(ctx, d2))
	if len(done) != 2 || done[1] != 0 {
		t.Fatalf("the repeated signal's Done got %v; want id 0 (recorded already)", done)
	}
	if spent, _ := db.SpentSince(ctx, start, c.String()); spent != 0.75 {
		t.Fatalf("spent = %v; want both usage rows", spent)
	}
	if affs, _ := db.Affinities(ctx); affs[0].Pos != 1 {
		t.Fatalf("affinity = %+v; a signal recorded already must not fold again", affs)
	}
	// Another request's signal folds into the row there is.
	d3 := &core.Deferred{Owner: db}
	sig3 := sig
	sig3.RequestID = mustEnqueue(t, db, msg(c, "4", "fourth"))
	d3.AddSignal(core.DeferredSignal{Signal: sig3, Task: "chat", Model: "fake/big", Fold: fold, Done: func(id int64) { done = append(done, id) }})
	check(t, "write deferred", db.WriteDeferred(ctx, d3))
	if affs, _ := db.Affinities(ctx); len(affs) != 1 || affs[0].Pos != 2 || affs[0].Positives != 2 {
		t.Fatalf("affinity = %+v; want the second fold on the first (pos 2)", affs)
	}
	// More usage rows than one statement takes, a signal recorded
	// already and two new ones folding into the same row.
	d4 := &core.Deferred{Owner: db}
	for range 5 {
		d4.AddUsage(core.UsageRecord{Conversation: c.String(), Model: "fake/big", CostUSD: 0.125})
	}
	d4.AddSignal(core.DeferredSignal{Signal: sig3, Task: "chat", Model: "fake/big", Fold: fold, Done: func(id int64) { done = append(done, id) }})
	for _, n := range []string{"5", "6"} {
		s := sig
		s.RequestID = mustEnqueue(t, db, msg(c, n, "more"))
		d4.AddSignal(core.DeferredSignal{Signal: s, Task: "chat", Model: "fake/big", Fold: fold, Done: func(id int64) { done = append(done, id) }})
	}
	check(t, "write deferred", db.WriteDeferred(ctx, d4))
	if got := done[len(done)-3:]; got[0] != 0 || got[1] == 0 || got[2] == 0 {
		t.Fatalf("the signals' Done got %v; want 0 (recorded already), then two ids", got)
	}
	if affs, _ := db.Affinities(ctx); len(affs) != 1 || affs[0].Pos != 4 {
		t.Fatalf("affinity = %+v; want two more folds (pos 4)", affs)
	}
	if spent, _ := db.SpentSince(ctx, start, c.String()); spent != 1.375 {
		t.Fatalf("spent = %v; want the five usage rows added (1.375)", spent)
	}
	before = db.Trips()
	check(t, "write nothing", db.WriteDeferred(ctx, d2))
	if got := db.Trips().Sub(before); got.Calls != 0 {
		t.Fatalf("writing no deferred writes took %+v", got)
	}
	foreign := &core.Deferred{Owner: "another store"}
	foreign.AddUsage(core.UsageRecord{Conversation: c.String(), CostUSD: 9})
	q3 := mustEnqueue(t, db, msg(c, "3", "third"))
	_, err = db.SaveReply(core.WithDeferred(context.Background(), foreign), &core.Reply{RequestID: q3, SessionID: s.ID, Conversation: c, Text: "3", Parts: []string{"3"}}, nil)
	check(t, "save reply", err)
	if u, _ := foreign.Pending(); len(u) != 1 {
		t.Fatal("another store's deferred usage was taken")
	}
	if spent, _ := db.SpentSince(ctx, start, c.String()); spent != 1.375 {
		t.Fatalf("spent = %v; another store's deferred row was written here", spent)
	}
}
