package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// Stat is a mean with its standard deviation over seeds.
type Stat struct {
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"`
}

func stat(xs []float64) Stat {
	if len(xs) == 0 {
		return Stat{}
	}
	var s Stat
	for _, x := range xs {
		s.Mean += x
	}
	s.Mean /= float64(len(xs))
	for _, x := range xs {
		s.SD += (x - s.Mean) * (x - s.Mean)
	}
	s.SD = math.Sqrt(s.SD / float64(len(xs)))
	return s
}

// PolicyReport aggregates one policy over the seeds.
type PolicyReport struct {
	FirstAcceptance   Stat `json:"first_acceptance"`
	FinalAcceptance   Stat `json:"final_acceptance"`
	EscalationsPer100 Stat `json:"escalations_per_100"`
	CostUSD           Stat `json:"cost_usd"`
	CostPerAccepted   Stat `json:"cost_per_accepted_usd"`
	UtilityVsOracle   Stat `json:"utility_vs_oracle"`
	Misclassified     Stat `json:"misclassified_share"`
	// CostVsOracle is the policy's cost as a multiple of the oracle's.
	CostVsOracle Stat `json:"cost_vs_oracle"`
	// ExplorationShare is the share of first answers where the learned
	// choice explored (ProbeShare: budgeted probes among them);
	// ExplorationCost is their cost in USD (the ledger's purpose
	// "explore" holds the probes').
	ExplorationShare Stat `json:"exploration_share"`
	ProbeShare       Stat `json:"probe_share"`
	ExplorationCost  Stat `json:"exploration_cost_usd"`
	// Regret is the regret over time: a plot-ready series.
	Regret []RegretPoint `json:"regret_series"`
}

// RegretPoint is one point of the regret series: after Request requests
// (Day days), the mean over seeds of the cumulative regret (Σ oracle
// utility − utility of the first answer) and of the regret per request
// since the previous point.
type RegretPoint struct {
	Request    int     `json:"request"`
	Day        float64 `json:"day"`
	Cumulative Stat    `json:"cumulative"`
	PerRequest float64 `json:"per_request"`
}

// ChangeReport is the recovery after one change.
type ChangeReport struct {
	Day      float64 `json:"day"`
	Task     string  `json:"task"`
	Model    string  `json:"model"`
	P        float64 `json:"p"`
	Note     string  `json:"note"`
	Median   float64 `json:"median_requests"`
	P90      float64 `json:"p90_requests"`
	Worst    int     `json:"worst_requests"`
	Never    int     `json:"seeds_not_recovered"`
	Achieved bool    `json:"within_goal"`
}

// Report is the simulator's result.
type Report struct {
	Seeds    int                     `json:"seeds"`
	Requests int                     `json:"requests_per_seed"`
	Days     float64                 `json:"horizon_days"`
	Policies map[string]PolicyReport `json:"policies"`
	// CostVsExpensive is the router's cost as a fraction of always using
	// the most expensive model.
	CostVsExpensive Stat `json:"cost_vs_most_expensive"`
	// CostVsOracle is the router's cost as a multiple of the oracle's.
	CostVsOracle Stat           `json:"cost_vs_oracle"`
	Changes      []ChangeReport `json:"changes"`
	Goals        []Goal         `json:"goals"`
}

// Goal is one of the targets and whether it was reached.
type Goal struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Target string `json:"target"`
	Met    bool   `json:"met"`
}

// The router's goals: utility at least UtilityGoal of the per-task
// oracle's, final acceptance at most AcceptanceGoal below the oracle's,
// cost at most CostGoal times the oracle's, and recovery after every
// change within RecoveryGoal requests of the affected task at p90 and in
// every seed.
const (
	UtilityGoal    = 0.97
	AcceptanceGoal = 0.005
	CostGoal       = 1.5
	RecoveryGoal   = 150
)

