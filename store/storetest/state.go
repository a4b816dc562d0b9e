package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

func testSessions(t *testing.T, e Engine) {
	clock := NewClock()
	db := e.open(t, store.Options{Now: clock.Now, SessionTTL: time.Hour})
	var ss core.SessionStore = db
	c := conv("sessions")

	s1, err := ss.ActiveSession(ctx, c)
	check(t, "active session", err)
	again, err := ss.ActiveSession(ctx, c)
	if err != nil || again.ID != s1.ID || again.Conversation != c {
		t.Fatalf("the session again = %+v, %v; want session %d", again, err, s1.ID)
	}
	check(t, "pins", db.SetPins(ctx, s1.ID, "fake/big", "p1"))
	st := core.SessionState{RecentTools: []string{"web.search"}, ActiveModel: "fake/big", Step: "plan", StepIndex: 2}
	check(t, "state", db.SetSessionState(ctx, s1.ID, st))
	check(t, "usage", db.AddSessionUsage(ctx, s1.ID, core.Usage{InputTokens: 10, OutputTokens: 5, CostUSD: 0.25}))
	got, err := db.Session(ctx, s1.ID)
	if err != nil || got.ModelPin != "fake/big" || got.State.Step != "plan" || got.State.StepIndex != 2 || got.Usage.InputTokens != 10 || got.Usage.CostUSD != 0.25 {
		t.Fatalf("session = %+v, %v", got, err)
	}
	if _, err := db.Session(ctx, 1<<40); core.ErrorKind(err) != core.KindNotFound {
		t.Fatalf("an unknown session: %v; want KindNotFound", err)
	}

	// History: newest entries, oldest first; a compaction summary stays
	// at the head.
	var msgs []core.ChatMessage
	for i := range 6 {
		msgs = append(msgs, core.ChatMessage{Role: core.RoleUser, Content: fmt.Sprint("m", i)})
	}
	msgs = append(msgs, core.ChatMessage{Role: core.RoleAssistant, ToolCalls: []core.ToolCall{{ID: "c1", Plugin: "web", Action: "search", Args: map[string]string{"q": "x"}}}},
		core.ChatMessage{Role: core.RoleTool, ToolCallID: "c1", Content: "result"})
	check(t, "append", db.AppendMessages(ctx, s1.ID, msgs))
	if n, err := ss.MessageCount(ctx, s1.ID); err != nil || n != 8 {
		t.Fatalf("message count = %d, %v", n, err)
	}
	h, err := db.History(ctx, s1.ID, 3)
	if err != nil || len(h) != 3 || h[0].Content != "m5" || h[1].ToolCalls[0].Action != "search" || h[2].ToolCallID != "c1" {
		t.Fatalf("history(3) = %+v, %v", h, err)
	}
	n, err := db.CompactHistory(ctx, s1.ID, 2, "the summary")
	if err != nil || n != 6 {
		t.Fatalf("compact = %d, %v; want 6 replaced", n, err)
	}
	h, err = db.History(ctx, s1.ID, 1)
	if err != nil || len(h) != 2 || h[0].Content != "the summary" || h[1].ToolCallID != "c1" {
		t.Fatalf("history after compaction = %+v, %v; want the summary then the newest entry", h, err)
	}
	tr, err := db.Transcript(ctx, s1.ID)
	if err != nil || len(tr) != 3 || !tr[0].Summary {
		t.Fatalf("transcript = %+v, %v", tr, err)
	}

	// A long append (written a few rows per statement) keeps its order
	// and every entry.
	long, err := ss.ActiveSession(ctx, conv("sessions-long"))
	check(t, "long session", err)
	var many []core.ChatMessage
	for i := range 21 {
		m := core.ChatMessage{Role: core.RoleUser, Content: fmt.Sprint("n", i)}
		if i%5 == 4 {
			m = core.ChatMessage{Role: core.RoleTool, ToolCallID: fmt.Sprint("t", i), Content: fmt.Sprint("n", i)}
		}
		many = append(many, m)
	}
	check(t, "long append", db.AppendMessages(ctx, long.ID, many))
	h, err = db.History(ctx, long.ID, 0)
	if err != nil || len(h) != len(many) {
		t.Fatalf("history of a 21-entry append = %d entries, %v", len(h), err)
	}
	for i, m := range h {
		if m.Content != many[i].Content || m.Role != many[i].Role || m.ToolCallID != many[i].ToolCallID {
			t.Fatalf("entry %d = %+v; want %+v", i, m, many[i])
		}
	}

	// /new: a fresh session keeps the pins.
	s2, err := ss.NewSession(ctx, c)
	if err != nil || s2.ID == s1.ID || s2.ModelPin != "fake/big" || s2.ProfilePin != "p1" {
		t.Fatalf("new session = %+v, %v; want another id with the pins", s2, err)
	}
	if h, _ := db.History(ctx, s2.ID, 10); len(h) != 0 {
		t.Fatalf("a new session has history %+v", h)
	}
	recs, err := db.ConversationSessions(ctx, c)
	if err != nil || len(recs) != 2 || recs[0].Active || !recs[1].Active || recs[0].EndedAt.IsZero() {
		t.Fatalf("conversation sessions = %+v, %v", recs, err)
	}

	// TTL: an idle session ends; expiry deletes idle sessions and their
	// history but keeps the newest row.
	clock.Advance(2 * time.Hour)
	s3, err := ss.ActiveSession(ctx, c)
	if err != nil || s3.ID == s2.ID {
		t.Fatalf("after the TTL: %+v, %v; want a new session", s3, err)
	}
	other, _ := ss.ActiveSession(ctx, conv("sessions-other"))
	clock.Advance(2 * time.Hour)
	expired, err := db.ExpireSessions(ctx)
	if err != nil || expired < 3 {
		t.Fatalf("expire = %d, %v; want the idle sessions", expired, err)
	}
	if _, err := db.Session(ctx, s1.ID); core.ErrorKind(err) != core.KindNotFound {
		t.Fatalf("an expired session is still there: %v", err)
	}
	s4, _ := ss.ActiveSession(ctx, conv("sessions-other"))
	if s4.ID <= other.ID {
		t.Fatalf("a session id was reused: %d after %d", s4.ID, other.ID)
	}
}

