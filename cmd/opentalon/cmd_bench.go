package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/opentalon/opentalon/routing/sim"
)

const benchUsage = "usage: opentalon bench route [--scenario FILE] [--seeds N] [--json]  (default scenario: bench/route/default.yaml, built in)"

// runBenchRoute implements `opentalon bench route --scenario FILE
// [--seeds N] [--json]`: the router simulator (no network, fake clock).
// args are the words after "bench".
func runBenchRoute(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "route" {
		return subUsageError("bench", args, "route", benchUsage)
	}
	fs := flag.NewFlagSet("opentalon bench route", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	file := fs.String("scenario", "", "scenario YAML (default: the built-in bench/route/default.yaml)")
	seeds := fs.Int("seeds", 0, "number of seeds (default: the scenario's)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args[1:]); err != nil {
		return usageError{fmt.Sprintf("bench route: %v; %s", err, benchUsage)}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("bench route: unexpected %q; %s", fs.Arg(0), benchUsage)}
	}
	var sc *sim.Scenario
	var err error
	if *file == "" {
		sc, err = sim.Default()
	} else {
		sc, err = sim.Load(*file)
	}
	if err != nil {
		return err
	}
	rep, err := sim.Run(ctx, sc, *seeds)
	if err != nil {
		return fmt.Errorf("bench route: %w", err)
	}
	if *asJSON {
		return rep.WriteJSON(stdout)
	}
	return rep.WriteText(stdout)
}
