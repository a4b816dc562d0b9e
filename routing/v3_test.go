package routing

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider"
	"github.com/opentalon/opentalon/store"
)

// TestPriorsFromWeightsAsDocumented: before any evidence an arm's
// estimate is its prior from the catalog weight (docs/routing.md, "The
// choice rule": mean 0.5 + 0.4·w/100, strength 2 + 8·w/100), its utility
// that less λ × its relative price, and the incumbent the best of those;
// a heavily weighted model starts more confident than a lightly weighted
// one.
func TestPriorsFromWeightsAsDocumented(t *testing.T) {
	for _, tc := range []struct {
		weight         int
		mean, strength float64
	}{{0, 0.5, 2}, {25, 0.6, 4}, {50, 0.7, 6}, {100, 0.9, 10}} {
		p := priorOf(Model{Weight: tc.weight})
		if math.Abs(p.mean-tc.mean) > 1e-12 || math.Abs(p.strength-tc.strength) > 1e-12 {
			t.Errorf("weight %d: prior %+v, want mean %v strength %v", tc.weight, p, tc.mean, tc.strength)
		}
	}
	if hi, lo := posteriorOf(priorOf(Model{Weight: 95}), core.Affinity{}, time.Time{}, 0), posteriorOf(priorOf(Model{Weight: 5}), core.Affinity{}, time.Time{}, 0); hi.sd() >= lo.sd() {
		t.Errorf("weight 95 starts with sd %v, weight 5 with %v; a heavy weight should start more confident", hi.sd(), lo.sd())
	}

	// Through the router: one signal on big makes chat learned; the other
	// arms show their priors, and the incumbent is the best prior utility.
	r, _, _, _, clk := newTestRouter(t, nil)
	ctx := context.Background()
	if err := r.RecordSignal(ctx, core.Signal{Kind: core.SignalReaction, Polarity: core.Positive, Model: "p/big", TaskType: TaskChat, At: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	e := r.Explain(ctx, TaskChat)
	maxPrice := Model{CostIn: 15, CostOut: 75}.Price()
	best, bestU := "", math.Inf(-1)
	for _, m := range testCatalog() {
		var a ArmStanding
		for _, x := range e.Arms {
			if x.Model == m.Ref {
				a = x
			}
		}
		if m.Ref == "p/big" {
			continue
		}
		p := priorOf(m)
		if math.Abs(a.Acceptance-p.mean) > 1e-9 || a.Evidence != 0 {
			t.Errorf("%s: acceptance %v over %v, want its prior %v over 0", m.Ref, a.Acceptance, a.Evidence, p.mean)
		}
		if u := p.mean - DefaultCostWeight*m.Price()/maxPrice; math.Abs(a.Utility-u) > 1e-9 {
			t.Errorf("%s: utility %v, want %v", m.Ref, a.Utility, u)
		} else if u > bestU {
			best, bestU = m.Ref, u
		}
	}
	if e.Model != best || best != "p/cheap" {
		t.Fatalf("incumbent %q, want the best prior utility %q (the heavily weighted cheap model)", e.Model, best)
	}
	res, err := r.Chat(ctx, Call{TaskType: TaskChat, Req: userMsg("hi")})
	if err != nil || res.Model != "p/cheap" {
		t.Fatalf("first learned choice %q (%v), want p/cheap", res.Model, err)
	}
}

// betaSample draws from Beta(a, b) with two gamma draws.
func betaSample(rng *rand.Rand, a, b float64) float64 {
	x, y := gammaSample(rng, a), gammaSample(rng, b)
	return x / (x + y)
}

// gammaSample is Marsaglia and Tsang's method (with the boost for a < 1).
func gammaSample(rng *rand.Rand, a float64) float64 {
	if a < 1 {
		return gammaSample(rng, a+1) * math.Pow(rng.Float64(), 1/a)
	}
	d := a - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if math.Log(u) < 0.5*x*x+d-d*v+d*math.Log(v) {
			return d * v
		}
	}
}

// TestStopRuleNeverStopsAnArmThatCouldStillWin is the property test of
// the value-of-information stop: on random synthetic posteriors of the
// kind the router holds (the weakest prior's strength, 2, up to 400
// units of evidence; means from 5% to 99%; any prices), an arm the rule
// stops has, under the exact Beta posteriors, less than a 5% chance that
// its utility beats the incumbent's (the rule's nominal level is 2.3%).
// It must also stop something: a rule that never stops would pass
// vacuously.
func TestStopRuleNeverStopsAnArmThatCouldStillWin(t *testing.T) {
	rng := rand.New(rand.NewPCG(28, 1))
	post := func() posterior {
		n := PriorStrengthAt0 * math.Exp(rng.Float64()*math.Log(200)) // 2 .. 400
		m := 0.05 + 0.94*rng.Float64()
		return posterior{alpha: n * m, beta: n * (1 - m)}
	}
	const cases, draws = 1500, 3000
	stopped, worst := 0, 0.0
	for i := range cases {
		g, c := post(), post()
		relG, relC := rng.Float64(), rng.Float64()
		lambda := []float64{0.15, 0.3, 0.05}[i%3]
		if c.mean()-lambda*relC > g.mean()-lambda*relG {
			g, c, relG, relC = c, g, relC, relG // g is the incumbent: the higher mean utility
		}
		if couldWin(c, g, relC, relG, lambda, DefaultStopZ) {
			continue
		}
		stopped++
		wins := 0
		for range draws {
			if betaSample(rng, c.alpha, c.beta)-lambda*relC > betaSample(rng, g.alpha, g.beta)-lambda*relG {
				wins++
			}
		}
		p := float64(wins) / draws
		worst = max(worst, p)
		if p >= 0.05 {
			t.Errorf("stopped an arm that wins %.1f%% of the time: arm Beta(%.2f, %.2f) at price %.2f vs incumbent Beta(%.2f, %.2f) at %.2f, λ %.2f",
				100*p, c.alpha, c.beta, relC, g.alpha, g.beta, relG, lambda)
		}
	}
	if stopped < cases/5 {
		t.Fatalf("the rule stopped %d of %d arms; it should rule out the hopeless ones", stopped, cases)
	}
	t.Logf("stopped %d of %d arms; the most likely winner among them wins %.2f%%", stopped, cases, 100*worst)
}

// TestArmsTheValueTestSettlesAreStillProbed: an arm the value-of-
// information test leaves unsampled but that could still win is not
// stopped: it stays a candidate for the probes, and a probe re-checks it
// once it is due.
func TestArmsTheValueTestSettlesAreStillProbed(t *testing.T) {
	r, _, _, _, clk := newTestRouter(t, func(o *Options) {
		o.Probe = Probing{Rate: 0.5, StaleAfter: time.Hour}
	})
	ctx := context.Background()
	// mid is good for chat; cheap is a little worse, close enough that it
	// could still win but not by enough to pay for sampling it.
	for i := range 200 {
		clk.Advance(time.Minute)
		for _, m := range []struct {
			ref string
			ok  bool
		}{{"p/mid", i%20 < 19}, {"p/cheap", i%10 < 9}} {
			pol := core.Negative
			if m.ok {
				pol = core.Positive
			}
			if err := r.RecordSignal(ctx, core.Signal{Kind: core.SignalReaction, Polarity: pol, Model: m.ref, TaskType: TaskChat, At: clk.Now()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	e := r.Explain(ctx, TaskChat)
	var cheap ArmStanding
	for _, a := range e.Arms {
		if a.Model == "p/cheap" {
			cheap = a
		}
	}
	if e.Model != "p/mid" || cheap.Role != "settled" {
		t.Fatalf("incumbent %s, cheap %+v; want mid, with cheap settled but not ruled out", e.Model, cheap)
	}
	clk.Advance(2 * time.Hour)
	probed := false
	for range 20 {
		res, err := r.Chat(ctx, Call{Purpose: "chat", TaskType: TaskChat, Req: userMsg("x")})
		if err != nil {
			t.Fatal(err)
		}
		probed = probed || res.Exploration == Probed && res.Model == "p/cheap"
	}
	if !probed {
		t.Fatal("the settled arm was never probed once due")
	}
}

// collapseRun warms one model up on four task types, then makes it drop on
// all four at once and feeds their signals round robin; it returns how many
// signals after the drop the first detection took.
func collapseRun(t *testing.T, noModel bool) int {
	t.Helper()
	r, _, _, _, clk := newTestRouter(t, func(o *Options) { o.NoModelDetection = noModel })
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 7))
	tasks := []string{TaskChat, TaskCode, TaskTransform, TaskAnalysis}
	send := func(task string, p float64) {
		pol := core.Negative
		if rng.Float64() < p {
			pol = core.Positive
		}
		clk.Advance(time.Minute)
		if err := r.RecordSignal(ctx, core.Signal{Kind: core.SignalReaction, Polarity: pol, Model: "p/cheap", TaskType: task, At: clk.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	for range 80 {
		for _, task := range tasks {
			send(task, 0.9)
		}
	}
	detected := func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, task := range tasks {
			if st := r.arms[[2]string{task, "p/cheap"}]; st != nil && st.changeDir == changeDrop {
				return true
			}
		}
		return false
	}
	if detected() {
		t.Fatal("a drop was detected before the collapse")
	}
	for i := 1; i <= 400; i++ {
		send(tasks[i%len(tasks)], 0.4)
		if detected() {
			return i
		}
	}
	t.Fatal("the collapse was never detected")
	return 0
}

// TestCrossTaskCollapseDetectedFaster: a model that drops on every task
// type at once is noticed sooner by the model-wide detector (evidence
// shared across task types) than by the per-task detectors alone, on the
// same signals (fixed seed).
func TestCrossTaskCollapseDetectedFaster(t *testing.T) {
	pooled, alone := collapseRun(t, false), collapseRun(t, true)
	t.Logf("first detection after %d signals with the model-wide detector, %d with per-task detectors alone", pooled, alone)
	if pooled*3 > alone*2 {
		t.Fatalf("model-wide detection took %d signals, per-task alone %d; want it clearly faster", pooled, alone)
	}
}

// TestCrossTaskCollapseRestartsEveryDroppedTask: the model-wide detection
// is one event: every task type that dropped restarts its evidence, and
// the router moves traffic off the model on each of them.
func TestCrossTaskCollapseRestartsEveryDroppedTask(t *testing.T) {
	r, _, _, st, clk := newTestRouter(t, nil)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 9))
	tasks := []string{TaskChat, TaskCode, TaskTransform}
	send := func(model, task string, p float64) {
		pol := core.Negative
		if rng.Float64() < p {
			pol = core.Positive
		}
		clk.Advance(time.Minute)
		if err := r.RecordSignal(ctx, core.Signal{Kind: core.SignalReaction, Polarity: pol, Model: model, TaskType: task, At: clk.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	for range 80 {
		for _, task := range tasks {
			send("p/cheap", task, 0.92)
			send("q/other", task, 0.8)
		}
	}
	for i := 0; i < 60; i++ {
		send("p/cheap", tasks[i%len(tasks)], 0.3)
	}
	for _, task := range tasks {
		a := affinityOf(t, st, task, "p/cheap")
		if s := ScoreOf(a, clk.Now(), 30); s.Evidence > 60 || s.Score > 0.7 {
			t.Errorf("%s: cheap still has %.0f evidence at %.0f%% after the collapse", task, s.Evidence, 100*s.Score)
		}
		n := 0
		for range 50 {
			res, err := r.Chat(ctx, Call{TaskType: task, Req: userMsg("x")})
			if err != nil {
				t.Fatal(err)
			}
			if res.Model != "p/cheap" {
				n++
			}
		}
		if n < 35 {
			t.Errorf("%s: after the collapse only %d of 50 answers moved off cheap", task, n)
		}
	}
	e := r.Explain(ctx, TaskCode)
	if e.LastChange == nil || e.LastChange.Model != "p/cheap" || e.LastChange.Direction != "drop" {
		t.Fatalf("Explain(code).LastChange = %+v; want cheap's drop", e.LastChange)
	}
}

// restartFeed is a fixed signal stream: a long good history of cheap at
// code, then a drop.
func restartFeed() []core.Signal {
	rng := rand.New(rand.NewPCG(5, 5))
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var out []core.Signal
	for i := range 260 {
		p := 0.9
		if i >= 200 {
			p = 0.35
		}
		pol := core.Negative
		if rng.Float64() < p {
			pol = core.Positive
		}
		at = at.Add(time.Minute)
		out = append(out, core.Signal{Kind: core.SignalReaction, Polarity: pol, Model: "p/cheap", TaskType: TaskCode, At: at, RequestID: int64(i + 1)})
	}
	return out
}

// firstDrop feeds signals to r (and to the router next() returns after a
// restart at index stop) and returns the index of the signal the drop was
// detected with (-1 = none).
func firstDrop(t *testing.T, feed []core.Signal, start func() (*Router, func()), restartAt int) int {
	t.Helper()
	ctx := context.Background()
	r, stop := start()
	defer func() { stop() }()
	for i, s := range feed {
		if i == restartAt {
			// A deploy: the router goes away mid-detection and a new one
			// starts on the same database.
			if err := r.Drain(ctx); err != nil {
				t.Fatal(err)
			}
			stop()
			r, stop = start()
		}
		if err := r.RecordSignal(ctx, s); err != nil {
			t.Fatal(err)
		}
		r.mu.Lock()
		st := r.arms[[2]string{TaskCode, "p/cheap"}]
		fired := st != nil && st.changeDir == changeDrop
		r.mu.Unlock()
		if fired {
			return i
		}
	}
	return -1
}

// TestLearningStateSurvivesARestartMidDetection: the change detector's
// run is in the database; a router that restarts while the detector is
// part-way up a drop fires on the same signal as one that never
// restarted, and a router without the saved state (the v2 behaviour, a
// fresh detector) would fire later.
func TestLearningStateSurvivesARestartMidDetection(t *testing.T) {
	feed := restartFeed()
	dir := t.TempDir()
	n := 0
	start := func(fresh bool) func() (*Router, func()) {
		return func() (*Router, func()) {
			n++
			d := filepath.Join(dir, "run", string(rune('a'+n)))
			if !fresh {
				d = filepath.Join(dir, "shared")
			}
			db, err := store.Open(context.Background(), d, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			p := &fakeProvider{id: "p"}
			r, err := New(Options{Providers: map[string]provider.Provider{"p": p, "q": &fakeProvider{id: "q"}}, Catalog: testCatalog(), Store: db, Seed: 1,
				Now: func() time.Time { return time.Date(2026, 3, 1, 16, 0, 0, 0, time.UTC) }, Reload: -1})
			if err != nil {
				t.Fatal(err)
			}
			return r, func() { db.Close() }
		}
	}
	straight := firstDrop(t, feed, start(true), -1)
	if straight < 200 {
		t.Fatalf("without a restart the drop was detected at signal %d; want it after 200", straight)
	}
	// Restart a few signals before the detection, with the run part-way
	// up.
	at := straight - 4
	restarted := firstDrop(t, feed, start(false), at)
	if restarted != straight {
		t.Fatalf("restarted at signal %d, the drop was detected at %d; without the restart at %d", at, restarted, straight)
	}

	// The same restart without the saved learning state (a store that
	// keeps only affinity) starts the detector afresh: it fires later, so
	// the test above can fail.
	var mem *affinityOnly
	forgetful := func() (*Router, func()) {
		if mem == nil {
			mem = &affinityOnly{NewMemStore()}
		}
		r, err := New(Options{Providers: map[string]provider.Provider{"p": &fakeProvider{id: "p"}, "q": &fakeProvider{id: "q"}}, Catalog: testCatalog(), Store: mem, Seed: 1, Reload: -1})
		if err != nil {
			t.Fatal(err)
		}
		return r, func() {}
	}
	if later := firstDrop(t, feed, forgetful, at); later == straight {
		t.Fatalf("without the learning state the drop was still detected at %d; the restart test shows nothing", later)
	}
}

// affinityOnly is a Store that keeps affinity but no learning state.
type affinityOnly struct{ m *MemStore }

func (a *affinityOnly) AddSignal(ctx context.Context, s core.Signal) (int64, error) {
	return a.m.AddSignal(ctx, s)
}
func (a *affinityOnly) UpdateAffinity(ctx context.Context, task, model string, fn func(core.Affinity) core.Affinity) error {
	return a.m.UpdateAffinity(ctx, task, model, fn)
}
func (a *affinityOnly) Affinities(ctx context.Context) ([]core.Affinity, error) {
	return a.m.Affinities(ctx)
}
func (a *affinityOnly) ProfileStates(ctx context.Context) ([]core.ProfileState, error) {
	return a.m.ProfileStates(ctx)
}
func (a *affinityOnly) SaveProfileState(ctx context.Context, st core.ProfileState) error {
	return a.m.SaveProfileState(ctx, st)
}
func (a *affinityOnly) AddUsage(ctx context.Context, u core.UsageRecord) error {
	return a.m.AddUsage(ctx, u)
}
func (a *affinityOnly) SpentSince(ctx context.Context, since time.Time, conv string) (float64, error) {
	return a.m.SpentSince(ctx, since, conv)
}

// TestModelCommandExplainsTheChoice: /model says why the current model
// was chosen for the conversation's task type: acceptance and price,
// evidence, the runners-up, the last change detected, settled or
// exploring.
func TestModelCommandExplainsTheChoice(t *testing.T) {
	r, _, _, _, clk := newTestRouter(t, nil)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 3))
	for i := range 150 {
		clk.Advance(time.Minute)
		for _, m := range []struct {
			ref string
			p   float64
		}{{"p/cheap", 0.95}, {"p/mid", 0.9}} {
			if i >= 120 && m.ref == "p/cheap" {
				m.p = 0.3
			}
			pol := core.Negative
			if rng.Float64() < m.p {
				pol = core.Positive
			}
			if err := r.RecordSignal(ctx, core.Signal{Kind: core.SignalReaction, Polarity: pol, Model: m.ref, TaskType: TaskChat, At: clk.Now()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var model core.Command
	for _, c := range r.Commands(nopPinner{}, noConversations{}) {
		if c.Name == "model" {
			model = c
		}
	}
	out, err := model.Run(ctx, core.CommandRequest{Session: core.Session{ID: 1, Conversation: core.ConversationKey{Channel: "console", Chat: "local"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Model: p/mid", "Learned choice for chat: p/mid", "% accepted over", "per M tokens", "\nNext: ", "p/cheap 5", "Last change detected: p/cheap dropped"} {
		if !strings.Contains(out, want) {
			t.Errorf("/model = %q\nwant it to contain %q", out, want)
		}
	}
	if !strings.Contains(out, "; settled.") && !strings.Contains(out, "; exploring.") {
		t.Errorf("/model = %q; want it to say whether the choice is settled or exploring", out)
	}
}

type nopPinner struct{}

func (nopPinner) SetPins(context.Context, int64, string, string) error { return nil }

type noConversations struct{}

func (noConversations) LastAnswer(context.Context, int64) (*core.Reply, error) { return nil, nil }
func (noConversations) History(context.Context, int64, int) ([]core.ChatMessage, error) {
	return nil, nil
}
func (noConversations) Escalation(context.Context, int64) (core.EscalationState, error) {
	return core.EscalationState{}, nil
}
func (noConversations) SaveEscalation(context.Context, int64, core.EscalationState) error { return nil }
func (noConversations) SignalsForReply(context.Context, int64) ([]core.Signal, error) {
	return nil, nil
}
