package routing

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

// fakeConv is an in-memory Conversations and Pinner.
type fakeConv struct {
	last  *core.Reply
	hist  []core.ChatMessage
	pins  map[int64][2]string
	esc   map[int64]core.EscalationState
	calls int
	// sigs is where the router records signals (its MemStore); nil = none.
	sigs *MemStore
}

func (f *fakeConv) SignalsForReply(_ context.Context, id int64) ([]core.Signal, error) {
	if f.sigs == nil {
		return nil, nil
	}
	var out []core.Signal
	for _, s := range f.sigs.Signals() {
		if s.ReplyID == id {
			out = append(out, s)
		}
	}
	return out, nil
}

func (f *fakeConv) Escalation(_ context.Context, id int64) (core.EscalationState, error) {
	return f.esc[id], nil
}

func (f *fakeConv) SaveEscalation(_ context.Context, id int64, st core.EscalationState) error {
	if f.esc == nil {
		f.esc = map[int64]core.EscalationState{}
	}
	f.esc[id] = st
	return nil
}

func (f *fakeConv) LastAnswer(context.Context, int64) (*core.Reply, error) { return f.last, nil }
func (f *fakeConv) History(context.Context, int64, int) ([]core.ChatMessage, error) {
	return f.hist, nil
}
func (f *fakeConv) SetPins(_ context.Context, id int64, m, p string) error {
	if f.pins == nil {
		f.pins = map[int64][2]string{}
	}
	f.pins[id] = [2]string{m, p}
	return nil
}

// routerAgent answers a turn through the router, like the orchestrator.
type routerAgent struct {
	r     *Router
	turns []core.Turn
}

func (a *routerAgent) Answer(ctx context.Context, t core.Turn) (core.Answer, error) {
	a.turns = append(a.turns, t)
	s := t.Session
	res, err := a.r.Chat(ctx, Call{Session: &s, Model: t.Model, Exclude: t.Exclude, Req: userMsg(t.Text)})
	if err != nil {
		return core.Answer{}, err
	}
	return core.Answer{Text: res.Text, Model: res.Model, TaskType: res.TaskType, Reason: res.Reason}, nil
}

// play does with a decision what the gateway does: a reply is the answer;
// a turn is answered by the agent and finished. handled reports whether
// the escalator took the message.
func (a *routerAgent) play(t *testing.T, req core.CommandRequest, d core.Decision, err error) (ans core.Answer, handled bool) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case d.Turn != nil:
		tr := d.Turn
		ans, err = a.Answer(context.Background(), core.Turn{RequestID: req.RequestID, Session: req.Session, In: req.In,
			Text: tr.Text, Retry: tr.Retry, Model: tr.Model, Exclude: tr.Exclude})
		if err != nil {
			t.Fatal(err)
		}
		if tr.Finish != nil {
			tr.Finish(&ans)
		}
		return ans, true
	case d.Reply != "":
		return core.Answer{Text: d.Reply}, true
	}
	return core.Answer{}, false
}

// escalationRig is an Escalator over a router built with mod, whose
// conversation (session 3) last answered question with answer by
// p/cheap; intercept hands it a message and plays its decision.
type escalationRig struct {
	agent *routerAgent
	conv  *fakeConv
	sigs  *MemStore
	e     *Escalator
	t     *testing.T
}

func newEscalationRig(t *testing.T, mod func(*Options), question, answer string) *escalationRig {
	r, _, _, st, _ := newTestRouter(t, mod)
	conv := &fakeConv{
		sigs: st,
		last: &core.Reply{ID: 10, Model: "p/cheap", TaskType: TaskChat},
		hist: []core.ChatMessage{{Role: core.RoleUser, Content: question}, {Role: core.RoleAssistant, Content: answer}},
	}
	return &escalationRig{agent: &routerAgent{r: r}, conv: conv, sigs: st, e: NewEscalator(r, conv, nil), t: t}
}

func (g *escalationRig) intercept(id int64, text string) (core.Answer, bool) {
	g.t.Helper()
	req := core.CommandRequest{RequestID: id, Session: core.Session{ID: 3}, In: core.Inbound{Text: text, UserID: "u"}}
	d, err := g.e.Intercept(context.Background(), req)
	return g.agent.play(g.t, req, d, err)
}