func aggregate(sc *Scenario, results map[string][]SeedResult) *Report {
	rep := &Report{Seeds: sc.Seeds, Requests: sc.Requests, Days: sc.HorizonDays, Policies: map[string]PolicyReport{}}
	// Pair the policies seed by seed (the runs finish in any order).
	for _, rs := range results {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Seed < rs[j].Seed })
	}
	oracle := results[PolicyOracle]
	for p, rs := range results {
		var first, final, esc, cost, cpa, util, mis, cvo, expl, probes, ecost []float64
		for i, r := range rs {
			n := float64(r.Requests)
			first = append(first, float64(r.FirstAccepted)/n)
			final = append(final, float64(r.FinalAccepted)/n)
			esc = append(esc, 100*float64(r.Escalations)/n)
			cost = append(cost, r.Cost)
			cpa = append(cpa, r.Cost/math.Max(float64(r.FinalAccepted), 1))
			util = append(util, r.Utility/r.OracleUtility)
			mis = append(mis, float64(r.Misclassified)/n)
			if i < len(oracle) && oracle[i].Cost > 0 {
				cvo = append(cvo, r.Cost/oracle[i].Cost)
			}
			expl = append(expl, float64(r.Explored)/n)
			probes = append(probes, float64(r.Probes)/n)
			ecost = append(ecost, r.ExploreCost)
		}
		pr := PolicyReport{FirstAcceptance: stat(first), FinalAcceptance: stat(final), EscalationsPer100: stat(esc), CostUSD: stat(cost),
			CostPerAccepted: stat(cpa), UtilityVsOracle: stat(util), Misclassified: stat(mis), CostVsOracle: stat(cvo),
			ExplorationShare: stat(expl), ProbeShare: stat(probes), ExplorationCost: stat(ecost)}
		if len(rs) > 0 {
			points := len(rs[0].Regret)
			prev := 0.0
			for k := range points {
				var xs []float64
				for _, r := range rs {
					if k < len(r.Regret) {
						xs = append(xs, r.Regret[k])
					}
				}
				req := (k + 1) * sc.Requests / points
				st := stat(xs)
				prevReq := k * sc.Requests / points
				pt := RegretPoint{Request: req, Day: sc.HorizonDays * float64(req) / float64(sc.Requests), Cumulative: st}
				if req > prevReq {
					pt.PerRequest = (st.Mean - prev) / float64(req-prevReq)
				}
				prev = st.Mean
				pr.Regret = append(pr.Regret, pt)
			}
		}
		rep.Policies[p] = pr
	}
	var frac []float64
	for i, r := range results[PolicyRouter] {
		if i < len(results[PolicyExpensive]) {
			frac = append(frac, r.Cost/results[PolicyExpensive][i].Cost)
		}
	}
	rep.CostVsExpensive = stat(frac)
	for ci, c := range sc.Changes {
		var xs []float64
		cr := ChangeReport{Day: c.Day, Task: c.Task, Model: c.Model, P: c.P, Note: c.Note}
		for _, r := range results[PolicyRouter] {
			v := r.Recovery[ci]
			if v < 0 {
				cr.Never++
				v = math.MaxInt32
			}
			xs = append(xs, float64(v))
			cr.Worst = max(cr.Worst, v)
		}
		sort.Float64s(xs)
		if len(xs) > 0 {
			cr.Median = xs[len(xs)/2]
			cr.P90 = xs[min(len(xs)-1, len(xs)*9/10)]
		}
		cr.Achieved = cr.Never == 0 && cr.P90 <= RecoveryGoal
		rep.Changes = append(rep.Changes, cr)
	}
	ro, or := rep.Policies[PolicyRouter], rep.Policies[PolicyOracle]
	rep.CostVsOracle = ro.CostVsOracle
	rep.Goals = []Goal{
		{"utility vs per-task oracle", pct(ro.UtilityVsOracle.Mean), fmt.Sprintf("≥ %.0f%%", 100*UtilityGoal), ro.UtilityVsOracle.Mean >= UtilityGoal},
		{"final acceptance vs the oracle's", fmt.Sprintf("%s vs %s (%+.2f points)", pct(ro.FinalAcceptance.Mean), pct(or.FinalAcceptance.Mean), 100*(ro.FinalAcceptance.Mean-or.FinalAcceptance.Mean)),
			fmt.Sprintf("within %.1f points", 100*AcceptanceGoal), ro.FinalAcceptance.Mean >= or.FinalAcceptance.Mean-AcceptanceGoal-1e-9},
		{"cost vs the oracle's", fmt.Sprintf("%.2f×", ro.CostVsOracle.Mean), fmt.Sprintf("≤ %.1f×", CostGoal), ro.CostVsOracle.Mean <= CostGoal},
	}
	for _, c := range rep.Changes {
		rep.Goals = append(rep.Goals, Goal{fmt.Sprintf("recovery after day-%g change (%s, %s)", c.Day, c.Task, c.Model),
			fmt.Sprintf("median %s, p90 %s, worst %s requests", reqs(c.Median), reqs(c.P90), reqs(float64(c.Worst))), fmt.Sprintf("≤ %d (p90, every seed)", RecoveryGoal), c.Achieved})
	}
	return rep
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

