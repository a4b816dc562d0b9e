package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing"
)

// affinityStore is what `opentalon affinity` needs; *store.DB has it.
type affinityStore interface {
	Affinities(ctx context.Context) ([]core.Affinity, error)
	ResetAffinity(ctx context.Context, task, model string) (int64, error)
}

const affinityUsage = "usage: opentalon affinity show [--json] | opentalon affinity reset [--task T] [--model M]"

// runAffinity implements `opentalon affinity show [--json]` and
// `opentalon affinity reset [--task T] [--model M]`. decayDays is
// routing.affinity.decay_days; aliases maps the aliases of
// models.catalog to their references; now is the clock. args are the
// words after "affinity".
func runAffinity(ctx context.Context, db affinityStore, decayDays float64, aliases map[string]string, now time.Time, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return subUsageError("affinity", args, "show or reset", affinityUsage)
	}
	fs := flag.NewFlagSet("opentalon affinity "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	switch args[0] {
	case "show":
		asJSON := fs.Bool("json", false, "print JSON")
		if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 {
			return flagsError("affinity show", err, fs.Args(), affinityUsage)
		}
		rows, err := db.Affinities(ctx)
		if err != nil {
			return err
		}
		scores := make([]routing.Score, len(rows))
		for i, a := range rows {
			scores[i] = routing.ScoreOf(a, now, decayDays)
		}
		if *asJSON {
			type row struct {
				Task       string     `json:"task"`
				Model      string     `json:"model"`
				Score      float64    `json:"score"`
				Evidence   float64    `json:"evidence"`
				Positive   int        `json:"positive"`
				Negative   int        `json:"negative"`
				LastSignal *time.Time `json:"last_signal,omitempty"`
			}
			out := make([]row, 0, len(scores))
			for _, s := range scores {
				r := row{s.Task, s.Model, s.Score, s.Evidence, s.Positives, s.Negatives, nil}
				if !s.LastSignal.IsZero() {
					t := s.LastSignal.UTC()
					r.LastSignal = &t
				}
				out = append(out, r)
			}
			return writeTermJSON(stdout, out)
		}
		if len(scores) == 0 {
			_, err := fmt.Fprintln(stdout, "No affinity yet: it grows from reactions, /retry, follow-ups and /model choices.")
			return err
		}
		// The task types and model names are read from the database:
		// made safe for the terminal (termText) like every stored text.
		table := [][]string{{"TASK", "MODEL", "SCORE", "EVIDENCE", "POSITIVE", "NEGATIVE", "LAST SIGNAL"}}
		for _, s := range scores {
			last := "-"
			if !s.LastSignal.IsZero() {
				last = s.LastSignal.UTC().Format("2006-01-02 15:04")
			}
			table = append(table, []string{termText(s.Task), termText(s.Model), fmt.Sprintf("%.2f", s.Score), fmt.Sprintf("%.1f", s.Evidence),
				strconv.Itoa(s.Positives), strconv.Itoa(s.Negatives), last})
		}
		return writeTable(stdout, table)
	case "reset":
		task := fs.String("task", "", "only this task type")
		model := fs.String("model", "", "only this model (provider/model or alias)")
		if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 {
			return flagsError("affinity reset", err, fs.Args(), affinityUsage)
		}
		if ref, ok := aliases[*model]; ok {
			*model = ref
		}
		if *task != "" || *model != "" {
			// A name that nothing knows is a mistake, not "0 rows".
			rows, err := db.Affinities(ctx)
			if err != nil {
				return err
			}
			if err := knownAffinityNames(rows, aliases, *task, *model); err != nil {
				return err
			}
		}
		n, err := db.ResetAffinity(ctx, *task, *model)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "Reset %d affinity rows.\n", n)
		return err
	}
	return subUsageError("affinity", args, "show or reset", affinityUsage)
}

// knownAffinityNames says whether task and model ("" = any) are names
// affinity knows: a task type, a model of models.catalog, or a name a
// row holds (a model since taken out of the catalog keeps its rows).
func knownAffinityNames(rows []core.Affinity, aliases map[string]string, task, model string) error {
	tasks := map[string]bool{}
	for _, t := range routing.TaskTypes {
		tasks[t] = true
	}
	models := map[string]bool{}
	for _, ref := range aliases {
		models[ref] = true
	}
	for _, a := range rows {
		tasks[a.Task] = true
		models[a.Model] = true
	}
	if task != "" && !tasks[task] {
		return fmt.Errorf("affinity reset: no task type %q; task types: %s", task, strings.Join(slices.Sorted(maps.Keys(tasks)), ", "))
	}
	if model != "" && !models[model] {
		known := slices.Sorted(maps.Keys(models))
		if len(known) == 0 {
			return fmt.Errorf("affinity reset: no model %q has affinity rows, and none does yet", model)
		}
		return fmt.Errorf("affinity reset: no model %q in models.catalog or the affinity rows; use one of %s (or its alias)", model, strings.Join(known, ", "))
	}
	return nil
}