func testReplies(t *testing.T, e Engine) {
	clock := NewClock()
	db := e.open(t, store.Options{Now: clock.Now})
	var rs core.ReplyStore = db
	var q core.QueueStore = db
	c := conv("replies")
	sess, err := db.ActiveSession(ctx, c)
	check(t, "session", err)
	req := mustEnqueue(t, q, msg(c, "1", "question"))

	r := &core.Reply{RequestID: req, SessionID: sess.ID, Conversation: c, Text: "part one. part two.", Parts: []string{"part one.", "part two."},
		Model: "fake/small", TaskType: "chat", Usage: core.Usage{InputTokens: 7, OutputTokens: 3, CostUSD: 0.5},
		Metadata: map[string]string{"lang": "en"}, Files: []core.Attachment{{Name: "a.txt", MIME: "text/plain", Size: 3, SHA256: strings.Repeat("ab", 32)}}}
	id, err := rs.SaveReply(ctx, r, []core.ChatMessage{{Role: core.RoleUser, Content: "question"}, {Role: core.RoleAssistant, Content: r.Text}})
	check(t, "save reply", err)
	if id2, err := rs.SaveReply(ctx, r, []core.ChatMessage{{Role: core.RoleUser, Content: "again"}}); err != nil || id2 != id {
		t.Fatalf("saving the request's reply again = %d, %v; want the first (%d)", id2, err, id)
	}
	if n, _ := db.MessageCount(ctx, sess.ID); n != 2 {
		t.Fatalf("history has %d entries; the second save must add none", n)
	}
	s, _ := db.Session(ctx, sess.ID)
	if s.Usage.InputTokens != 7 || s.Usage.CostUSD != 0.5 {
		t.Fatalf("session usage = %+v; want the reply's", s.Usage)
	}
	check(t, "mark sent", rs.MarkSent(ctx, id, 0, "tg-100"))
	got, err := rs.ReplyForRequest(ctx, req, c)
	if err != nil || got == nil || got.ID != id || got.Model != "fake/small" || len(got.Parts) != 2 || got.Sent[0] != "tg-100" || got.Sent[1] != "" ||
		got.Metadata["lang"] != "en" || len(got.Files) != 1 || got.Files[0].Name != "a.txt" || len(got.Sent) != 3 {
		t.Fatalf("reply for request = %+v, %v", got, err)
	}
	if other, err := rs.ReplyForRequest(ctx, req, conv("elsewhere")); err != nil || other != nil {
		t.Fatalf("the reply asked for by another conversation = %+v, %v; want none", other, err)
	}
	if byPart, err := rs.ReplyByPlatformID(ctx, "telegram", "tg-100"); err != nil || byPart == nil || byPart.ID != id {
		t.Fatalf("reply by platform id = %+v, %v", byPart, err)
	}
	if none, err := rs.ReplyByPlatformID(ctx, "telegram", "nope"); err != nil || none != nil {
		t.Fatalf("reply by an unknown id = %+v, %v", none, err)
	}
	if last, err := db.LastAnswer(ctx, sess.ID); err != nil || last == nil || last.ID != id {
		t.Fatalf("last answer = %+v, %v", last, err)
	}

	// A streamed reply: the draft row exists before the answer, its
	// messages are recorded as drafts, the final save fills it in.
	req2 := mustEnqueue(t, q, msg(c, "2", "stream me"))
	draft, err := rs.BeginReply(ctx, &core.Reply{RequestID: req2, SessionID: sess.ID, Conversation: c})
	check(t, "begin reply", err)
	if again, err := rs.BeginReply(ctx, &core.Reply{RequestID: req2, SessionID: sess.ID, Conversation: c}); err != nil || again != draft {
		t.Fatalf("begin again = %d, %v; want %d", again, err, draft)
	}
	check(t, "mark draft", rs.MarkDraft(ctx, draft, 0, "tg-200"))
	check(t, "mark draft", rs.MarkDraft(ctx, draft, 1, "tg-201"))
	d, _ := rs.ReplyForRequest(ctx, req2, c)
	if d == nil || !d.Streaming || len(d.Sent) != 2 || !d.Draft[1] {
		t.Fatalf("the draft = %+v", d)
	}
	check(t, "forget part", rs.ForgetPart(ctx, draft, 1))
	final, err := rs.SaveReply(ctx, &core.Reply{RequestID: req2, SessionID: sess.ID, Conversation: c, Text: "done", Parts: []string{"done"}, Model: "fake/small"},
		[]core.ChatMessage{{Role: core.RoleUser, Content: "stream me"}, {Role: core.RoleAssistant, Content: "done"}})
	if err != nil || final != draft {
		t.Fatalf("the final save = %d, %v; want the draft row %d", final, err, draft)
	}
	d, _ = db.Reply(ctx, draft)
	if d == nil || d.Streaming || d.Text != "done" || len(d.Sent) != 1 || d.Sent[0] != "tg-200" || !d.Draft[0] {
		t.Fatalf("the filled draft = %+v; want its streamed message kept as a draft of part 0", d)
	}
	if n, _ := db.MessageCount(ctx, sess.ID); n != 4 {
		t.Fatalf("history has %d entries after the draft was filled; want its two added (4)", n)
	}
	// Filled, it is no draft any more: a save again changes nothing.
	if again, err := rs.SaveReply(ctx, &core.Reply{RequestID: req2, SessionID: sess.ID, Conversation: c, Text: "other", Parts: []string{"other"}, Usage: core.Usage{InputTokens: 100}},
		[]core.ChatMessage{{Role: core.RoleUser, Content: "stream me"}, {Role: core.RoleAssistant, Content: "other"}}); err != nil || again != draft {
		t.Fatalf("saving the filled draft again = %d, %v; want it (%d)", again, err, draft)
	}
	if d, _ = db.Reply(ctx, draft); d == nil || d.Text != "done" {
		t.Fatalf("the filled draft after another save = %+v; want it unchanged", d)
	}
	if n, _ := db.MessageCount(ctx, sess.ID); n != 4 {
		t.Fatalf("history has %d entries; the save of a filled draft must add none", n)
	}
	if s, _ := db.Session(ctx, sess.ID); s.Usage.InputTokens != 7 {
		t.Fatalf("session usage = %+v; the save of a filled draft must add none", s.Usage)
	}

	// Replies of no request (0) never conflict: each is saved with its
	// history entries; nine entries are more than one statement takes.
	var nine []core.ChatMessage
	for i := range 9 {
		nine = append(nine, core.ChatMessage{Role: core.RoleUser, Content: fmt.Sprintf("entry %d", i)})
	}
	for i, entries := range [][]core.ChatMessage{nine[:2], nine} {
		if _, err := rs.SaveReply(ctx, &core.Reply{SessionID: sess.ID, Conversation: c, Text: "no request", Parts: []string{"no request"}}, entries); err != nil {
			t.Fatalf("save %d of no request: %v", i, err)
		}
	}
	if n, _ := db.MessageCount(ctx, sess.ID); n != 4+2+9 {
		t.Fatalf("history has %d entries; want the replies of no request's added (15)", n)
	}
	if h, _ := db.History(ctx, sess.ID, 9); len(h) != 9 || h[0].Content != "entry 0" || h[8].Content != "entry 8" {
		t.Fatalf("the last nine entries = %+v; want entry 0 to entry 8 in order", h)
	}

	// Escalation state of a session.
	check(t, "save escalation", db.SaveEscalation(ctx, sess.ID, core.EscalationState{Question: "why?", Models: []string{"a", "b"}}))
	if es, err := db.Escalation(ctx, sess.ID); err != nil || es.Question != "why?" || len(es.Models) != 2 {
		t.Fatalf("escalation = %+v, %v", es, err)
	}
}