// reqs prints a recovery in requests; a seed that never recovered
// (math.MaxInt32 in the statistics) prints as "never".
func reqs(v float64) string {
	if v >= math.MaxInt32 {
		return "never"
	}
	return fmt.Sprintf("%g", v)
}

// WriteText prints the report for people.
func (rep *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Router simulation: %d seeds × %d requests over %g days\n\n", rep.Seeds, rep.Requests, rep.Days)
	fmt.Fprintf(&b, "%-15s %12s %12s %10s %12s %12s %12s\n", "policy", "first acc.", "final acc.", "esc/100", "cost $", "$/accepted", "utility/orc")
	for _, p := range []string{PolicyRouter, PolicyExpensive, PolicyOracle} {
		r, ok := rep.Policies[p]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "%-15s %12s %12s %10.1f %12.2f %12.5f %12s\n", p, pct(r.FirstAcceptance.Mean), pct(r.FinalAcceptance.Mean),
			r.EscalationsPer100.Mean, r.CostUSD.Mean, r.CostPerAccepted.Mean, pct(r.UtilityVsOracle.Mean))
	}
	ro := rep.Policies[PolicyRouter]
	fmt.Fprintf(&b, "\nrouter cost = %s of always-most-expensive (sd %s), %.2f× the oracle's (sd %.2f); misclassified tasks %s\n",
		pct(rep.CostVsExpensive.Mean), pct(rep.CostVsExpensive.SD), ro.CostVsOracle.Mean, ro.CostVsOracle.SD, pct(ro.Misclassified.Mean))
	fmt.Fprintf(&b, "router exploration: %s of first answers (probes %s), costing $%.2f (%s of the router's cost)\n",
		pct(ro.ExplorationShare.Mean), pct(ro.ProbeShare.Mean), ro.ExplorationCost.Mean, pct(ro.ExplorationCost.Mean/math.Max(ro.CostUSD.Mean, 1e-12)))
	if len(ro.Regret) > 0 {
		b.WriteString("router regret over time (cumulative; per request in the last stretch):")
		step := max(len(ro.Regret)/10, 1)
		for k := step - 1; k < len(ro.Regret); k += step {
			pt := ro.Regret[k]
			fmt.Fprintf(&b, " d%g %.0f (%.4f)", math.Round(pt.Day), pt.Cumulative.Mean, pt.PerRequest)
		}
		b.WriteString("\n")
	}
	if len(rep.Changes) > 0 { // a scenario without changes has none to recover from
		b.WriteString("\nRecovery after changes (requests of the affected task until 16 of 20 choices are near-optimal):\n")
	}
	for _, c := range rep.Changes {
		fmt.Fprintf(&b, "  day %-4g %-10s %-10s p→%.2f  median %-6s p90 %-6s worst %-6s not recovered %d  (%s)\n", c.Day, c.Task, c.Model, c.P, reqs(c.Median), reqs(c.P90), reqs(float64(c.Worst)), c.Never, c.Note)
	}
	b.WriteString("\nGoals:\n")
	for _, g := range rep.Goals {
		mark := "MET    "
		if !g.Met {
			mark = "NOT MET"
		}
		fmt.Fprintf(&b, "  [%s] %s: %s (target %s)\n", mark, g.Name, g.Value, g.Target)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON prints the report as JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}
