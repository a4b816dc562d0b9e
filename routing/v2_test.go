package routing

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

// feed runs n weighted Bernoulli(p) signals through d against a running
// estimate kept the way the router keeps it (decayed evidence capped at
// 200, so the estimate itself is noisy), and returns the index of each
// detection and its direction.
func feed(d *changeDetector, rng *rand.Rand, est *[2]float64, n int, p float64) (at []int, dirs []int) {
	for i := range n {
		ok := rng.Float64() < p
		w := 1.0
		if ok && rng.Float64() < 0.6 {
			w = MovesOnWeight
		}
		tot := est[0] + est[1]
		ref := est[0] / tot
		sd := math.Sqrt(ref * (1 - ref) / (tot + 1))
		dir, pos, neg := d.observe(ref, sd, ok, w, changeParams{DefaultChangeShift, DefaultDropThreshold, DefaultRiseThreshold, DefaultChangeGuard})
		if ok {
			est[0] += w
		} else {
			est[1] += w
		}
		if dir != changeNone {
			at, dirs = append(at, i), append(dirs, dir)
			// What the router does on a detection.
			f := keepAfterChange / (est[0] + est[1])
			est[0], est[1] = est[0]*f+pos, est[1]*f+neg
		}
		if t := est[0] + est[1]; t > 200 {
			est[0], est[1] = est[0]*200/t, est[1]*200/t
		}
	}
	return at, dirs
}

func TestChangeDetectorDropRiseAndNoise(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		// Noise: 200 signals of an unchanged model at 0.9, after a warm
		// estimate of it.
		var d changeDetector
		est := [2]float64{90, 10}
		if at, _ := feed(&d, rng, &est, 200, 0.9); len(at) > 0 {
			t.Errorf("seed %d: noise at 0.9 fired at %v", seed, at)
		}
		// Drop: the same model falls to 0.45; the same volume of signals.
		at, dirs := feed(&d, rng, &est, 200, 0.45)
		if len(at) == 0 || dirs[0] != changeDrop || at[0] > 40 {
			t.Errorf("seed %d: drop 0.9→0.45 detected at %v %v, want a drop within 40 signals", seed, at, dirs)
		}
		// Rise: a model known at 0.5 becomes 0.95.
		var r changeDetector
		est = [2]float64{25, 25}
		if at, _ := feed(&r, rng, &est, 200, 0.5); len(at) > 0 {
			t.Errorf("seed %d: noise at 0.5 fired at %v", seed, at)
		}
		est = [2]float64{25, 25}
		at, dirs = feed(&r, rng, &est, 200, 0.95)
		if len(at) == 0 || dirs[0] != changeRise || at[0] > 40 {
			t.Errorf("seed %d: rise 0.5→0.95 detected at %v %v, want a rise within 40 signals", seed, at, dirs)
		}
	}
}

