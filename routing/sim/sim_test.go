package sim

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDefaultScenarioParses(t *testing.T) {
	sc, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Models) != 5 || len(sc.Tasks) != 5 || sc.Requests != 30000 || sc.HorizonDays != 90 || sc.Seeds != 30 || len(sc.Changes) != 3 {
		t.Fatalf("scenario = %+v", sc)
	}
	// No single global ranking: the oracle picks different models for
	// different tasks.
	w := newWorld(sc)
	picks := map[string]bool{}
	for _, task := range w.tasks {
		m, _ := w.oracle(task, 0)
		picks[m] = true
	}
	if len(picks) < 3 {
		t.Fatalf("oracle picks only %v", picks)
	}
}

func TestMessagesClassifyAsTheirTask(t *testing.T) {
	sc, _ := Default()
	w := newWorld(sc)
	res, err := runSeed(context.Background(), w, PolicyOracle, 1)
	_ = res
	if err != nil {
		t.Fatal(err)
	}
}

func TestSimulatorSmall(t *testing.T) {
	sc, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	sc.Requests, sc.Seeds = 3000, 2
	rep, err := Run(context.Background(), sc, 0)
	if err != nil {
		t.Fatal(err)
	}
	ro, ex, or := rep.Policies[PolicyRouter], rep.Policies[PolicyExpensive], rep.Policies[PolicyOracle]
	if or.UtilityVsOracle.Mean < 0.999 || or.UtilityVsOracle.Mean > 1.001 {
		t.Fatalf("oracle vs itself = %v", or.UtilityVsOracle)
	}
	if ro.UtilityVsOracle.Mean >= 1.0001 {
		t.Fatalf("router beats the oracle: %v", ro.UtilityVsOracle)
	}
	if ro.CostUSD.Mean >= ex.CostUSD.Mean {
		t.Fatalf("router cost %v ≥ most expensive %v", ro.CostUSD, ex.CostUSD)
	}
	if ro.Misclassified.Mean > 0 {
		t.Fatalf("misclassified %v", ro.Misclassified)
	}
	if testing.Verbose() {
		rep.WriteText(os.Stdout)
	}
}

func TestScenarioErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml string }{
		{"unknown key", "horizon_days: 1\nrequests: 1\nbogus: 1\n"},
		{"no models", "horizon_days: 1\nrequests: 1\n"},
		{"bad probability", "horizon_days: 1\nrequests: 1\nmodels: [{ref: a/b}, {ref: a/c}]\ntasks: {chat: {share: 1}}\nacceptance: {chat: {a/b: 2, a/c: 0.5}}\n"},
	} {
		if _, err := parse([]byte(tc.yaml), tc.name); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

// TestNewOutputsConsistent: the regret series, exploration and cost
// multiples agree with the totals the simulator reported before them.
func TestNewOutputsConsistent(t *testing.T) {
	sc, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	sc.Requests, sc.Seeds = 3000, 2
	w := newWorld(sc)
	results := map[string][]SeedResult{}
	for _, p := range []string{PolicyRouter, PolicyExpensive, PolicyOracle} {
		for s := range sc.Seeds {
			r, err := runSeed(context.Background(), w, p, uint64(s)+1)
			if err != nil {
				t.Fatal(err)
			}
			results[p] = append(results[p], r)
		}
	}
	rep := aggregate(sc, results)
	ro := rep.Policies[PolicyRouter]
	if len(ro.Regret) != regretPoints || ro.Regret[len(ro.Regret)-1].Request != sc.Requests {
		t.Fatalf("regret series: %d points, last %+v", len(ro.Regret), ro.Regret[len(ro.Regret)-1])
	}
	// The series ends at the total regret, which is what utility vs
	// oracle reports; it never decreases (the oracle is per-task best).
	var regret, ratio, cvo float64
	for i, r := range results[PolicyRouter] {
		regret += (r.OracleUtility - r.Utility) / 2
		ratio += r.Utility / r.OracleUtility / 2
		cvo += r.Cost / results[PolicyOracle][i].Cost / 2
		if r.Explored < r.Probes || r.ExploreCost > r.Cost || r.Explored == 0 {
			t.Fatalf("seed %d: explored %d probes %d cost %v of %v", i, r.Explored, r.Probes, r.ExploreCost, r.Cost)
		}
	}
	last := ro.Regret[len(ro.Regret)-1].Cumulative.Mean
	if math.Abs(last-regret) > 1e-6 || math.Abs(ro.UtilityVsOracle.Mean-ratio) > 1e-9 {
		t.Fatalf("regret series ends at %v, totals say %v; utility ratio %v vs %v", last, regret, ro.UtilityVsOracle.Mean, ratio)
	}
	for i := 1; i < len(ro.Regret); i++ {
		if ro.Regret[i].Cumulative.Mean < ro.Regret[i-1].Cumulative.Mean-1e-9 {
			t.Fatalf("cumulative regret falls at %d", i)
		}
	}
	if math.Abs(ro.CostVsOracle.Mean-cvo) > 1e-9 || math.Abs(rep.CostVsOracle.Mean-cvo) > 1e-9 {
		t.Fatalf("cost vs oracle %v, want %v", ro.CostVsOracle.Mean, cvo)
	}
	if or := rep.Policies[PolicyOracle]; math.Abs(or.CostVsOracle.Mean-1) > 1e-9 || or.ExplorationShare.Mean != 0 {
		t.Fatalf("oracle vs itself: %+v", or.CostVsOracle)
	}
	if ro.ExplorationShare.Mean <= 0 || ro.ProbeShare.Mean > ro.ExplorationShare.Mean || ro.ExplorationCost.Mean > ro.CostUSD.Mean {
		t.Fatalf("exploration %+v probes %+v cost %+v of %+v", ro.ExplorationShare, ro.ProbeShare, ro.ExplorationCost, ro.CostUSD)
	}
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"regret_series"`, `"exploration_share"`, `"probe_share"`, `"exploration_cost_usd"`, `"cost_vs_oracle"`, `"cost_vs_most_expensive"`, `"utility_vs_oracle"`} {
		if !strings.Contains(buf.String(), key) {
			t.Errorf("JSON has no %s", key)
		}
	}
	buf.Reset()
	rep.WriteText(&buf)
	for _, s := range []string{"× the oracle's", "exploration:", "regret over time", "cost vs the oracle's"} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("text report lacks %q:\n%s", s, buf.String())
		}
	}
}

// TestShippedScenariosParse: every scenario in bench/route loads.
func TestShippedScenariosParse(t *testing.T) {
	files, err := filepath.Glob("../../bench/route/*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("scenarios %v %v", files, err)
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Error(err)
		}
	}
}

// TestTextReportRecoveryOnlyWithChanges: the recovery heading comes with
// the scenario's changes, not alone when it has none.
func TestTextReportRecoveryOnlyWithChanges(t *testing.T) {
	const heading = "Recovery after changes"
	var buf bytes.Buffer
	if err := (&Report{}).WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), heading) || !strings.Contains(buf.String(), "\nGoals:") {
		t.Errorf("a report without changes:\n%s", buf.String())
	}
	buf.Reset()
	rep := &Report{Changes: []ChangeReport{{Day: 30, Task: "code", Model: "small", P: 0.9, Note: "small improves"}}}
	if err := rep.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), heading) || !strings.Contains(buf.String(), "small improves") {
		t.Errorf("a report with a change:\n%s", buf.String())
	}
}
