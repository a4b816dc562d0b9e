package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const tinyScenario = `horizon_days: 10
requests: 400
seeds: 1
models:
  - {ref: s/cheap, weight: 90, cost: {input: 0.1, output: 0.2}}
  - {ref: s/big, weight: 10, cost: {input: 10, output: 20}}
tasks:
  chat: {share: 1, input_tokens: 100, output_tokens: 100}
acceptance:
  chat: {s/cheap: 0.9, s/big: 0.9}
users:
  rejection: {retry: 1}
  moves_on: 1
`

func TestRunBenchRoute(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(file, []byte(tinyScenario), 0o600)
	var out bytes.Buffer
	if err := runBenchRoute(context.Background(), []string{"route", "--scenario", file, "--seeds", "2", "--json"}, &out); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Seeds    int
		Policies map[string]struct {
			FinalAcceptance struct{ Mean float64 } `json:"final_acceptance"`
		}
		CostVsExpensive struct{ Mean float64 } `json:"cost_vs_most_expensive"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	// Equal acceptance, one model 100× cheaper: the router must be far
	// cheaper than always-most-expensive.
	if rep.Seeds != 2 || rep.CostVsExpensive.Mean > 0.2 || rep.Policies["router"].FinalAcceptance.Mean < 0.8 {
		t.Fatalf("report: %+v", rep)
	}
	out.Reset()
	if err := runBenchRoute(context.Background(), []string{"route", "--scenario", file}, &out); err != nil || !strings.Contains(out.String(), "Goals:") {
		t.Fatalf("text: %v\n%s", err, out.String())
	}
	var ue usageError
	if err := runBenchRoute(context.Background(), []string{"plugins"}, &out); !errors.As(err, &ue) {
		t.Fatalf("bad target: %v", err)
	}
	if err := runBenchRoute(context.Background(), []string{"route", "--scenario", filepath.Join(t.TempDir(), "missing.yaml")}, &out); err == nil {
		t.Fatal("missing scenario accepted")
	}
}
