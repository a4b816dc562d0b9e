package routing

import (
	"strings"
	"testing"
	"time"
)

// TestExplanationNamesTheLastChange: the explanation /model and the status
// page show names the last change the detectors noticed, and says so when
// they noticed none (issue 28: acceptance and price, evidence, last change
// detected, exploring or settled).
func TestExplanationNamesTheLastChange(t *testing.T) {
	arms := []ArmStanding{{Model: "p/cheap", Acceptance: 0.9, Evidence: 12, Price: 0.5, Utility: 0.88, Role: "incumbent"}}
	at := time.Date(2026, 5, 1, 9, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		change *DetectedChange
		want   string
	}{
		{"none detected", nil, "\nLast change detected: none yet."},
		{"a drop", &DetectedChange{Model: "p/cheap", At: at, Direction: "drop", Scope: "task"}, "\nLast change detected: p/cheap dropped at 2026-05-01 09:30 UTC."},
		{"a model-wide drop", &DetectedChange{Model: "p/cheap", At: at, Direction: "drop", Scope: "model"}, "\nLast change detected: p/cheap dropped on several task types at once at 2026-05-01 09:30 UTC."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Explanation{Task: TaskChat, Model: "p/cheap", State: "settled", Evidence: 12, Arms: arms, LastChange: tc.change}
			got := e.String()
			if !strings.Contains(got, tc.want) || strings.Count(got, "Last change detected") != 1 {
				t.Fatalf("String() = %q\nwant it to contain %q once", got, tc.want)
			}
			if !strings.Contains(got, "90% accepted over 12.0 decayed signals at $0.50 per M tokens") || !strings.Contains(got, "; settled.") {
				t.Fatalf("String() = %q; want acceptance, evidence, price and the state", got)
			}
		})
	}
}