func testMemories(t *testing.T, e Engine) {
	clock := NewClock()
	db := e.open(t, store.Options{Now: clock.Now})
	alice, bob := "telegram:alice", "telegram:bob"
	save := func(m core.Memory) int64 {
		t.Helper()
		id, err := db.SaveMemory(ctx, m)
		check(t, "save memory", err)
		return id
	}
	budget := save(core.Memory{Owner: alice, Content: "Alice is analyzing the quarterly budget for the marketing team", Tags: []string{"Work", "finance"}})
	cat := save(core.Memory{Owner: alice, Content: "Alice has a cat called Miso", Tags: []string{"pets"}})
	save(core.Memory{Owner: bob, Content: "Bob prepares the budget review", Tags: []string{"work"}})
	shared := save(core.Memory{Owner: "admin", Shared: true, Content: "The office closes at six on Fridays", Tags: []string{"office"}})
	if _, err := db.SaveMemory(ctx, core.Memory{Owner: alice}); core.ErrorKind(err) != core.KindInvalid {
		t.Fatalf("a memory without content: %v", err)
	}
	// A model may write a NUL byte or bytes that are not UTF-8 into
	// memory_save; the memory is kept as every store can hold it.
	odd := save(core.Memory{Owner: "telegram:carol", Content: "Carol\x00 likes \xff\xfeשלום 🐈", Tags: []string{"n\x00ul"}})
	if m, err := db.Memory(ctx, odd); err != nil || m == nil || m.Content != "Carol likes \uFFFDשלום 🐈" || strings.Join(m.Tags, " ") != "nul" {
		t.Fatalf("a memory with a NUL byte and invalid UTF-8 = %+v, %v; want it stored cleaned", m, err)
	}
	if ok, err := db.DeleteMemory(ctx, odd, "", false); err != nil || !ok {
		t.Fatalf("delete the odd memory: %v, %v", ok, err)
	}

	ids := func(ms []core.Memory) []int64 {
		var out []int64
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return out
	}
	// Membership: the owner's memories and the shared ones, never
	// another user's; the obvious match first.
	ms, err := db.Memories(ctx, core.MemoryQuery{Owner: alice, WithShared: true, Text: "analyze the budget"})
	if err != nil || len(ms) != 1 || ms[0].ID != budget {
		t.Fatalf("alice searching \"analyze the budget\" = %v, %v; want her budget memory only (stemmed: analyzing)", ids(ms), err)
	}
	ms, err = db.Memories(ctx, core.MemoryQuery{Owner: alice, WithShared: true, Text: "what about Miso the cat, and the office on Fridays?"})
	if err != nil || len(ms) != 2 {
		t.Fatalf("search = %v, %v; want the cat and the shared office memory", ids(ms), err)
	}
	if ms, _ := db.Memories(ctx, core.MemoryQuery{Owner: alice, Text: "office fridays"}); len(ms) != 0 {
		t.Fatalf("without shared memories: %v; want none", ids(ms))
	}
	ms, _ = db.Memories(ctx, core.MemoryQuery{Owner: alice, WithShared: true, Text: "cat budget budget quarterly marketing"})
	if len(ms) != 2 || ms[0].ID != budget || ms[0].Rank > ms[1].Rank {
		t.Fatalf("ranking = %+v; want the budget memory (more words in common) first", ms)
	}
	if ms, _ := db.Memories(ctx, core.MemoryQuery{Owner: alice, Text: "the and of"}); len(ms) != 0 {
		t.Fatalf("a search of stop words only = %v; want nothing", ids(ms))
	}
	if ms, _ := db.Memories(ctx, core.MemoryQuery{Tag: "work"}); len(ms) != 2 {
		t.Fatalf("tag work = %v; want alice's and bob's (tags are lower case)", ids(ms))
	}
	if ms, _ := db.Memories(ctx, core.MemoryQuery{Owner: alice, NotTag: "pets"}); len(ms) != 1 || ms[0].ID != budget {
		t.Fatalf("not tag pets = %v", ids(ms))
	}
	if ms, _ := db.Memories(ctx, core.MemoryQuery{}); len(ms) != 4 || ms[0].ID != shared {
		t.Fatalf("every memory, newest first = %v", ids(ms))
	}
	if has, err := db.HasMemories(ctx, "telegram:nobody"); err != nil || !has {
		t.Fatalf("has memories (a shared one exists) = %v, %v", has, err)
	}
	if n, _ := db.CountMemories(ctx, core.MemoryQuery{Owner: alice}); n != 2 {
		t.Fatalf("count = %d", n)
	}

	// Workflows: saved, refreshed, judged by a signal on their reply.
	wf := core.Memory{Owner: alice, Content: "book a flight", Steps: []core.WorkflowStep{{Plugin: "travel", Action: "search", Order: 1}}, TaskType: "travel", RequestID: 0}
	c := conv("memories")
	sess, _ := db.ActiveSession(ctx, c)
	req := mustEnqueue(t, db, msg(c, "1", "book a flight"))
	wf.RequestID = req
	wid, err := db.SaveWorkflow(ctx, wf)
	check(t, "save workflow", err)
	if again, err := db.SaveWorkflow(ctx, wf); err != nil || again != wid {
		t.Fatalf("the same workflow again = %d, %v; want %d refreshed", again, err, wid)
	}
	reply, err := db.SaveReply(ctx, &core.Reply{RequestID: req, SessionID: sess.ID, Conversation: c, Text: "booked", Parts: []string{"booked"}, Model: "m", TaskType: "travel"}, nil)
	check(t, "reply", err)
	if _, err := db.AddSignal(ctx, core.Signal{Kind: core.SignalReaction, Polarity: core.Negative, ReplyID: reply, Model: "m", TaskType: "travel"}); err != nil {
		t.Fatal(err)
	}
	if m, err := db.Memory(ctx, wid); err != nil || m == nil || m.Outcome != core.WorkflowFailed || !m.HasTag(core.TagWorkflow) || m.Steps[0].Action != "search" {
		t.Fatalf("workflow after a 👎 = %+v, %v; want failed", m, err)
	}
	if _, err := db.AddSignal(ctx, core.Signal{Kind: core.SignalReaction, Polarity: core.Positive, ReplyID: reply, Model: "m", TaskType: "travel"}); err != nil {
		t.Fatal(err)
	}
	if m, _ := db.Memory(ctx, wid); m.Outcome != core.WorkflowSucceeded {
		t.Fatalf("workflow after the 👎 was taken back = %s; want success", m.Outcome)
	}

	// Deleting: one's own, shared only as an admin.
	if ok, _ := db.DeleteMemory(ctx, shared, alice, false); ok {
		t.Fatal("a user deleted a shared memory")
	}
	if ok, _ := db.DeleteMemory(ctx, budget, bob, true); ok {
		t.Fatal("bob deleted alice's memory")
	}
	if ok, err := db.DeleteMemory(ctx, cat, alice, false); err != nil || !ok {
		t.Fatalf("delete own memory: %v %v", ok, err)
	}
	if n, err := db.DeleteMemories(ctx, alice); err != nil || n != 2 {
		t.Fatalf("delete alice's memories = %d, %v; want the budget memory and the workflow", n, err)
	}
	if ms, _ := db.Memories(ctx, core.MemoryQuery{Owner: alice, Text: "budget"}); len(ms) != 0 {
		t.Fatalf("a deleted memory is still found: %v", ids(ms))
	}
}

