package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
	"github.com/opentalon/opentalon/routing"
	"github.com/opentalon/opentalon/routing/provider"
)

// Policies the simulator compares.
const (
	PolicyRouter    = "router"         // the learning router
	PolicyExpensive = "most_expensive" // always the most expensive model first
	PolicyOracle    = "oracle"         // the per-task best model, knowing the true probabilities
)

// simStart is the simulated clock's first instant.
var simStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// world answers questions about the true acceptance at a time.
type world struct {
	sc     *Scenario
	models []routing.Model
	byRef  map[string]routing.Model
	lambda float64
	maxP   float64
	tasks  []string
	cum    []float64 // cumulative task shares
}

func newWorld(sc *Scenario) *world {
	w := &world{sc: sc, byRef: map[string]routing.Model{}, lambda: sc.CostWeight}
	if w.lambda <= 0 {
		w.lambda = routing.DefaultCostWeight
	}
	for _, m := range sc.Models {
		rm := routing.Model{Ref: m.Ref, Alias: m.Alias, Weight: m.Weight, CostIn: m.Cost.Input, CostOut: m.Cost.Output}
		w.models = append(w.models, rm)
		w.byRef[m.Ref] = rm
		w.maxP = math.Max(w.maxP, rm.Price())
	}
	w.tasks = sc.taskNames()
	var sum float64
	for _, t := range w.tasks {
		sum += sc.Tasks[t].Share
		w.cum = append(w.cum, sum)
	}
	for i := range w.cum {
		w.cum[i] /= sum
	}
	return w
}

// p is the true acceptance of model on task at day.
func (w *world) p(task, model string, day float64) float64 {
	p := w.sc.Acceptance[task][model]
	for _, c := range w.sc.Changes {
		if c.Day <= day && c.Task == task && c.Model == model {
			p = c.P
		}
	}
	return p
}

// utility is the expected value of answering task with model first.
func (w *world) utility(task, model string, day float64) float64 {
	rel := 0.0
	if w.maxP > 0 {
		rel = w.byRef[model].Price() / w.maxP
	}
	return w.p(task, model, day) - w.lambda*rel
}

// oracle is the model with the best utility for task at day, not
// counting the models in except.
func (w *world) oracle(task string, day float64, except ...string) (string, float64) {
	best, bu := "", math.Inf(-1)
	for _, m := range w.models {
		if slices.Contains(except, m.Ref) {
			continue
		}
		if u := w.utility(task, m.Ref, day); u > bu {
			best, bu = m.Ref, u
		}
	}
	return best, bu
}

func (w *world) mostExpensive() string {
	best := w.models[0]
	for _, m := range w.models {
		if m.Price() > best.Price() {
			best = m
		}
	}
	return best.Ref
}

func (w *world) cost(task, model string) float64 {
	t := w.sc.Tasks[task]
	return w.byRef[model].Cost(t.InputTokens, t.OutputTokens)
}

// simProvider answers instantly; the simulator judges the answers.
type simProvider struct{ id string }

func (p simProvider) ID() string { return p.id }
func (p simProvider) Complete(_ context.Context, _ provider.Credentials, req *provider.Request) (*provider.Response, error) {
	return &provider.Response{Text: "answer", Model: req.Model}, nil
}
func (p simProvider) Stream(ctx context.Context, c provider.Credentials, req *provider.Request, on func(string)) (*provider.Response, error) {
	return p.Complete(ctx, c, req)
}

// SeedResult is one policy's outcome on one seed.
type SeedResult struct {
	Requests      int
	FirstAccepted int
	FinalAccepted int
	Escalations   int
	Cost          float64
	Utility       float64 // Σ expected utility of the first answer
	OracleUtility float64
	Misclassified int
	// Explored counts first answers where the learned choice explored
	// (Probes of them were budgeted probes); ExploreCost is their cost.
	Explored, Probes int
	ExploreCost      float64
	// Judged counts the answers routing.judge graded.
	Judged int
	// Regret[k] is the cumulative regret (Σ oracle utility − utility of
	// the first answer) after request (k+1)·Requests/len(Regret).
	Regret []float64
	// Recovery[i] is the number of requests of the changed task after
	// change i until the choices were near-optimal again (−1 = never).
	Recovery []int
	Seed     uint64
}