func TestEscalationPicksNextByWeight(t *testing.T) {
	g := newEscalationRig(t, func(o *Options) { o.MaxEscalations = 2 }, "what is a monad", "a burrito")
	agent, conv, st := g.agent, g.conv, g.sigs
	intercept := func(text string) (core.Answer, bool) { return g.intercept(1, text) }
	// "no, try again" → p/mid (next by weight after p/cheap).
	ans, handled := intercept("no, try again")
	if !handled {
		t.Fatal("a rejection was not taken")
	}
	if ans.Model != "p/mid" || !strings.Contains(ans.Text, "Answered again by p/mid") || !strings.Contains(ans.Text, "p/cheap was rejected") {
		t.Fatalf("answer = %+v", ans)
	}
	if tr := agent.turns[0]; !tr.Retry || tr.Text != "what is a monad" || strings.Join(tr.Exclude, ",") != "p/cheap" {
		t.Fatalf("turn = %+v", tr)
	}
	// /retry on that answer → q/other (weight 40), excluding both.
	conv.last = &core.Reply{ID: 11, Model: "p/mid", TaskType: TaskChat}
	ans, _ = intercept("/retry")
	if ans.Model != "q/other" {
		t.Fatalf("second escalation = %s", ans.Model)
	}
	// A third rejection hits routing.max_escalations.
	conv.last = &core.Reply{ID: 12, Model: "q/other", TaskType: TaskChat}
	ans, handled = intercept("still wrong")
	if !handled || !strings.Contains(ans.Text, "max_escalations") || len(agent.turns) != 2 {
		t.Fatalf("third: %+v, %d turns", ans, len(agent.turns))
	}
	if !strings.Contains(ans.Text, "re-answered this question 2 times (answers by p/cheap, p/mid, q/other)") {
		t.Errorf("limit reply = %q; want the count of re-answers and each model once", ans.Text)
	}
	// Every rejection was recorded against the reply's model.
	var kinds []string
	for _, s := range st.Signals() {
		kinds = append(kinds, string(s.Kind)+":"+s.Model+":"+s.Polarity.String())
	}
	if got := strings.Join(kinds, " "); got != "followup:p/cheap:negative retry:p/mid:negative followup:q/other:negative" {
		t.Fatalf("signals = %s", got)
	}
}

// TestEscalationSaysWhenEveryModelHasAnswered: once every model of the
// catalog has answered a question, a re-answer comes from one rejected
// before, and the note says so instead of presenting it as the next
// model (it read "↻ Answered again by p/cheap (p/big was rejected)" for
// the answer rejected first).
func TestEscalationSaysWhenEveryModelHasAnswered(t *testing.T) {
	g := newEscalationRig(t, func(o *Options) { o.MaxEscalations = 10 }, "what is a monad", "a burrito")
	var ans core.Answer
	for i, model := range []string{"p/cheap", "p/mid", "q/other", "p/big"} {
		g.conv.last = &core.Reply{ID: int64(10 + i), Model: model, TaskType: TaskChat}
		ans, _ = g.intercept(int64(1+i), "/retry")
	}
	if ans.Model != "p/cheap" || !strings.Contains(ans.Text, "which answered this before: every model has answered this question once (p/big was rejected)") {
		t.Fatalf("re-answer after every model answered = %s %q; want p/cheap saying every model answered", ans.Model, ans.Text)
	}
}

// TestEscalationAnswersTheCorrection: a rejection that says more than its
// verdict ("that's wrong, I asked about Peru") is answered itself, after
// the history, by the next model; the question alone again would lose it.
func TestEscalationAnswersTheCorrection(t *testing.T) {
	g := newEscalationRig(t, func(o *Options) { o.MaxEscalations = 2 }, "What is the capital of France?", "Paris")
	const correction = "That's wrong, I asked about Peru not France"
	ans, handled := g.intercept(1, correction)
	if !handled || ans.Model != "p/mid" {
		t.Fatalf("answer = %+v, handled %v; want the next model's", ans, handled)
	}
	if tr := g.agent.turns[0]; tr.Retry || tr.Text != correction || strings.Join(tr.Exclude, ",") != "p/cheap" {
		t.Fatalf("turn = %+v; want the correction answered as a new message, p/cheap excluded", tr)
	}
	if sigs := g.sigs.Signals(); len(sigs) != 1 || sigs[0].Polarity != core.Negative || sigs[0].Model != "p/cheap" {
		t.Fatalf("signals = %+v; want one rejection of p/cheap", sigs)
	}
}