// testMemoryPlaces: a query with a Place keeps the memories saved there
// and the shared ones, by text and by listing; without one every place's
// memory is found (a private chat, the command line). A workflow is
// refreshed only in the place it was recorded.
func testMemoryPlaces(t *testing.T, e Engine) {
	db := e.open(t, store.Options{})
	const ann, group, other = "telegram:ann", "telegram:-100", "telegram:-200"
	save := func(m core.Memory) int64 {
		t.Helper()
		id, err := db.SaveMemory(ctx, m)
		check(t, "save memory", err)
		return id
	}
	private := save(core.Memory{Owner: ann, Content: "doctor appointment on Tuesday"})
	inGroup := save(core.Memory{Owner: ann, Place: group, Content: "the doctor of the team is Dr Who"})
	save(core.Memory{Owner: ann, Place: other, Content: "another doctor story"})
	shared := save(core.Memory{Owner: "admin", Shared: true, Place: other, Content: "the office doctor visits on Fridays"})
	if m, err := db.Memory(ctx, inGroup); err != nil || m == nil || m.Place != group {
		t.Fatalf("memory saved in the group = %+v, %v; want place %s", m, err, group)
	}
	ids := func(ms []core.Memory) string {
		var s []string
		for _, m := range ms {
			s = append(s, fmt.Sprint(m.ID))
		}
		sort.Strings(s)
		return strings.Join(s, " ")
	}
	want := func(ids ...int64) string {
		var s []string
		for _, id := range ids {
			s = append(s, fmt.Sprint(id))
		}
		sort.Strings(s)
		return strings.Join(s, " ")
	}
	for _, text := range []string{"", "doctor"} {
		got, err := db.Memories(ctx, core.MemoryQuery{Owner: ann, WithShared: true, Place: group, Text: text})
		if err != nil || ids(got) != want(inGroup, shared) {
			t.Fatalf("ann's memories in the group (text %q) = %s, %v; want %s", text, ids(got), err, want(inGroup, shared))
		}
		got, err = db.Memories(ctx, core.MemoryQuery{Owner: ann, WithShared: true, Text: text})
		if err != nil || len(got) != 4 {
			t.Fatalf("ann's memories anywhere (text %q) = %s, %v; want all four", text, ids(got), err)
		}
	}
	if got, _ := db.Memories(ctx, core.MemoryQuery{Owner: ann, Place: group, Text: "Tuesday"}); len(got) != 0 {
		t.Fatalf("a private memory is found in the group: %s (private is %d)", ids(got), private)
	}

	wf := core.Memory{Owner: ann, Place: group, Content: "book a room", Steps: []core.WorkflowStep{{Plugin: "rooms", Action: "book", Order: 1}}}
	wid, err := db.SaveWorkflow(ctx, wf)
	check(t, "save workflow", err)
	wf.Place = ""
	pid, err := db.SaveWorkflow(ctx, wf)
	check(t, "save the workflow in private", err)
	if pid == wid {
		t.Fatalf("the group's workflow %d was refreshed by the same plan in private", wid)
	}
	if got, _ := db.Memories(ctx, core.MemoryQuery{Owner: ann, Place: group, Tag: core.TagWorkflow, Text: "book a room"}); ids(got) != want(wid) {
		t.Fatalf("workflows in the group = %s; want %d", ids(got), wid)
	}
}

// oddValues are values a plugin or a script may store: a NUL byte,
// invalid UTF-8, binary data, a long text.
var oddValues = map[string]string{
	"nul":     "before\x00after",
	"invalid": "caf\xe9 \xff\xfe",
	"binary":  string([]byte{0, 1, 2, 0xff, 0x80, 0}),
	"long":    strings.Repeat("long value ", 10000),
	"empty":   "",
	"emoji":   "🦅 talon",
}

func testPluginState(t *testing.T, e Engine) {
	db := e.open(t, store.Options{})
	for name, v := range oddValues {
		check(t, "set "+name, db.PluginStateSet(ctx, "p1", name, v))
		got, found, err := db.PluginStateGet(ctx, "p1", name)
		if err != nil || !found || got != v {
			t.Fatalf("plugin state value %s: %q (found %v, %v); want it back byte for byte", name, trunc(got), found, err)
		}
	}
	if _, found, _ := db.PluginStateGet(ctx, "p2", "nul"); found {
		t.Fatal("another plugin's namespace shows p1's key")
	}
	// A key with a NUL byte either round-trips or is refused clearly.
	if err := db.PluginStateSet(ctx, "p1", "k\x00ey", "v"); err != nil {
		if core.ErrorKind(err) != core.KindInvalid || !strings.Contains(err.Error(), "NUL") {
			t.Fatalf("a key with a NUL byte: %v; want it stored or refused with KindInvalid naming the NUL byte", err)
		}
	} else if v, found, _ := db.PluginStateGet(ctx, "p1", "k\x00ey"); !found || v != "v" {
		t.Fatalf("a key with a NUL byte was accepted but reads back %q, %v", v, found)
	}
	check(t, "delete", db.PluginStateDelete(ctx, "p1", "long"))
	check(t, "delete missing", db.PluginStateDelete(ctx, "p1", "long"))
	for _, k := range []string{"a%b", "a_c", "ab", "b"} {
		check(t, "set", db.PluginStateSet(ctx, "p3", k, "x"))
	}
	if keys, err := db.PluginStateKeys(ctx, "p3", "a%"); err != nil || strings.Join(keys, " ") != "a%b" {
		t.Fatalf("keys with prefix a%% = %q, %v; want a%%b only (the prefix is literal)", keys, err)
	}
	if keys, _ := db.PluginStateKeys(ctx, "p3", ""); strings.Join(keys, " ") != "a%b a_c ab b" {
		t.Fatalf("all keys = %q; want them in byte order", keys)
	}

	// Quotas: keys and bytes; a write that does not grow always passes.
	q := core.PluginStateQuota{MaxKeys: 2, MaxBytes: 20}
	check(t, "put", db.PluginStatePut(ctx, "q", "k1", "12345", q))
	check(t, "put", db.PluginStatePut(ctx, "q", "k2", "12345", q))
	if err := db.PluginStatePut(ctx, "q", "k3", "1", q); !errors.Is(err, core.ErrPluginStateQuota) {
		t.Fatalf("a third key: %v; want the quota", err)
	}
	if err := db.PluginStatePut(ctx, "q", "k1", "1234567890123", q); !errors.Is(err, core.ErrPluginStateQuota) {
		t.Fatalf("growing past 20 bytes: %v; want the quota", err)
	}
	check(t, "shrink", db.PluginStatePut(ctx, "q", "k1", "1", q))
	if keys, size, err := db.PluginStateUsage(ctx, "q"); err != nil || keys != 2 || size != 2+1+2+5 {
		t.Fatalf("usage = %d keys %d bytes, %v; want 2 keys, 10 bytes", keys, size, err)
	}
	check(t, "delete", db.PluginStateDelete(ctx, "q", "k2"))
	if keys, size, _ := db.PluginStateUsage(ctx, "q"); keys != 1 || size != 3 {
		t.Fatalf("usage after a delete = %d keys %d bytes", keys, size)
	}
	// Bytes count bytes, not characters.
	check(t, "put", db.PluginStatePut(ctx, "q", "é", "🦅", q))
	if _, size, _ := db.PluginStateUsage(ctx, "q"); size != 3+2+4 {
		t.Fatalf("usage in bytes = %d; want 9", size)
	}

	// Bindings.
	b, err := db.PluginBind(ctx, "weather", "/opt/weather", "sha-1")
	check(t, "bind", err)
	if again, err := db.PluginBind(ctx, "weather", "/tmp/evil", "sha-2"); err != nil || again.Path != "/opt/weather" || again.SHA256 != "sha-1" {
		t.Fatalf("binding a taken name = %+v, %v; want the first binding", again, err)
	}
	if bs, _ := db.PluginBindings(ctx); len(bs) != 1 || bs[0].Name != "weather" || !bs[0].BoundAt.Equal(b.BoundAt) {
		t.Fatalf("bindings = %+v", bs)
	}
	if ok, err := db.PluginUnbind(ctx, "weather"); err != nil || !ok {
		t.Fatalf("unbind = %v, %v", ok, err)
	}
}

