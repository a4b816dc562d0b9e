package sim

import (
	"context"
	"os"
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