// regretPoints is the length of the regret series.
const regretPoints = 100

// runSeed simulates one policy on one seed.
func runSeed(ctx context.Context, w *world, policy string, seed uint64) (SeedResult, error) {
	sc := w.sc
	clk := clock.NewFake(simStart)
	provs := map[string]provider.Provider{}
	for _, m := range w.models {
		id := m.Provider()
		provs[id] = simProvider{id: id}
	}
	o := routing.Options{
		Providers: provs, Catalog: w.models, Store: routing.NewMemStore(), Now: clk.Now, Seed: seed*7919 + 1,
		DecayDays: sc.DecayDays, MaxEscalations: sc.MaxEscalations, CostWeight: sc.CostWeight,
		MaxCloud: 1 << 20, Reload: -1,
		EvidenceCap: sc.Router.EvidenceCap, Explore: sc.Router.Explore, StaleDays: sc.Router.StaleDays,
		SettleZ: sc.Router.SettleZ, ChangeShift: sc.Router.ChangeShift, DropThreshold: sc.Router.DropThreshold, RiseThreshold: sc.Router.RiseThreshold,
		NoChangeDetection: sc.Router.NoChangeDetection, IncumbentZ: sc.Router.IncumbentZ, NoValueOfInformation: sc.Router.NoValueOfInformation,
		Probe: routing.Probing{Off: sc.Router.NoProbes, Rate: sc.Router.ProbeRate, Burst: sc.Router.ProbeBurst, DailyUSD: sc.Router.ProbeDailyUSD,
			StaleAfter: time.Duration(sc.Router.ProbeStaleHours * float64(time.Hour))},
	}
	if len(sc.Router.SignalWeights) > 0 {
		o.SignalWeights = map[core.SignalKind]float64{}
		for k, v := range sc.Router.SignalWeights {
			o.SignalWeights[core.SignalKind(k)] = v
		}
	}
	if policy != PolicyRouter {
		o.NoAffinity = true
	}
	r, err := routing.New(o)
	if err != nil {
		return SeedResult{}, err
	}
	// Two random streams: the traffic (same for every policy) and the
	// users' reactions.
	traffic := rand.New(rand.NewPCG(seed, 1))
	users := rand.New(rand.NewPCG(seed, uint64(len(policy))+2))
	res := SeedResult{Recovery: make([]int, len(sc.Changes)), Seed: seed}
	points := min(regretPoints, sc.Requests)
	res.Regret = make([]float64, 0, points)
	rec := make([]*recovery, len(sc.Changes))
	for i := range rec {
		rec[i] = &recovery{result: -1}
	}
	step := time.Duration(sc.HorizonDays * float64(24*time.Hour) / float64(sc.Requests))
	expensive := w.mostExpensive()
	for i := 0; i < sc.Requests; i++ {
		if i%1024 == 0 && ctx.Err() != nil {
			return res, ctx.Err()
		}
		now := simStart.Add(time.Duration(i) * step)
		clk.Set(now)
		day := now.Sub(simStart).Hours() / 24
		task := w.pickTask(traffic.Float64())
		msgs := message(task, traffic)
		override := traffic.Float64() < sc.Overrides.Rate
		best, bestU := w.oracle(task, day)
		call := routing.Call{Purpose: "chat", Conversation: core.ConversationKey{Channel: "sim", Chat: fmt.Sprint(i % 97)}, UserID: "u", Req: provider.Request{Messages: msgs}}
		switch {
		case override || policy == PolicyOracle:
			call.Model = best
		case policy == PolicyExpensive:
			call.Model = expensive
		}
		out, err := r.Chat(ctx, call)
		if err != nil {
			return res, fmt.Errorf("request %d: %w", i, err)
		}
		if override {
			// The user's explicit /model choice.
			r.RecordSignal(ctx, core.Signal{Kind: core.SignalExplicit, Polarity: core.Positive, Model: best, TaskType: out.TaskType, Weight: routing.ExplicitChoiceWeight, At: now})
		}
		res.Requests++
		if out.TaskType != task {
			res.Misclassified++
		}
		u := w.utility(task, out.Model, day)
		res.Utility += u
		res.OracleUtility += bestU
		if out.Exploration != routing.NotExploring {
			res.Explored++
			res.ExploreCost += w.cost(task, out.Model)
			if out.Exploration == routing.Probed {
				res.Probes++
			}
		}
		if (i+1)*points/sc.Requests > len(res.Regret) {
			res.Regret = append(res.Regret, res.OracleUtility-res.Utility)
		}
		for ci, c := range sc.Changes {
			if c.Task == task && day >= c.Day {
				rec[ci].observe(bestU-u <= nearOptimal)
			}
		}
		tried := []string{out.Model}
		res.Cost += w.cost(task, out.Model)
		accepted := users.Float64() < w.p(task, out.Model, day)
		if accepted {
			res.FirstAccepted++
		}
		for {
			sig := core.Signal{Model: out.Model, TaskType: out.TaskType, Weight: 1, At: now}
			escalate := false
			if accepted && users.Float64() >= sc.Users.Noise {
				switch x := users.Float64(); {
				case x < sc.Users.ThumbsUp:
					sig.Kind, sig.Polarity = core.SignalReaction, core.Positive
				case x < sc.Users.ThumbsUp+(1-sc.Users.ThumbsUp)*sc.Users.Thanks:
					sig.Kind, sig.Polarity = routing.JudgeFollowUp(lastText(msgs), thanks[users.IntN(len(thanks))], time.Minute)
				case users.Float64() < sc.Users.MovesOn:
					// Another message on a new subject; a detection error
					// may read it as a rejection.
					next := message(w.pickTask(traffic.Float64()), users)
					sig.Kind, sig.Polarity = routing.JudgeFollowUp(lastText(msgs), lastText(next), 2*time.Minute)
				}
			} else {
				switch rejectionKind(sc.Users, users.Float64()) {
				case "thumbs_down":
					sig.Kind, sig.Polarity = core.SignalReaction, core.Negative
					escalate = sc.Users.EscalateOnReaction
				case "retry":
					sig.Kind, sig.Polarity = core.SignalRetry, core.Negative
					escalate = true
				case "followup":
					if k, p := routing.JudgeFollowUp(lastText(msgs), rejections[users.IntN(len(rejections))], time.Minute); p == core.Negative {
						sig.Kind, sig.Polarity = k, p
						escalate = k == core.SignalFollowUp
					}
				case "rephrase":
					if q := lastText(msgs); routing.IsRephrase(q, rephrase(q)) {
						sig.Kind, sig.Polarity = routing.JudgeFollowUp(q, rephrase(q), time.Minute)
					}
				default: // silence; some come back later with the same question
					if users.Float64() < sc.Users.Returns {
						q := lastText(msgs)
						if k, p := routing.JudgeFollowUp(q, rephrase(q), 3*time.Hour); p == core.Negative {
							sig.Kind, sig.Polarity = k, p
						}
					}
				}
			}
			if policy == PolicyRouter && sc.Judge.Rate > 0 && users.Float64() < sc.Judge.Rate {
				// routing.judge grades the answer.
				grade := accepted == (users.Float64() < sc.Judge.Accuracy)
				pol := core.Negative
				if grade {
					pol = core.Positive
				}
				t := sc.Tasks[task]
				res.Cost += w.byRef[sc.Judge.Model].Cost(t.InputTokens+t.OutputTokens, 5)
				res.Judged++
				if err := r.RecordSignal(ctx, core.Signal{Kind: routing.SignalJudge, Polarity: pol, Model: out.Model, TaskType: out.TaskType, Weight: 1, At: now}); err != nil {
					return res, err
				}
			}
			if sig.Kind == "" && !escalate {
				// Nothing followed the answer: Router.SweepAbandoned
				// records that it was left.
				sig.Kind, sig.Polarity = routing.SignalAbandoned, core.Negative
			}
			if sig.Kind != "" {
				if err := r.RecordSignal(ctx, sig); err != nil {
					return res, err
				}
			}
			if !escalate || len(tried)-1 >= sc.MaxEscalations {
				break
			}
			esc := call
			esc.Model = ""
			esc.Exclude = tried
			if policy == PolicyOracle {
				// The oracle re-answers with the best model not yet tried.
				esc.Model, _ = w.oracle(task, day, tried...)
			}
			out, err = r.Chat(ctx, esc)
			if err != nil {
				return res, fmt.Errorf("request %d escalation: %w", i, err)
			}
			res.Escalations++
			tried = append(tried, out.Model)
			res.Cost += w.cost(task, out.Model)
			accepted = users.Float64() < w.p(task, out.Model, day)
		}
		if accepted {
			res.FinalAccepted++
		}
	}
	for i, rc := range rec {
		res.Recovery[i] = rc.result
	}
	for len(res.Regret) < points {
		res.Regret = append(res.Regret, res.OracleUtility-res.Utility)
	}
	return res, nil
}

