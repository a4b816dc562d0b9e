package store

import (
	"context"
	"sync"
	"testing"

	"github.com/opentalon/opentalon/core"
)

// TestConcurrentFoldsWaitInsteadOfAborting: on PostgreSQL many
// transactions fold into one affinity row at once (every judged message
// folds into its task and model's row). Each waits for the row's lock and
// folds what the one before wrote: every fold counts, the first ones
// (which find no row) included, and no transaction is aborted and run
// again. SERIALIZABLE aborted all but one of them at a time: under load
// some lost ten times in a row and their request (LLM call and all) ran
// again.
func TestConcurrentFoldsWaitInsteadOfAborting(t *testing.T) {
	db := openPG(t, Options{})
	ctx := context.Background()
	fold := func(a core.Affinity) core.Affinity { a.Pos++; a.Positives++; return a }
	const workers, each = 12, 6
	before := db.Trips()
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for range each {
				sig := core.Signal{Kind: "accepted", Polarity: core.Positive, Model: "fake/big", TaskType: "chat", Weight: 1}
				var err error
				if w%2 == 0 {
					// The message path: a usage row and the signal in one
					// statement (usageAndSignal), then the fold.
					d := &core.Deferred{Owner: db}
					d.AddUsage(core.UsageRecord{Conversation: "telegram:1", Model: "fake/big"})
					d.AddSignal(core.DeferredSignal{Signal: sig, Task: "chat", Model: "fake/big", Fold: fold})
					err = db.WriteDeferred(ctx, d)
				} else {
					_, err = db.AddSignalAndAffinity(ctx, sig, "chat", "fake/big", fold)
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a fold failed: %v", err)
	}
	rows, err := db.Affinities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Positives != workers*each || rows[0].Pos != workers*each {
		t.Fatalf("affinity rows %+v; want one with %d positives (every fold counted)", rows, workers*each)
	}
	if got := db.Trips().Sub(before).Writes; got != workers*each {
		t.Errorf("%d folds took %d write transactions; want one each (none aborted and run again)", workers*each, got)
	}
}