func testLuaKV(t *testing.T, e Engine) {
	db := e.open(t, store.Options{})
	for name, v := range oddValues {
		check(t, "set "+name, db.LuaKVSet(ctx, "greet.lua", name, v))
		got, found, err := db.LuaKVGet(ctx, "greet.lua", name)
		if err != nil || !found || got != v {
			t.Fatalf("lua kv value %s: %q (found %v, %v); want it back byte for byte", name, trunc(got), found, err)
		}
	}
	check(t, "overwrite", db.LuaKVSet(ctx, "greet.lua", "emoji", "new"))
	if v, _, _ := db.LuaKVGet(ctx, "greet.lua", "emoji"); v != "new" {
		t.Fatalf("overwritten value = %q", v)
	}
	if _, found, _ := db.LuaKVGet(ctx, "other.lua", "emoji"); found {
		t.Fatal("another script sees greet.lua's key")
	}
	check(t, "delete", db.LuaKVDelete(ctx, "greet.lua", "emoji"))
	if _, found, _ := db.LuaKVGet(ctx, "greet.lua", "emoji"); found {
		t.Fatal("a deleted key is still there")
	}
	if err := db.LuaKVSet(ctx, "greet.lua", "", "x"); core.ErrorKind(err) != core.KindInvalid {
		t.Fatalf("an empty key: %v", err)
	}

	// The quota (plugins.lua.limits.kv_max_*): a new key past MaxKeys and
	// a write past MaxBytes are refused with ErrLuaKVQuota naming the
	// key; overwriting with no more bytes and deleting always pass; the
	// usage the triggers keep agrees with the namespace.
	q := core.PluginStateQuota{MaxKeys: 3, MaxBytes: 40}
	for _, k := range []string{"a", "b", "c"} {
		check(t, "put "+k, db.LuaKVPut(ctx, "quota.lua", k, "0123456789", q))
	}
	if err := db.LuaKVPut(ctx, "quota.lua", "d", "x", q); !errors.Is(err, core.ErrLuaKVQuota) || !strings.Contains(err.Error(), "kv_max_keys") {
		t.Fatalf("a fourth key at kv_max_keys 3: %v; want ErrLuaKVQuota naming kv_max_keys", err)
	}
	if err := db.LuaKVPut(ctx, "quota.lua", "a", "0123456789abcdefghij", q); !errors.Is(err, core.ErrLuaKVQuota) || !strings.Contains(err.Error(), "kv_max_bytes") {
		t.Fatalf("a write past 40 bytes: %v; want ErrLuaKVQuota naming kv_max_bytes", err)
	}
	check(t, "overwrite within the quota", db.LuaKVPut(ctx, "quota.lua", "a", "short", q))
	check(t, "another script is not counted", db.LuaKVPut(ctx, "other.lua", "d", "x", q))
	if n, b, err := db.LuaKVUsage(ctx, "quota.lua"); err != nil || n != 3 || b != 3+5+10+10 {
		t.Fatalf("usage = %d keys, %d bytes, %v; want 3 keys, 28 bytes", n, b, err)
	}
	check(t, "delete at the quota", db.LuaKVDelete(ctx, "quota.lua", "b"))
	check(t, "a new key after a delete", db.LuaKVPut(ctx, "quota.lua", "d", "x", q))
	if n, b, err := db.LuaKVUsage(ctx, "quota.lua"); err != nil || n != 3 || b != 3+5+10+1 {
		t.Fatalf("usage after delete and put = %d keys, %d bytes, %v; want 3 keys, 19 bytes", n, b, err)
	}
}

