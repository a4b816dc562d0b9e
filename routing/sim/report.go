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
	CostVsExpensive Stat           `json:"cost_vs_most_expensive"`
	Changes         []ChangeReport `json:"changes"`
	Goals           []Goal         `json:"goals"`
}

// Goal is one of the targets and whether it was reached.
type Goal struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Target string `json:"target"`
	Met    bool   `json:"met"`
}

// RecoveryGoal is the bound on recovery after a change.
const RecoveryGoal = 150

func aggregate(sc *Scenario, results map[string][]SeedResult) *Report {
	rep := &Report{Seeds: sc.Seeds, Requests: sc.Requests, Days: sc.HorizonDays, Policies: map[string]PolicyReport{}}
	for p, rs := range results {
		var first, final, esc, cost, cpa, util, mis []float64
		for _, r := range rs {
			n := float64(r.Requests)
			first = append(first, float64(r.FirstAccepted)/n)
			final = append(final, float64(r.FinalAccepted)/n)
			esc = append(esc, 100*float64(r.Escalations)/n)
			cost = append(cost, r.Cost)
			cpa = append(cpa, r.Cost/math.Max(float64(r.FinalAccepted), 1))
			util = append(util, r.Utility/r.OracleUtility)
			mis = append(mis, float64(r.Misclassified)/n)
		}
		rep.Policies[p] = PolicyReport{stat(first), stat(final), stat(esc), stat(cost), stat(cpa), stat(util), stat(mis)}
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
	ro, ex := rep.Policies[PolicyRouter], rep.Policies[PolicyExpensive]
	rep.Goals = []Goal{
		{"utility vs per-task oracle", pct(ro.UtilityVsOracle.Mean), "≥ 95%", ro.UtilityVsOracle.Mean >= 0.95},
		{"cost vs always-most-expensive", pct(rep.CostVsExpensive.Mean), "< 33.3%", rep.CostVsExpensive.Mean < 1.0/3},
		{"final acceptance vs always-most-expensive", fmt.Sprintf("%s vs %s", pct(ro.FinalAcceptance.Mean), pct(ex.FinalAcceptance.Mean)), "≥", ro.FinalAcceptance.Mean >= ex.FinalAcceptance.Mean},
	}
	for _, c := range rep.Changes {
		rep.Goals = append(rep.Goals, Goal{fmt.Sprintf("recovery after day-%g change (%s, %s)", c.Day, c.Task, c.Model),
			fmt.Sprintf("median %g, p90 %g, worst %d requests", c.Median, c.P90, c.Worst), fmt.Sprintf("≤ %d (p90, every seed)", RecoveryGoal), c.Achieved})
	}
	return rep
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

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
	fmt.Fprintf(&b, "\nrouter cost = %s of always-most-expensive (sd %s); misclassified tasks %s\n", pct(rep.CostVsExpensive.Mean), pct(rep.CostVsExpensive.SD), pct(rep.Policies[PolicyRouter].Misclassified.Mean))
	b.WriteString("\nRecovery after changes (requests of the affected task until 16 of 20 choices are near-optimal):\n")
	for _, c := range rep.Changes {
		fmt.Fprintf(&b, "  day %-4g %-10s %-10s p→%.2f  median %-6g p90 %-6g worst %-6d not recovered %d  (%s)\n", c.Day, c.Task, c.Model, c.P, c.Median, c.P90, c.Worst, c.Never, c.Note)
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
