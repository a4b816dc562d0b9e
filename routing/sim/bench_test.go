package sim

import (
	"context"
	"os"
	"strconv"
	"testing"
)

// BenchmarkDefaultScenario runs bench/route/default.yaml (all 30 seeds,
// or $ROUTE_SEEDS) and reports the simulator's results as metrics.
// Run: go test -run XXX -bench DefaultScenario -benchtime 1x ./routing/sim
func BenchmarkDefaultScenario(b *testing.B) {
	seeds := 0
	if s := os.Getenv("ROUTE_SEEDS"); s != "" {
		seeds, _ = strconv.Atoi(s)
	}
	for b.Loop() {
		sc, err := Default()
		if err != nil {
			b.Fatal(err)
		}
		envF := func(k string, dst *float64) {
			if v, err := strconv.ParseFloat(os.Getenv(k), 64); err == nil {
				*dst = v
			}
		}
		envF("ROUTE_CAP", &sc.Router.EvidenceCap)
		envF("ROUTE_EXPLORE", &sc.Router.Explore)
		envF("ROUTE_STALE", &sc.Router.StaleDays)
		envF("ROUTE_LAMBDA", &sc.CostWeight)
		rep, err := Run(context.Background(), sc, seeds)
		if err != nil {
			b.Fatal(err)
		}
		ro := rep.Policies[PolicyRouter]
		b.ReportMetric(100*ro.UtilityVsOracle.Mean, "%utility_vs_oracle")
		b.ReportMetric(100*rep.CostVsExpensive.Mean, "%cost_vs_expensive")
		b.ReportMetric(100*ro.FinalAcceptance.Mean, "%final_acceptance")
		b.ReportMetric(100*rep.Policies[PolicyExpensive].FinalAcceptance.Mean, "%final_acceptance_expensive")
		if testing.Verbose() {
			rep.WriteText(os.Stdout)
		}
	}
}