func testRouting(t *testing.T, e Engine) {
	clock := NewClock()
	db := e.open(t, store.Options{Now: clock.Now})
	inc := func(a core.Affinity) core.Affinity { a.Positives++; a.Pos += 1; a.LastSignal = clock.Now(); return a }
	check(t, "update", db.UpdateAffinity(ctx, "code", "fake/big", inc))
	check(t, "update", db.UpdateAffinity(ctx, "code", "fake/big", inc))
	check(t, "update", db.UpdateAffinity(ctx, "chat", "fake/small", func(a core.Affinity) core.Affinity { a.Negatives = 3; a.Neg = 2.5; return a }))
	as, err := db.Affinities(ctx)
	if err != nil || len(as) != 2 || as[0].Task != "chat" || as[1].Positives != 2 || as[1].Pos != 2 || !as[1].LastSignal.Equal(clock.Now()) || as[0].Neg != 2.5 {
		t.Fatalf("affinities = %+v, %v", as, err)
	}
	// A signal recorded while handling a request is recorded once.
	s := core.Signal{Kind: core.SignalRetry, Polarity: core.Negative, Model: "fake/big", TaskType: "code", UserID: "u1", Weight: 1, RequestID: 42}
	id, err := db.AddSignalAndAffinity(ctx, s, "code", "fake/big", inc)
	if err != nil || id == 0 {
		t.Fatalf("signal and affinity = %d, %v", id, err)
	}
	if id, err := db.AddSignalAndAffinity(ctx, s, "code", "fake/big", inc); err != nil || id != 0 {
		t.Fatalf("the same request's signal again = %d, %v; want 0 and no change", id, err)
	}
	as, _ = db.Affinities(ctx)
	if as[1].Positives != 3 {
		t.Fatalf("positives = %d; want 3 (the repeated signal changed nothing)", as[1].Positives)
	}
	if n, err := db.ResetAffinity(ctx, "code", ""); err != nil || n != 1 {
		t.Fatalf("reset = %d, %v", n, err)
	}
	// Profiles and their cooldowns.
	p := core.ProfileState{Provider: "openai", ID: "openai:work", Uses: 3, LastUsed: clock.Now(), CooldownUntil: clock.Now().Add(time.Minute), Failures: 1, LastError: "429"}
	check(t, "save profile", db.SaveProfileState(ctx, p))
	p.Uses = 4
	check(t, "save profile", db.SaveProfileState(ctx, p))
	ps, err := db.ProfileStates(ctx)
	if err != nil || len(ps) != 1 || ps[0].Uses != 4 || !ps[0].CooldownUntil.Equal(p.CooldownUntil) || ps[0].LastError != "429" {
		t.Fatalf("profiles = %+v, %v", ps, err)
	}
	// The server's Retry-After goes with the cooldown it set: a later
	// cooldown brings its own; an earlier one (another replica's older
	// news) changes neither; a success clears both.
	readRetry := func(what string) time.Duration {
		t.Helper()
		ps, err := db.ProfileStates(ctx)
		if err != nil || len(ps) != 1 {
			t.Fatalf("%s: profiles = %+v, %v", what, ps, err)
		}
		return ps[0].RetryAfter
	}
	later := p
	later.CooldownUntil, later.Failures, later.RetryAfter = p.CooldownUntil.Add(time.Minute), 2, 25*time.Second
	check(t, "save a later cooldown", db.SaveProfileState(ctx, later))
	if got := readRetry("a later cooldown"); got != 25*time.Second {
		t.Fatalf("retry after = %v; want the 25s saved with the later cooldown", got)
	}
	older := p
	older.RetryAfter = 3 * time.Second
	check(t, "save an earlier cooldown", db.SaveProfileState(ctx, older))
	if got := readRetry("an earlier cooldown"); got != 25*time.Second {
		t.Fatalf("retry after = %v; want the later cooldown's 25s kept", got)
	}
	ok := core.ProfileState{Provider: p.Provider, ID: p.ID, Uses: 5, LastUsed: clock.Now()}
	check(t, "save a success", db.SaveProfileState(ctx, ok))
	if got := readRetry("a success"); got != 0 {
		t.Fatalf("retry after = %v after a success; want 0", got)
	}
}

func testUsage(t *testing.T, e Engine) {
	clock := NewClock()
	db := e.open(t, store.Options{Now: clock.Now})
	start := clock.Now()
	for i, u := range []core.UsageRecord{
		{Conversation: "telegram:1", UserID: "u1", Model: "fake/big", InputTokens: 100, OutputTokens: 50, CostUSD: 1.5, SessionID: 7},
		{Conversation: "telegram:1", UserID: "u1", Model: "fake/small", InputTokens: 10, OutputTokens: 5, CostUSD: 0.25, Purpose: "compaction"},
		{Conversation: "slack:C1", UserID: "u2", Model: "fake/big", InputTokens: 1, OutputTokens: 1, CostUSD: 0.5},
	} {
		u.At = start.Add(time.Duration(i) * time.Minute)
		check(t, "add usage", db.AddUsage(ctx, u))
	}
	if spent, err := db.SpentSince(ctx, start, ""); err != nil || spent != 2.25 {
		t.Fatalf("spent = %v, %v", spent, err)
	}
	if spent, _ := db.SpentSince(ctx, start, "telegram:1"); spent != 1.75 {
		t.Fatalf("spent in telegram:1 = %v", spent)
	}
	tot, err := db.UsageTotals(ctx, start, "model", "")
	if err != nil || len(tot) != 2 || tot[0].Key != "fake/big" || tot[0].Calls != 2 || tot[0].InputTokens != 101 || tot[0].CostUSD != 2 {
		t.Fatalf("totals by model = %+v, %v", tot, err)
	}
	for _, by := range []string{"chat", "user", "purpose", "session"} {
		if tot, err := db.UsageTotals(ctx, start, by, ""); err != nil || len(tot) != 2 {
			t.Fatalf("totals by %s = %+v, %v", by, tot, err)
		}
	}
	if _, err := db.UsageTotals(ctx, start, "color", ""); core.ErrorKind(err) != core.KindInvalid {
		t.Fatalf("totals by an unknown group: %v", err)
	}
	series, err := db.UsageSeries(ctx, start, time.Hour, "channel")
	if err != nil || len(series) != 2 || series[0].Key != "slack" || series[1].Key != "telegram" || series[1].Calls != 2 || !series[0].Bucket.Equal(start) {
		t.Fatalf("series by channel = %+v, %v", series, err)
	}
	byModel, last, err := db.UsageByModelAfter(ctx, 0)
	if err != nil || len(byModel) != 2 || last == 0 || byModel[0].OutputTokens != 51 {
		t.Fatalf("usage by model after 0 = %+v, %d, %v", byModel, last, err)
	}
	if more, last2, _ := db.UsageByModelAfter(ctx, last); len(more) != 0 || last2 != last {
		t.Fatalf("usage after the last id = %+v, %d", more, last2)
	}
}