// nearOptimal: a first choice within this utility of the oracle's counts
// as right when measuring recovery.
const nearOptimal = 0.03

// recovery finds the first point after a change where at least 16 of the
// last 20 choices for the task were near-optimal.
type recovery struct {
	n, result int
	window    [20]bool
}

func (r *recovery) observe(good bool) {
	if r.result >= 0 {
		return
	}
	r.window[r.n%20] = good
	r.n++
	if r.n < 20 {
		return
	}
	ok := 0
	for _, g := range r.window {
		if g {
			ok++
		}
	}
	if ok >= 16 {
		r.result = max(r.n-20, 0)
	}
}

func (w *world) pickTask(x float64) string {
	for i, c := range w.cum {
		if x < c {
			return w.tasks[i]
		}
	}
	return w.tasks[len(w.tasks)-1]
}

func rejectionKind(u Users, x float64) string {
	r := u.Rejection
	total := r.ThumbsDown + r.Retry + r.FollowUp + r.Rephrase + r.Silence
	if total <= 0 {
		return "silence"
	}
	x *= total
	for _, k := range []struct {
		name string
		p    float64
	}{{"thumbs_down", r.ThumbsDown}, {"retry", r.Retry}, {"followup", r.FollowUp}, {"rephrase", r.Rephrase}} {
		if x < k.p {
			return k.name
		}
		x -= k.p
	}
	return "silence"
}