// TestChangeWidensUncertainty: a drop detected through RecordSignal
// replaces a busy model's long history by the evidence since the change,
// so the router stops choosing it.
func TestChangeWidensUncertainty(t *testing.T) {
	r, _, _, st, clk := newTestRouter(t, nil)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	sig := func(model string, p float64, n int) {
		for range n {
			pol := core.Negative
			if rng.Float64() < p {
				pol = core.Positive
			}
			clk.Advance(time.Minute)
			if err := r.RecordSignal(ctx, core.Signal{Kind: core.SignalReaction, Polarity: pol, Model: model, TaskType: TaskCode, At: clk.Now()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	sig("p/cheap", 0.95, 150)
	sig("p/mid", 0.85, 150)
	before := ScoreOf(affinityOf(t, st, TaskCode, "p/cheap"), clk.Now(), 30)
	if before.Evidence < 100 {
		t.Fatalf("before: %+v", before)
	}
	sig("p/cheap", 0.3, 30)
	after := ScoreOf(affinityOf(t, st, TaskCode, "p/cheap"), clk.Now(), 30)
	if after.Evidence > 40 || after.Score > 0.6 {
		t.Fatalf("after the drop the evidence was not reset: %+v", after)
	}
	n := 0
	for range 100 {
		res, err := r.Chat(ctx, Call{TaskType: TaskCode, Req: userMsg("x")})
		if err != nil {
			t.Fatal(err)
		}
		if res.Model == "p/mid" {
			n++
		}
	}
	if n < 80 {
		t.Fatalf("after the drop mid answered %d of 100", n)
	}
}

func affinityOf(t *testing.T, st *MemStore, task, model string) core.Affinity {
	t.Helper()
	rows, _ := st.Affinities(context.Background())
	for _, a := range rows {
		if a.Task == task && a.Model == model {
			return a
		}
	}
	t.Fatalf("no affinity %s/%s", task, model)
	return core.Affinity{}
}

// settle gives mid a strong record for chat and the other models poor
// ones, so that they are settled and only probes reach them.
func settle(t *testing.T, r *Router, clk *fakeClock) {
	t.Helper()
	ctx := context.Background()
	for i := range 60 {
		for _, m := range []struct {
			ref string
			p   int // positives per 10
		}{{"p/mid", 10}, {"p/cheap", 3}, {"q/other", 3}, {"p/big", 5}} {
			pol := core.Negative
			if i%10 < m.p {
				pol = core.Positive
			}
			if err := r.RecordSignal(ctx, core.Signal{Kind: core.SignalReaction, Polarity: pol, Model: m.ref, TaskType: TaskChat, At: clk.Now()}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestProbeBudgetOverALongRun(t *testing.T) {
	const rate, calls = 0.05, 6000
	r, _, _, st, clk := newTestRouter(t, func(o *Options) {
		o.Probe = Probing{Rate: rate, StaleAfter: 10 * time.Minute}
	})
	settle(t, r, clk)
	ctx := context.Background()
	probes, probed := 0, map[string]int{}
	for range calls {
		clk.Advance(time.Minute)
		res, err := r.Chat(ctx, Call{Purpose: "chat", TaskType: TaskChat, Req: userMsg("x")})
		if err != nil {
			t.Fatal(err)
		}
		if res.Exploration == Probed {
			probes++
			probed[res.Model]++
		}
	}
	limit := rate*calls + DefaultProbeBurst
	if probes > int(limit) || probes < int(0.5*rate*calls) {
		t.Fatalf("%d probes in %d calls; the budget allows %.0f and models were due all along", probes, calls, limit)
	}
	// big can never win (even always accepted it is below mid's utility):
	// it is never probed; the cheaper models are.
	if probed["p/big"] > 0 || probed["p/cheap"] == 0 {
		t.Fatalf("probed %v", probed)
	}
	n := 0
	for _, u := range st.Usage() {
		if u.Purpose == PurposeExplore {
			n++
		}
	}
	if n != probes {
		t.Fatalf("ledger has %d explore rows for %d probes", n, probes)
	}

	// The daily USD cap holds too: each probe costs $0.00069 here.
	r2, _, _, st2, clk2 := newTestRouter(t, func(o *Options) {
		o.Probe = Probing{Rate: 0.5, StaleAfter: time.Minute, DailyUSD: 0.002}
	})
	settle(t, r2, clk2)
	for range 3 * 24 * 60 / 5 {
		clk2.Advance(5 * time.Minute)
		if _, err := r2.Chat(ctx, Call{TaskType: TaskChat, Req: userMsg("x")}); err != nil {
			t.Fatal(err)
		}
	}
	perDay := map[time.Time]float64{}
	for _, u := range st2.Usage() {
		if u.Purpose == PurposeExplore {
			perDay[u.At.UTC().Truncate(24*time.Hour)] += u.CostUSD
		}
	}
	if len(perDay) < 3 {
		t.Fatalf("probes on %d days: %v", len(perDay), perDay)
	}
	for day, usd := range perDay {
		if usd > 0.002+0.001 {
			t.Errorf("%s: probes cost $%.4f, cap $0.002", day.Format(time.DateOnly), usd)
		}
	}
}

func TestPinnedConversationNeverProbed(t *testing.T) {
	r, _, _, st, clk := newTestRouter(t, func(o *Options) {
		o.Probe = Probing{Rate: 0.5, Burst: 10, StaleAfter: time.Minute}
		o.ChatModels = map[string]map[string]string{"slack": {"C1": "p/mid"}}
		o.ChannelModels = map[string]string{"discord": "mid"}
	})
	settle(t, r, clk)
	ctx := context.Background()
	pinned := &core.Session{ID: 1, Conversation: core.ConversationKey{Channel: "console", Chat: "a"}, ModelPin: "p/cheap"}
	calls := []Call{
		{Purpose: "chat", Session: pinned, Req: userMsg("hi")},
		{Purpose: "chat", Conversation: core.ConversationKey{Channel: "slack", Chat: "C1"}, TaskType: TaskChat, Req: userMsg("hi")},
		{Purpose: "chat", Conversation: core.ConversationKey{Channel: "discord", Chat: "x"}, TaskType: TaskChat, Req: userMsg("hi")},
		{Purpose: "chat", Model: "p/big", TaskType: TaskChat, Req: userMsg("hi")},
	}
	for i := range 400 {
		clk.Advance(2 * time.Minute)
		c := calls[i%len(calls)]
		res, err := r.Chat(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if res.Exploration != NotExploring {
			t.Fatalf("call %d (%+v) explored: %s (%s)", i, c.Conversation, res.Model, res.Reason)
		}
	}
	for _, u := range st.Usage() {
		if u.Purpose == PurposeExplore {
			t.Fatalf("a strict choice was probed: %+v", u)
		}
	}
	// The same router does probe a free conversation (the test can fail).
	n := 0
	for range 50 {
		clk.Advance(2 * time.Minute)
		res, _ := r.Chat(ctx, Call{Purpose: "chat", TaskType: TaskChat, Req: userMsg("hi")})
		if res.Exploration == Probed {
			n++
		}
	}
	if n == 0 {
		t.Fatal("no probe in a free conversation either")
	}
}

func TestImplicitSignalWeights(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		kind  core.SignalKind
		pol   core.Polarity
		in    float64
		ws    map[core.SignalKind]float64
		want  float64
		isPos bool
	}{
		{SignalAccepted, core.Positive, 1, nil, MovesOnWeight, true},
		{SignalReturned, core.Negative, 1, nil, ReturnedWeight, false},
		{SignalThanks, core.Positive, 1, nil, ThanksWeight, true},
		{core.SignalReaction, core.Negative, 1, nil, 1, false},
		{core.SignalExplicit, core.Positive, ExplicitChoiceWeight, nil, ExplicitChoiceWeight, true},
		{SignalAccepted, core.Positive, 1, map[core.SignalKind]float64{SignalAccepted: 0.25}, 0.25, true},
	} {
		r, _, _, st, clk := newTestRouter(t, func(o *Options) { o.SignalWeights = tc.ws })
		if err := r.RecordSignal(ctx, core.Signal{Kind: tc.kind, Polarity: tc.pol, Model: "cheap", TaskType: TaskChat, Weight: tc.in, At: clk.Now()}); err != nil {
			t.Fatal(err)
		}
		sigs := st.Signals()
		a := affinityOf(t, st, TaskChat, "p/cheap")
		got := a.Neg
		if tc.isPos {
			got = a.Pos
		}
		if len(sigs) != 1 || math.Abs(sigs[0].Weight-tc.want) > 1e-12 || math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: stored weight %v, affinity %v, want %v", tc.kind, sigs[0].Weight, got, tc.want)
		}
	}
}

func TestJudgeFollowUp(t *testing.T) {
	q := "What is the capital of France and its population?"
	for _, tc := range []struct {
		text string
		gap  time.Duration
		kind core.SignalKind
		pol  core.Polarity
	}{
		{"no, try again", time.Minute, core.SignalFollowUp, core.Negative},
		{"capital of France and population please?", time.Minute, core.SignalRephrase, core.Negative},
		{"capital of France and population please?", 3 * time.Hour, SignalReturned, core.Negative},
		{"thanks!", time.Minute, SignalThanks, core.Positive},
		{"Danke, perfekt", time.Minute, SignalThanks, core.Positive},
		{"спасибо", time.Minute, SignalThanks, core.Positive},
		{"thanks, but that's wrong", time.Minute, SignalAccepted, core.Positive},
		{"thanks but the population is outdated", time.Minute, SignalAccepted, core.Positive},
		{"Now tell me about the history of Rome and the Roman empire in detail, thanks", time.Minute, SignalAccepted, core.Positive},
		{"and what about Germany?", time.Minute, SignalAccepted, core.Positive},
	} {
		k, p := JudgeFollowUp(q, tc.text, tc.gap)
		if k != tc.kind || p != tc.pol {
			t.Errorf("%q after %v: %s %v, want %s %v", tc.text, tc.gap, k, p, tc.kind, tc.pol)
		}
	}
}

// TestProbeOfAnUnjudgedModelSaysSo: the reason of a probe of a model the
// task never judged (the reason /status and /model show) says it has no
// evidence yet, not an age counted from the zero time
// ("newest evidence 2562047h47m0s old").
func TestProbeOfAnUnjudgedModelSaysSo(t *testing.T) {
	r, _, _, _, clk := newTestRouter(t, func(o *Options) {
		o.Catalog = []Model{
			{Ref: "p/good", Weight: 90, CostIn: 0.1, CostOut: 0.4},
			{Ref: "p/judge", Weight: 5, CostIn: 0.05, CostOut: 0.1},
		}
		o.Probe = Probing{Rate: 0.5, StaleAfter: time.Minute}
	})
	ctx := context.Background()
	for range 200 {
		clk.Advance(10 * time.Second)
		res, err := r.Chat(ctx, Call{Purpose: "chat", TaskType: TaskChat, Req: userMsg("x")})
		if err != nil {
			t.Fatal(err)
		}
		if res.Exploration == Probed {
			if want := "exploration: re-checking p/judge for chat (52% accepted, no evidence yet)"; res.Reason != want {
				t.Fatalf("probe reason %q, want %q", res.Reason, want)
			}
			return
		}
		if err := r.RecordSignal(ctx, core.Signal{Kind: core.SignalReaction, Polarity: core.Positive, Model: res.Model, TaskType: TaskChat, At: clk.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("p/judge was never probed")
}