func testSchedules(t *testing.T, e Engine) {
	clock := NewClock()
	db := e.open(t, store.Options{Now: clock.Now})
	c := core.ConversationKey{Channel: "telegram", Chat: "9"}
	s, err := db.AddSchedule(ctx, core.Schedule{Source: "chat", Interval: time.Hour, Prompt: "stretch", Conversation: c, NextFire: clock.Now().Add(time.Hour), Args: map[string]string{"a": "b"}})
	if err != nil || s.ID == 0 {
		t.Fatalf("add = %+v, %v", s, err)
	}
	check(t, "fired", db.ScheduleFired(ctx, s.ID, clock.Now(), clock.Now().Add(2*time.Hour)))
	check(t, "fired", db.ScheduleFired(ctx, s.ID, time.Time{}, clock.Now().Add(3*time.Hour)))
	got, err := db.Schedule(ctx, s.ID)
	if err != nil || !got.LastFire.Equal(clock.Now()) || !got.NextFire.Equal(clock.Now().Add(3*time.Hour)) || got.Args["a"] != "b" || got.Missed != core.MissedSkip {
		t.Fatalf("schedule = %+v, %v", got, err)
	}
	// Made in a private chat: its firings recall as that chat does.
	dm, err := db.AddSchedule(ctx, core.Schedule{Source: "chat", Interval: time.Hour, Prompt: "water", Conversation: c, Creator: "9", Private: true})
	check(t, "add a private chat's schedule", err)
	if got, err := db.Schedule(ctx, dm.ID); err != nil || !got.Private || !dm.Private {
		t.Fatalf("a private chat's schedule = %+v, %v; want it private", got, err)
	}
	if got.Private {
		t.Fatalf("a schedule made without Private reads as private: %+v", got)
	}
	check(t, "remove the private chat's schedule", db.DeleteSchedule(ctx, dm.ID))
	// Sync: unchanged timing keeps the id and firing state.
	want := []core.Schedule{
		{Key: "daily", Cron: "0 9 * * *", Prompt: "news", Conversation: c, NextFire: clock.Now().Add(time.Hour)},
		{Key: "hourly", Interval: time.Hour, Prompt: "ping", Conversation: c},
	}
	first, err := db.SyncSchedules(ctx, "config", want)
	check(t, "sync", err)
	check(t, "fired", db.ScheduleFired(ctx, first[0].ID, clock.Now(), clock.Now().Add(24*time.Hour)))
	want[0].Prompt = "the news"
	want[1].Interval = 2 * time.Hour
	second, err := db.SyncSchedules(ctx, "config", want[:2])
	if err != nil || second[0].ID != first[0].ID || second[0].Prompt != "the news" || !second[0].LastFire.Equal(clock.Now()) || second[1].ID == first[1].ID {
		t.Fatalf("second sync = %+v, %v; want daily kept (with its firing), hourly re-created", second, err)
	}
	if _, err := db.SyncSchedules(ctx, "config", []core.Schedule{{Prompt: "no key", Conversation: c}}); core.ErrorKind(err) != core.KindInvalid {
		t.Fatalf("a schedule without a key: %v", err)
	}
	third, err := db.SyncSchedules(ctx, "config", want[:1])
	check(t, "sync", err)
	all, _ := db.Schedules(ctx)
	if len(third) != 1 || len(all) != 2 {
		t.Fatalf("after syncing one: %d synced, %d in all; want 1 and 2 (the chat's stays)", len(third), len(all))
	}
	// A firing is a compare-and-set on next_fire; every change moves the
	// version another replica polls.
	v0, err := db.SchedulesVersion(ctx)
	check(t, "version", err)
	at := clock.Now().Add(3 * time.Hour)
	if moved, err := db.AdvanceSchedule(ctx, s.ID, at, at.Add(time.Hour)); err != nil || !moved {
		t.Fatalf("advance from the stored next firing: %v, %v; want moved", moved, err)
	}
	if moved, err := db.AdvanceSchedule(ctx, s.ID, at, at.Add(time.Hour)); err != nil || moved {
		t.Fatalf("the same due time advanced twice: %v, %v", moved, err)
	}
	check(t, "fired", db.ScheduleFired(ctx, s.ID, at, time.Time{}))
	if got, _ := db.Schedule(ctx, s.ID); !got.LastFire.Equal(at) || !got.NextFire.Equal(at.Add(time.Hour)) {
		t.Fatalf("after the firing: last %v next %v; want %v and %v", got.LastFire, got.NextFire, at, at.Add(time.Hour))
	}
	check(t, "an earlier firing recorded late", db.ScheduleFired(ctx, s.ID, at.Add(-time.Hour), time.Time{}))
	if got, _ := db.Schedule(ctx, s.ID); !got.LastFire.Equal(at) {
		t.Fatalf("last firing moved back to %v", got.LastFire)
	}
	check(t, "delete", db.DeleteSchedule(ctx, s.ID))
	if err := db.DeleteSchedule(ctx, s.ID); core.ErrorKind(err) != core.KindNotFound {
		t.Fatalf("delete twice: %v", err)
	}
	if moved, err := db.AdvanceSchedule(ctx, s.ID, at.Add(time.Hour), at.Add(2*time.Hour)); err != nil || moved {
		t.Fatalf("a deleted schedule advanced: %v, %v", moved, err)
	}
	if v1, err := db.SchedulesVersion(ctx); err != nil || v1 <= v0 {
		t.Fatalf("version %d after changes from %d, %v; want it to grow", v1, v0, err)
	}
}

func testPairings(t *testing.T, e Engine) {
	clock := NewClock()
	db := e.open(t, store.Options{Now: clock.Now})
	var ps core.PairingStore = db
	p, err := ps.RequestPairing(ctx, core.Pairing{Channel: "telegram", UserID: "7", UserName: "ann", Conversation: conv("7"), Code: "ABC123"})
	if err != nil || p.Status != core.PairingPending || p.Code != "ABC123" {
		t.Fatalf("request = %+v, %v", p, err)
	}
	if again, err := ps.RequestPairing(ctx, core.Pairing{Channel: "telegram", UserID: "7", Code: "ZZZ999"}); err != nil || again.Code != "ABC123" {
		t.Fatalf("asking again = %+v, %v; want the first request", again, err)
	}
	if _, err := ps.RequestPairing(ctx, core.Pairing{Channel: "telegram", UserID: "8", Code: "ABC123"}); !errors.Is(err, core.ErrPairingCodeTaken) {
		t.Fatalf("another user given a taken code: %v; want ErrPairingCodeTaken", err)
	}
	d, err := ps.DecidePairing(ctx, "", "ABC123", true, "cli")
	if err != nil || d.Status != core.PairingApproved || d.DecidedBy != "cli" || d.DecidedAt.IsZero() {
		t.Fatalf("approve = %+v, %v", d, err)
	}
	if _, err := ps.DecidePairing(ctx, "slack", "ABC123", true, "cli"); core.ErrorKind(err) != core.KindNotFound {
		t.Fatalf("a code of another channel: %v", err)
	}
	if got, err := ps.Pairing(ctx, "telegram", "7"); err != nil || got == nil || got.Status != core.PairingApproved {
		t.Fatalf("pairing = %+v, %v", got, err)
	}
	clock.Advance(time.Second)
	ps.RequestPairing(ctx, core.Pairing{Channel: "telegram", UserID: "9", Code: "DEF456"})
	list, err := ps.Pairings(ctx, "telegram")
	if err != nil || len(list) != 2 || list[0].UserID != "9" {
		t.Fatalf("pairings = %+v, %v; want the pending one first", list, err)
	}
}