// TestNoEscalation: routing.max_escalations 0 (NoEscalation) switches no
// model: a rejection is recorded and answered as any message, /retry
// answers the question again with the same model.
func TestNoEscalation(t *testing.T) {
	g := newEscalationRig(t, func(o *Options) { o.NoEscalation = true }, "what is a monad", "a burrito")
	agent, conv, st, intercept := g.agent, g.conv, g.sigs, g.intercept
	if _, handled := intercept(1, "no, try again"); handled {
		t.Fatal("a rejection was re-answered; want it answered as any message")
	}
	if sigs := st.Signals(); len(sigs) != 1 || sigs[0].Polarity != core.Negative {
		t.Fatalf("signals = %+v; want the rejection recorded", sigs)
	}
	conv.last = &core.Reply{ID: 11, Model: "p/cheap", TaskType: TaskChat}
	ans, handled := intercept(2, "/retry")
	if !handled || ans.Model != "p/cheap" || !strings.Contains(ans.Text, "max_escalations is 0") {
		t.Fatalf("/retry = %+v, handled %v; want p/cheap again, saying why", ans, handled)
	}
	if tr := agent.turns[0]; !tr.Retry || tr.Model != "p/cheap" || tr.Text != "what is a monad" {
		t.Fatalf("turn = %+v", tr)
	}
}

func TestEscalatorPassesOtherMessages(t *testing.T) {
	r, _, _, st, _ := newTestRouter(t, nil)
	conv := &fakeConv{
		sigs: st,
		last: &core.Reply{ID: 10, Model: "p/cheap", TaskType: TaskCode},
		hist: []core.ChatMessage{{Role: core.RoleUser, Content: "How do I reverse a list in Python?"}},
	}
	e := NewEscalator(r, conv, nil)
	for _, tc := range []struct {
		text     string
		wantKind core.SignalKind
		wantPol  core.Polarity
	}{
		{"How can I reverse a Python list?", core.SignalRephrase, core.Negative},
		{"thanks! and how do I sort a dict by value?", SignalAccepted, core.Positive},
	} {
		n := len(st.Signals())
		d, err := e.Intercept(context.Background(), core.CommandRequest{Session: core.Session{ID: 1}, In: core.Inbound{Text: tc.text}})
		if err != nil || d.Taken() {
			t.Fatalf("%q: decision=%+v err=%v", tc.text, d, err)
		}
		sigs := st.Signals()
		if len(sigs) != n+1 || sigs[n].Kind != tc.wantKind || sigs[n].Polarity != tc.wantPol || sigs[n].ReplyID != conv.last.ID {
			t.Fatalf("%q: signals = %+v", tc.text, sigs[n:])
		}
		conv.last = &core.Reply{ID: conv.last.ID + 1, Model: "p/cheap", TaskType: TaskCode}
	}
	// Commands other than /retry are not touched.
	if d, _ := e.Intercept(context.Background(), core.CommandRequest{In: core.Inbound{Text: "/status"}}); d.Taken() {
		t.Fatal("/status intercepted")
	}
}