func lastText(msgs []core.ChatMessage) string {
	if len(msgs) == 0 {
		return ""
	}
	return msgs[len(msgs)-1].Content
}

// rephrase asks q again in other words (drops the first word, reorders).
func rephrase(q string) string {
	f := strings.Fields(q)
	if len(f) < 3 {
		return q + " again please"
	}
	return "please " + strings.Join(append(f[len(f)/2:], f[1:len(f)/2]...), " ")
}

var thanks = []string{"thanks!", "Thank you, that helped", "perfect, thx", "danke!", "merci beaucoup", "gracias", "спасибо"}

var rejections = []string{
	"no, try again", "that's wrong", "not what I meant", "Das ist falsch", "nochmal bitte", "c'est faux",
	"ce n'est pas ce que je voulais dire", "inténtalo de nuevo", "eso está mal", "неправильно", "попробуй ещё раз",
}

// Run simulates every policy over the scenario's seeds (seeds > 0
// overrides the scenario) using all CPUs, and aggregates a Report.
func Run(ctx context.Context, sc *Scenario, seeds int) (*Report, error) {
	if seeds > 0 {
		sc.Seeds = seeds
	}
	w := newWorld(sc)
	policies := []string{PolicyRouter, PolicyExpensive, PolicyOracle}
	results := map[string][]SeedResult{}
	type job struct {
		policy string
		seed   int
	}
	jobs := make(chan job)
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				r, err := runSeed(ctx, w, j.policy, uint64(j.seed)+1)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				results[j.policy] = append(results[j.policy], r)
				mu.Unlock()
			}
		}()
	}
	for s := range sc.Seeds {
		for _, p := range policies {
			jobs <- job{p, s}
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return aggregate(sc, results), nil
}