func testMedia(t *testing.T, e Engine) {
	clock := NewClock()
	db := e.open(t, store.Options{Now: clock.Now})
	var ms core.MediaStore = db
	data := []byte("\x89PNG\x00binary")
	sha, err := ms.PutMedia(ctx, data, "image/png")
	check(t, "put", err)
	if got, err := ms.ReadMedia(ctx, sha); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read = %q, %v", got, err)
	}
	f, err := db.StoreMedia(ctx, "telegram:file-1", "text/plain", strings.NewReader("hello"), 100)
	check(t, "store", err)
	check(t, "text", db.SetMediaText(ctx, f.SHA256, "hello, read"))
	if got, ok, err := db.MediaBySource(ctx, "telegram:file-1"); err != nil || !ok || got.Text != "hello, read" || !got.HasText || got.Size != 5 {
		t.Fatalf("by source = %+v %v %v", got, ok, err)
	}
	if _, err := db.StoreMedia(ctx, "telegram:big", "text/plain", strings.NewReader("0123456789"), 5); !errors.Is(err, core.ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	clock.Advance(time.Hour)
	if n, err := db.SweepMedia(ctx, clock.Now()); err != nil || n != 2 {
		t.Fatalf("sweep = %d, %v", n, err)
	}
	if _, err := ms.ReadMedia(ctx, sha); core.ErrorKind(err) != core.KindNotFound {
		t.Fatalf("a swept file: %v", err)
	}
}

func testOperations(t *testing.T, e Engine) {
	clock := NewClock()
	db := e.open(t, store.Options{Now: clock.Now, QueueRetention: time.Hour})
	if problems, err := db.QuickCheck(ctx); err != nil || len(problems) != 0 {
		t.Fatalf("quick check = %v, %v", problems, err)
	}
	if v, err := db.SchemaVersion(ctx); err != nil || v < 120 {
		t.Fatalf("schema version = %d, %v", v, err)
	}
	check(t, "ping", db.Ping(ctx))
	mustEnqueue(t, db, msg(conv("ops"), "1", "x"))
	drain(t, db, clock.Now())
	clock.Advance(2 * time.Hour)
	if n, err := db.PruneQueue(ctx); err != nil || n != 1 {
		t.Fatalf("prune = %d, %v", n, err)
	}
	h, err := db.QueueHealth(ctx, clock.Now())
	if err != nil || h.Heads != 0 || h.Running != 0 {
		t.Fatalf("queue health = %+v, %v", h, err)
	}
}

func trunc(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// testIdleSession: a session started because the conversation had been
// idle past the TTL says how long (core.Session.Idle), whether the old
// session was still there or already deleted by the sweep (then the
// conversation's last reply, which outlives it, tells); a first session,
// one within the TTL and /new's do not.
func testIdleSession(t *testing.T, e Engine) {
	clock := NewClock()
	db := e.open(t, store.Options{Now: clock.Now, SessionTTL: time.Hour})
	c := conv("idle")
	s1, err := db.ActiveSession(ctx, c)
	check(t, "first session", err)
	if s1.Idle != 0 {
		t.Fatalf("a conversation's first session has Idle %v", s1.Idle)
	}
	req := mustEnqueue(t, db, msg(c, "1", "question"))
	_, err = db.SaveReply(ctx, &core.Reply{RequestID: req, SessionID: s1.ID, Conversation: c, Text: "answer", Parts: []string{"answer"}, Model: "fake/m"},
		[]core.ChatMessage{{Role: core.RoleUser, Content: "question"}, {Role: core.RoleAssistant, Content: "answer"}})
	check(t, "reply", err)
	clock.Advance(50 * time.Minute)
	if s, err := db.ActiveSession(ctx, c); err != nil || s.ID != s1.ID || s.Idle != 0 {
		t.Fatalf("within the TTL: %+v, %v; want the same session, no Idle", s, err)
	}
	// Expired, not swept yet: the old session's last access tells.
	clock.Advance(3 * time.Hour)
	s2, err := db.ActiveSession(ctx, c)
	if err != nil || s2.ID == s1.ID || s2.Idle != 3*time.Hour {
		t.Fatalf("after 3 h idle: %+v, %v; want a new session with Idle 3h", s2, err)
	}
	if s, _ := db.ActiveSession(ctx, c); s.ID != s2.ID || s.Idle != 0 {
		t.Fatalf("the new session read again: %+v; want no Idle", s)
	}
	if s, _ := db.NewSession(ctx, c); s.Idle != 0 {
		t.Fatalf("/new's session: %+v; want no Idle", s)
	}
	// Swept: the session is gone, its reply is not.
	clock.Advance(5 * time.Hour)
	if n, err := db.ExpireSessions(ctx); err != nil || n == 0 {
		t.Fatalf("expire = %d, %v", n, err)
	}
	s3, err := db.ActiveSession(ctx, c)
	if err != nil || s3.Idle != 5*time.Hour+50*time.Minute+3*time.Hour {
		t.Fatalf("after the sweep: %+v, %v; want Idle since the last reply (8h50m)", s3, err)
	}
}

// testNoIdleAfterNew: a session /new started that nobody used forgets
// nothing when it expires, and the user who sent /new knows the
// conversation started over: the next session has no Idle, whether the
// /new session was still there or already swept (then the last reply is
// /new's own, which no model wrote).
func testNoIdleAfterNew(t *testing.T, e Engine) {
	clock := NewClock()
	db := e.open(t, store.Options{Now: clock.Now, SessionTTL: time.Hour})
	for _, swept := range []bool{false, true} {
		c := conv(fmt.Sprintf("idle-after-new-%v", swept))
		s1, err := db.ActiveSession(ctx, c)
		check(t, "first session", err)
		req := mustEnqueue(t, db, msg(c, "1", "question"))
		_, err = db.SaveReply(ctx, &core.Reply{RequestID: req, SessionID: s1.ID, Conversation: c, Text: "answer", Parts: []string{"answer"}, Model: "fake/m"},
			[]core.ChatMessage{{Role: core.RoleUser, Content: "question"}, {Role: core.RoleAssistant, Content: "answer"}})
		check(t, "reply", err)
		clock.Advance(10 * time.Minute)
		s2, err := db.NewSession(ctx, c)
		check(t, "/new", err)
		req = mustEnqueue(t, db, msg(c, "2", "/new"))
		_, err = db.SaveReply(ctx, &core.Reply{RequestID: req, SessionID: s2.ID, Conversation: c, Text: "Started a new conversation.", Parts: []string{"Started a new conversation."}}, nil)
		check(t, "/new's reply", err)
		clock.Advance(3 * time.Hour)
		if swept {
			if n, err := db.ExpireSessions(ctx); err != nil || n == 0 {
				t.Fatalf("expire = %d, %v", n, err)
			}
		}
		if s3, err := db.ActiveSession(ctx, c); err != nil || s3.ID == s2.ID || s3.Idle != 0 {
			t.Fatalf("3 h after /new (swept %v): %+v, %v; want a new session with no Idle", swept, s3, err)
		}
	}
}