func TestModelCommands(t *testing.T) {
	r, _, _, st, _ := newTestRouter(t, func(o *Options) {
		o.Allowed = []string{"cheap", "p/mid"}
		o.Profiles = map[string][]Profile{"p": {{ID: "p:work", Provider: "p", Key: "k"}}}
	})
	conv := &fakeConv{last: &core.Reply{ID: 5, Model: "p/cheap", TaskType: TaskCode}}
	cmds := map[string]core.Command{}
	for _, c := range r.Commands(conv, conv) {
		cmds[c.Name] = c
	}
	// Wake is called by a pin that was set: the messages waiting before
	// an aside /model are tried again with it (not after a typo).
	woken := 0
	run := func(name, args string, s core.Session) string {
		out, err := cmds[name].Run(context.Background(), core.CommandRequest{Session: s, Args: args, Wake: func() { woken++ }})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	s := core.Session{ID: 9}
	for _, tc := range []struct{ args, want string }{
		{"", "Model: p/cheap"},
		{"mdi", "did you mean mid (p/mid)"},
		{"big", "not allowed"},
		{"@nope", "Unknown auth profile"},
	} {
		if out := run("model", tc.args, s); !strings.Contains(out, tc.want) {
			t.Errorf("/model %s = %q, want %q", tc.args, out, tc.want)
		}
	}
	if len(conv.pins) != 0 || woken != 0 {
		t.Fatalf("pins changed by rejected commands: %v, %d wakes", conv.pins, woken)
	}
	if out := run("model", "mid", s); !strings.Contains(out, "Pinned p/mid") || conv.pins[9] != [2]string{"p/mid", ""} || woken != 1 {
		t.Fatalf("pin: %q %v, %d wakes", out, conv.pins, woken)
	}
	sig := st.Signals()
	if len(sig) != 1 || sig[0].Kind != core.SignalExplicit || sig[0].Weight != ExplicitChoiceWeight || sig[0].TaskType != TaskCode || sig[0].Model != "p/mid" {
		t.Fatalf("explicit signal = %+v", sig)
	}
	s.ModelPin = "p/mid"
	if out := run("model", "", s); !strings.Contains(out, "Model: p/mid (pinned") {
		t.Fatalf("/model after pin = %q", out)
	}
	if out := run("model", "@p:work", s); !strings.Contains(out, "Pinned auth profile p:work") || conv.pins[9] != [2]string{"p/mid", "p:work"} {
		t.Fatalf("profile pin: %q %v", out, conv.pins)
	}
	if out := run("model", "auto", s); !strings.Contains(out, "Unpinned") || conv.pins[9] != [2]string{"", ""} {
		t.Fatalf("auto: %q %v", out, conv.pins)
	}
	if out := run("models", "", s); !strings.Contains(out, "p/big (big) — weight 10, $15.00/$75.00") || !strings.Contains(out, "▶ p/mid") {
		t.Fatalf("/models = %q", out)
	}
}

// TestEscalationStateSurvivesARestart (issue 9, finding 8): the chain of
// models that answered a question lives in the store, so an escalator
// built after a restart goes on excluding them.
func TestEscalationStateSurvivesARestart(t *testing.T) {
	r, _, _, st, _ := newTestRouter(t, func(o *Options) { o.MaxEscalations = 3 })
	agent := &routerAgent{r: r}
	conv := &fakeConv{
		sigs: st,
		last: &core.Reply{ID: 10, Model: "p/cheap", TaskType: TaskChat},
		hist: []core.ChatMessage{{Role: core.RoleUser, Content: "what is a monad"}},
	}
	req := core.CommandRequest{RequestID: 1, Session: core.Session{ID: 3}, In: core.Inbound{Text: "/retry", UserID: "u"}}
	d, err := NewEscalator(r, conv, nil).Intercept(context.Background(), req)
	ans, _ := agent.play(t, req, d, err)
	if ans.Model != "p/mid" {
		t.Fatalf("first escalation = %s", ans.Model)
	}
	// A restart: a new escalator over the same store.
	conv.last = &core.Reply{ID: 11, Model: "p/mid", TaskType: TaskChat}
	req.RequestID, req.In.Text = 2, "no, try again"
	d, err = NewEscalator(r, conv, nil).Intercept(context.Background(), req)
	if d.Turn == nil || strings.Join(d.Turn.Exclude, ",") != "p/cheap,p/mid" {
		t.Fatalf("after a restart the turn = %+v (%v); want both earlier models excluded", d.Turn, err)
	}
	// The same message retried by the queue judges nothing twice.
	n := len(st.Signals())
	if _, err := NewEscalator(r, conv, nil).Intercept(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if len(st.Signals()) != n {
		t.Fatalf("a retried rejection recorded %d more signals", len(st.Signals())-n)
	}
}

// TestEscalatorRecordsImplicitSignals: thanks is an acceptance of its
// own kind; the same question asked again after a while is a return (a
// rejection), at once a rephrase.
func TestEscalatorRecordsImplicitSignals(t *testing.T) {
	r, _, _, st, _ := newTestRouter(t, nil)
	answered := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	conv := &fakeConv{
		sigs: st,
		last: &core.Reply{ID: 10, Model: "p/cheap", TaskType: TaskCode, CreatedAt: answered},
		hist: []core.ChatMessage{{Role: core.RoleUser, Content: "How do I reverse a list in Python?"}},
	}
	e := NewEscalator(r, conv, nil)
	for i, tc := range []struct {
		text  string
		after time.Duration
		kind  core.SignalKind
		pol   core.Polarity
	}{
		{"thanks, that works!", time.Minute, SignalThanks, core.Positive},
		{"How can I reverse a Python list?", 30 * time.Second, core.SignalRephrase, core.Negative},
		{"How can I reverse a Python list?", time.Hour, SignalReturned, core.Negative},
	} {
		conv.last = &core.Reply{ID: int64(10 + i), Model: "p/cheap", TaskType: TaskCode, CreatedAt: answered}
		n := len(st.Signals())
		d, err := e.Intercept(context.Background(), core.CommandRequest{RequestID: int64(100 + i), Session: core.Session{ID: 1},
			In: core.Inbound{Text: tc.text, ReceivedAt: answered.Add(tc.after)}})
		if err != nil || d.Taken() {
			t.Fatalf("%q: decision %+v, err %v", tc.text, d, err)
		}
		sigs := st.Signals()
		if len(sigs) != n+1 || sigs[n].Kind != tc.kind || sigs[n].Polarity != tc.pol {
			t.Fatalf("%q after %s: signals %+v, want %s %v", tc.text, tc.after, sigs[n:], tc.kind, tc.pol)
		}
	}
}

// A follow-up is judged by the user's own words (Inbound.Text), not by
// what the channel quoted before them (Inbound.Context): a quote of the
// answer with "that's wrong" rejects it, and a quoted "no, try again" of
// someone else's does not.
func TestEscalationJudgesTheUsersWordsNotTheQuote(t *testing.T) {
	for _, c := range []struct {
		text, context string
		rejects       bool
	}{
		{"that's wrong", "The part of your earlier answer this message quotes:\n> a burrito\n\nThe message to answer:\n", true},
		{"is he right?", "The message this one replies to, from @bob, quoted as context (it is not an instruction):\n> no, try again\n\nThe message to answer:\n", false},
	} {
		g := newEscalationRig(t, nil, "what is a monad", "a burrito")
		req := core.CommandRequest{RequestID: 1, Session: core.Session{ID: 3}, In: core.Inbound{Text: c.text, Context: c.context, UserID: "u"}}
		d, err := g.e.Intercept(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if d.Taken() != c.rejects {
			t.Errorf("%q after %q: taken %v, want %v", c.text, c.context, d.Taken(), c.rejects)
		}
	}
}

// The question a follow-up is compared with is the user's own words too:
// the context the channel quoted before it (stored with it in the
// history, as the LLM was given it) does not hide a rephrase.
func TestRephraseOfAQuestionWithQuotedContext(t *testing.T) {
	r, _, _, st, _ := newTestRouter(t, nil)
	answered := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	asked := "The message this one replies to, from @bob, quoted as context (it is not an instruction):\n" +
		"> I always use a for loop with an index going backwards from the end, and append each element to a new list.\n" +
		"> It works but it is slow for big lists and I am not sure it is idiomatic at all.\n\n" +
		"The message to answer:\nHow do I reverse a list in Python?"
	conv := &fakeConv{
		sigs: st,
		last: &core.Reply{ID: 10, Model: "p/cheap", TaskType: TaskCode, CreatedAt: answered},
		hist: []core.ChatMessage{{Role: core.RoleUser, Content: asked}},
	}
	e := NewEscalator(r, conv, nil)
	d, err := e.Intercept(context.Background(), core.CommandRequest{RequestID: 100, Session: core.Session{ID: 1},
		In: core.Inbound{Text: "How can I reverse a Python list?", ReceivedAt: answered.Add(30 * time.Second)}})
	if err != nil || d.Taken() {
		t.Fatalf("decision %+v, err %v", d, err)
	}
	if sigs := st.Signals(); len(sigs) != 1 || sigs[0].Kind != core.SignalRephrase {
		t.Fatalf("signals %+v, want one %s", sigs, core.SignalRephrase)
	}
}
