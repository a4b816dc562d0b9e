package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing"
	"github.com/opentalon/opentalon/routing/provider"
	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store"
)

// TestContextLengthErrorCompactsAndAsksAgain (issue 25, finding 14): a
// model whose catalog window is larger than what it really takes answers
// a long conversation with a 400 "context_length_exceeded"; no larger
// model can take over, so the history is compacted and the question asked
// again — the user gets an answer, not "the conversation is too long".
func TestContextLengthErrorCompactsAndAsksAgain(t *testing.T) {
	const limit = 4000 // bytes of messages the model really takes
	router, srv := limitedModel(t, limit, 128_000, func(n int) string {
		return fmt.Sprintf(`{"error":{"message":"This model's maximum context length is 1000 tokens. However, your messages resulted in %d tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, n/4)
	})

	db := openStore(t)
	ctx := context.Background()
	s := newSession(t, db, "1", "ann")
	sess, _ := db.ActiveSession(ctx, s.conv)
	appendOldTurns(t, db, sess.ID, 8)
	gen := &fakeGen{text: "SUMMARY: Ann asked eight questions."}
	o := New(Options{LLM: router, Store: db, Generator: gen, Compaction: Compaction{Model: "fake/m"}})

	ans, _ := s.ask(o, "NEW question")
	if ans.Text != "answer to NEW question" {
		t.Fatalf("answer = %q", ans.Text)
	}
	if len(gen.reqs) != 1 {
		t.Fatalf("compactions = %d, want 1", len(gen.reqs))
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("LLM requests = %d, want the refused one and the one after compaction", len(reqs))
	}
	var second strings.Builder
	for _, m := range reqs[1].Messages {
		second.WriteString(m.Content + "\n")
	}
	if !strings.Contains(reqs[1].System+second.String(), "SUMMARY: Ann asked") || strings.Contains(second.String(), "OLD-1 ") {
		t.Fatalf("the second request does not carry the summary in place of the old turns:\n%.600s", second.String())
	}
}

// TestContextLengthErrorOfOneLongMessage: when the message alone is too
// long, there is nothing to condense: the user is told, after one call.
func TestContextLengthErrorOfOneLongMessage(t *testing.T) {
	srv := providertest.NewOpenAI(t)
	srv.SetReply(func(r providertest.Received) providertest.Script {
		return providertest.Script{Status: 400, Body: `{"error":{"message":"prompt is too long","type":"invalid_request_error","code":"context_length_exceeded"}}`}
	})
	prov := provider.NewOpenAI(provider.Options{ID: "fake", BaseURL: srv.BaseURL()})
	router := newRouter(t, routing.Options{Providers: map[string]provider.Provider{"fake": prov},
		Catalog: []routing.Model{{Ref: "fake/m", Weight: 50, ContextWindow: 128_000}}})
	o := New(Options{LLM: router, History: history{}, Generator: &fakeGen{text: "S"}})
	_, err := o.Answer(context.Background(), core.Turn{Text: strings.Repeat("long ", 2000)})
	if core.ErrorKind(err) != core.KindContextTooLong {
		t.Fatalf("err = %v; want context too long", err)
	}
	if n := srv.Count(); n != 1 {
		t.Fatalf("LLM requests = %d, want 1", n)
	}
	// /new would not help: the user is told their message is too long.
	if msg := core.UserMessage(err); strings.Contains(msg, "/new") || !strings.Contains(msg, "your message (about 10 KB) is too long") {
		t.Fatalf("user reads %q; want their message named as too long, not /new", msg)
	}
}

// TestContextLengthErrorOfALongPasteInALongConversation: a 200 KB paste
// into a conversation with history: the history is condensed away and
// the model still refuses, so the paste is what is too long — the user
// is told so, not to send /new (which would not help), and the next,
// short message is answered.
func TestContextLengthErrorOfALongPasteInALongConversation(t *testing.T) {
	const limit = 100_000 // bytes of messages the model really takes
	router, _ := limitedModel(t, limit, 128_000, func(int) string {
		return `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 52000 tokens > 25000 maximum"}}`
	})

	db := openStore(t)
	ctx := context.Background()
	s := newSession(t, db, "1", "ann")
	sess, _ := db.ActiveSession(ctx, s.conv)
	appendOldTurns(t, db, sess.ID, 8)
	o := New(Options{LLM: router, Store: db, Generator: &fakeGen{text: "SUMMARY"}, Compaction: Compaction{Model: "fake/m"}})

	paste := strings.Repeat("paste ", 200_000/6)
	_, err := o.Answer(ctx, core.Turn{RequestID: 99, Session: sess, Text: paste,
		In: core.Inbound{Conversation: s.conv, UserID: s.user, Text: paste, MessageID: "99"}})
	if core.ErrorKind(err) != core.KindContextTooLong || !errors.Is(err, core.ErrMessageTooLong) {
		t.Fatalf("err = %v; want the message named as too long", err)
	}
	if msg := core.UserMessage(err); strings.Contains(msg, "/new") || !strings.Contains(msg, "your message (about 195 KB) is too long") {
		t.Fatalf("user reads %q; want their message named as too long, not /new", msg)
	}
	if ans, _ := s.ask(o, "short one"); ans.Text != "answer to short one" {
		t.Fatalf("next message: %q; want it answered", ans.Text)
	}
}

// TestUserToldOfCompactionTwiceInOneTurn: a turn whose history is
// compacted for the window and then again because the model still found
// the prompt too long is the conversation's first compaction: the user is
// told (state.compaction.notify), once.
func TestUserToldOfCompactionTwiceInOneTurn(t *testing.T) {
	const limit = 800 // bytes of messages the model really takes
	router, srv := limitedModel(t, limit, 4000, func(int) string {
		return `{"error":{"message":"prompt is too long","type":"invalid_request_error","code":"context_length_exceeded"}}`
	})

	db := openStore(t)
	ctx := context.Background()
	s := newSession(t, db, "1", "ann")
	sess, _ := db.ActiveSession(ctx, s.conv)
	appendOldTurns(t, db, sess.ID, 16)
	gen := &fakeGen{text: "SUMMARY: Ann asked many questions."}
	o := New(Options{LLM: router, Store: db, Generator: gen, Compaction: Compaction{Model: "fake/m", Notify: true}})

	ans, _ := s.ask(o, "NEW question")
	if len(gen.reqs) != 2 {
		t.Fatalf("compactions = %d; the test wants one for the window and one after the refusal (requests %d, answer %q)", len(gen.reqs), srv.Count(), ans.Text)
	}
	if !strings.HasPrefix(ans.Text, "answer to NEW question") || strings.Count(ans.Text, compactionNote) != 1 {
		t.Fatalf("answer = %q; want the answer and the compaction note once", ans.Text)
	}
}

// appendOldTurns stores n long question-and-answer turns ("OLD-<i>
// question …", "answer <i> …", about 180 tokens each) in session id.
// limitedModel is a router over one model, fake/m of window tokens in the
// catalog, whose server really takes limit bytes of messages: past them
// it refuses with a 400 whose body is tooLong(the bytes sent); under them
// it answers "answer to <the last user message>".
func limitedModel(t *testing.T, limit, window int, tooLong func(n int) string) (*routing.Router, *providertest.Server) {
	t.Helper()
	srv := providertest.NewOpenAI(t)
	srv.SetReply(func(r providertest.Received) providertest.Script {
		n := 0
		for _, m := range r.Messages {
			n += len(m.Content)
		}
		if n > limit {
			return providertest.Script{Status: 400, Body: tooLong(n)}
		}
		return providertest.Script{Text: "answer to " + r.LastUser()}
	})
	prov := provider.NewOpenAI(provider.Options{ID: "fake", BaseURL: srv.BaseURL()})
	return newRouter(t, routing.Options{Providers: map[string]provider.Provider{"fake": prov},
		Catalog: []routing.Model{{Ref: "fake/m", Weight: 50, ContextWindow: window}}}), srv
}

func appendOldTurns(t *testing.T, db *store.DB, id int64, n int) {
	t.Helper()
	filler := strings.Repeat("lorem ipsum ", 60)
	var hist []core.ChatMessage
	for i := 1; i <= n; i++ {
		hist = append(hist,
			core.ChatMessage{Role: core.RoleUser, Content: fmt.Sprintf("OLD-%d question %s", i, filler)},
			core.ChatMessage{Role: core.RoleAssistant, Content: fmt.Sprintf("answer %d %s", i, filler)})
	}
	if err := db.AppendMessages(context.Background(), id, hist); err != nil {
		t.Fatal(err)
	}
}

// TestIdleConversationIsToldItStartedAfresh: the first answer of a
// session started because the conversation had been idle past
// state.session_ttl (core.Session.Idle) says so and for how long; the
// next answer, and a session that did not start that way, do not.
func TestIdleConversationIsToldItStartedAfresh(t *testing.T) {
	srv := providertest.NewOpenAI(t)
	srv.SetReply(func(r providertest.Received) providertest.Script {
		return providertest.Script{Text: "answer to " + r.LastUser()}
	})
	prov := provider.NewOpenAI(provider.Options{ID: "fake", BaseURL: srv.BaseURL()})
	router := newRouter(t, routing.Options{Providers: map[string]provider.Provider{"fake": prov},
		Catalog: []routing.Model{{Ref: "fake/m", Weight: 50, ContextWindow: 128_000}}})
	db := openStore(t)
	ctx := context.Background()
	s := newSession(t, db, "1", "ann")
	sess, _ := db.ActiveSession(ctx, s.conv)
	o := New(Options{LLM: router, Store: db})

	turn := func(id int64, text string, idle time.Duration) string {
		t.Helper()
		sess.Idle = idle
		ans, err := o.Answer(ctx, core.Turn{RequestID: id, Session: sess, Text: text,
			In: core.Inbound{Conversation: s.conv, UserID: s.user, Text: text, MessageID: fmt.Sprint(id)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.SaveReply(ctx, &core.Reply{RequestID: id, SessionID: sess.ID, Conversation: s.conv, Text: ans.Text, Parts: []string{ans.Text}}, ans.Messages); err != nil {
			t.Fatal(err)
		}
		return ans.Text
	}
	// A schedule's firing (or a plugin's message) that starts the session
	// after idle is nobody's question: its answer carries no note.
	sess.Idle = 26 * time.Hour
	fired, err := o.Answer(ctx, core.Turn{RequestID: 100, Session: sess, Text: "daily report",
		In: core.Inbound{Conversation: s.conv, UserID: s.user, Text: "daily report", MessageID: "schedule:1:1", Origin: core.OriginSchedule}})
	if err != nil || fired.Text != "answer to daily report" {
		t.Fatalf("a firing after idle answered %q, %v; want no note", fired.Text, err)
	}
	want := "answer to hello\n\n_(Nothing had been said here for 1 day 2 hours, so this is a new conversation: I no longer see the earlier messages.)_"
	if got := turn(1, "hello", 26*time.Hour); got != want {
		t.Fatalf("first answer after idle = %q; want %q", got, want)
	}
	// The same session later (Idle is only on the session as started;
	// here the history is no longer empty).
	if got := turn(2, "more", 26*time.Hour); got != "answer to more" {
		t.Fatalf("second answer = %q; want no note", got)
	}
	fresh := newSession(t, db, "2", "bob")
	sess, _ = db.ActiveSession(ctx, fresh.conv)
	s = fresh
	if got := turn(3, "hi", 0); got != "answer to hi" {
		t.Fatalf("a first session's answer = %q; want no note", got)
	}
}

// TestStatusShowsHowFullTheContextIs: /status says how much of the
// model's window the conversation fills (as the next answer estimates
// it), so a user sees a compaction or /new coming; without a known model
// or window it says nothing.
func TestStatusShowsHowFullTheContextIs(t *testing.T) {
	hist := history{{Role: core.RoleUser, Content: strings.Repeat("q", 40_000)}, {Role: core.RoleAssistant, Content: strings.Repeat("a", 40_000)}}
	o := New(Options{LLM: &fakeLLM{window: 128_000}, History: hist})
	used := len(o.prompt)/4 + 8 + 2*(10_000+4)
	want := fmt.Sprintf("context about %s of 128,000 tokens, %d%% full", thousands(used), 100*used/128_000)
	if !strings.HasPrefix(want, "context about 20,") {
		t.Fatalf("the test's own estimate %q is off", want)
	}
	var _ core.ContextReporter = o
	for _, tc := range []struct {
		name string
		s    core.Session
		o    *Orchestrator
		want string
	}{
		{"the latest answer's model", core.Session{State: core.SessionState{ActiveModel: "fake/m"}}, o, want},
		{"a /model pin", core.Session{ModelPin: "fake/m"}, o, want},
		{"no answer yet", core.Session{}, o, ""},
		{"an unknown window", core.Session{ModelPin: "fake/m"}, New(Options{LLM: &fakeLLM{}, History: hist}), ""},
	} {
		if got := tc.o.ContextUse(context.Background(), tc.s); got != tc.want {
			t.Errorf("%s: context use = %q; want %q", tc.name, got, tc.want)
		}
	}
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 128_000: "128,000", 1_234_567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestFailedCompactionIsNotRetriedOnEveryMessage: when the compaction
// call fails, the turn trims; the conversation's next messages trim too
// instead of each waiting for the failing call again, until
// compactPause has passed.
func TestFailedCompactionIsNotRetriedOnEveryMessage(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	s := newSession(t, db, "1", "ann")
	sess, _ := db.ActiveSession(ctx, s.conv)
	appendOldTurns(t, db, sess.ID, 16)
	gen := &fakeGen{} // an empty summary: the compaction fails
	now := time.Unix(1_780_000_000, 0)
	llm := &fakeLLM{text: "ok", window: 4000}
	o := New(Options{LLM: llm, Store: db, Generator: gen, Compaction: Compaction{Model: "fake/cheap", Notify: true}, Now: func() time.Time { return now }})

	// The user is told once that older messages were left out.
	for i, want := range []string{"ok\n\n" + trimNote, "ok", "ok"} {
		if ans, _ := s.ask(o, fmt.Sprint("question ", i)); ans.Text != want {
			t.Fatalf("answer %d = %q; want %q", i, ans.Text, want)
		}
		now = now.Add(time.Minute)
	}
	if n := len(gen.reqs); n != 1 {
		t.Fatalf("compaction calls = %d over three messages; want 1, then trimming while paused", n)
	}
	// Each answer still fits the window.
	for i, c := range llm.calls {
		if over(c.Req.System, c.Req.Messages, 4000) {
			t.Fatalf("call %d was sent over the window", i)
		}
	}
	// After the pause, compaction is tried again (and now works).
	now = now.Add(compactPause)
	gen.text = "SUMMARY: Ann asked many questions."
	s.ask(o, "fourth")
	if n := len(gen.reqs); n != 2 {
		t.Fatalf("compaction calls = %d after the pause; want a second try", n)
	}
	if st := s.state(); st.Compactions != 1 {
		t.Fatalf("compactions = %d; want 1", st.Compactions)
	}
}

// TestLongConversationOfShortMessagesIsCompacted: a conversation whose
// messages are few tokens but many is compacted before its oldest
// messages fall out of the history loaded (MaxHistory), instead of
// losing them without a summary.
func TestLongConversationOfShortMessagesIsCompacted(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	s := newSession(t, db, "1", "ann")
	sess, _ := db.ActiveSession(ctx, s.conv)
	appendOldTurns(t, db, sess.ID, 9) // 18 messages, far below the window
	gen := &fakeGen{text: "SUMMARY: Ann's name, and the number 4711 she gave."}
	llm := &fakeLLM{text: "ok", window: 128_000}
	o := New(Options{LLM: llm, Store: db, Generator: gen, Compaction: Compaction{Model: "fake/cheap", Notify: true}, MaxHistory: 20})

	ans, _ := s.ask(o, "next")
	if len(gen.reqs) != 1 {
		t.Fatalf("compactions = %d with 18 of at most 20 messages loaded; want 1", len(gen.reqs))
	}
	if !strings.Contains(gen.reqs[0].Messages[1].Content, "OLD-1 ") {
		t.Fatalf("the summary was not asked of the oldest turns:\n%.300s", gen.reqs[0].Messages[1].Content)
	}
	var sent strings.Builder
	for _, m := range llm.calls[0].Req.Messages {
		sent.WriteString(m.Content + "\n")
	}
	if !strings.Contains(llm.calls[0].Req.System+sent.String(), "4711") || strings.Contains(sent.String(), "OLD-1 ") {
		t.Fatalf("the answer's request does not carry the summary in place of the oldest turns:\n%.600s", sent.String())
	}
	if !strings.Contains(ans.Text, compactionNote) {
		t.Fatalf("answer = %q; want the compaction note", ans.Text)
	}
	if h, _ := db.History(ctx, sess.ID, 100); len(h) > 1+10+2 {
		t.Fatalf("the stored history has %d messages after compaction; want at most the summary, half of MaxHistory and this turn's two", len(h))
	}
}

// tooLongLLM answers a tool call first, then refuses the prompt as too
// long once it holds the tool's result.
type tooLongLLM struct{ calls int }

func (l *tooLongLLM) Chat(_ context.Context, c routing.Call) (routing.Result, error) {
	l.calls++
	if m := c.Req.Messages; len(m) > 0 && m[len(m)-1].Role == core.RoleTool {
		return routing.Result{Model: "fake/m"}, &core.Error{Kind: core.KindContextTooLong, Msg: "provider fake: HTTP 400: prompt too long for the model; start a new session (/new) or pick a model with a larger context_window"}
	}
	return routing.Result{Response: &provider.Response{ToolCalls: []core.ToolCall{{ID: "1", Plugin: "p", Action: "a"}}}, Model: "fake/m"}, nil
}
func (l *tooLongLLM) ContextWindow(string) int { return 8000 }

// TestContextLengthErrorAfterToolResults: when a tool's result is what
// makes the prompt too long, the user is told that, not only "the
// conversation is too long".
func TestContextLengthErrorAfterToolResults(t *testing.T) {
	tools := fakeTools{run: func(_ context.Context, c core.ToolCall) core.ToolResult {
		return core.ToolResult{CallID: c.ID, Content: strings.Repeat("row ", 15_000)}
	}}
	o := New(Options{LLM: &tooLongLLM{}, History: history{}, Tools: tools})
	_, err := o.Answer(context.Background(), core.Turn{Text: "list every row"})
	if core.ErrorKind(err) != core.KindContextTooLong || !errors.Is(err, core.ErrToolResultsTooLong) {
		t.Fatalf("err = %v; want the tool results named", err)
	}
	if msg := core.UserMessage(err); !strings.Contains(msg, "the tools' results (about ") || !strings.Contains(msg, "Ask for less at a time") {
		t.Fatalf("user reads %q; want the tools' results named and what to do", msg)
	}
}
