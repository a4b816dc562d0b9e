package main

import (
	"strings"
	"testing"

	"github.com/opentalon/opentalon/routing"
)

// TestJudgeRate: routing.judge.rate left out is 0.05, and 0 turns the
// judge off (the router takes a rate of 0 for its default, so the
// wiring must not hand it one).
func TestJudgeRate(t *testing.T) {
	for _, tc := range []struct {
		name, judge string
		want        routing.Judging
	}{
		{"no judge", "", routing.Judging{}},
		{"rate left out", "  judge: { model: fake/small }\n", routing.Judging{Model: "fake/small", Rate: 0.05}},
		{"rate 0", "  judge: { model: fake/small, rate: 0 }\n", routing.Judging{}},
		{"rate 0.2 and a cap", "  judge: { model: fake/small, rate: 0.2, daily_usd: 1.5 }\n", routing.Judging{Model: "fake/small", Rate: 0.2, DailyUSD: 1.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml := testConfig(t.TempDir(), "http://127.0.0.1:1/v1", "")
			if tc.judge != "" {
				yaml = strings.Replace(yaml, "routing:\n", "routing:\n"+tc.judge, 1)
			}
			if got := judging(parseConfig(t, yaml).Routing.Judge); got != tc.want {
				t.Fatalf("judging = %+v, want %+v", got, tc.want)
			}
		})
	}
}
