package store

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
)

func TestOperatorReads(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	db := openTest(t, Options{Now: clk.Now})

	t.Run("oldest queued", func(t *testing.T) {
		if at, err := db.OldestQueued(ctx); err != nil || !at.IsZero() {
			t.Fatalf("empty queue: %v %v", at, err)
		}
		conv := core.ConversationKey{Channel: "telegram", Chat: "1"}
		for i, d := range []time.Duration{0, time.Minute} {
			it := msgItem(conv, fmt.Sprint(i), "x")
			it.CreatedAt = clk.Now().Add(d)
			if _, _, err := db.Enqueue(ctx, it); err != nil {
				t.Fatal(err)
			}
		}
		if at, err := db.OldestQueued(ctx); err != nil || !at.Equal(clk.Now()) {
			t.Fatalf("oldest = %v %v; want %v", at, err, clk.Now())
		}
	})

	add := func(at time.Time, conv, model string, in, out int, cost float64) {
		t.Helper()
		if err := db.AddUsage(ctx, core.UsageRecord{At: at, Conversation: conv, Model: model, InputTokens: in, OutputTokens: out, CostUSD: cost}); err != nil {
			t.Fatal(err)
		}
	}
	t0 := clk.Now()
	add(t0.Add(-30*time.Hour), "telegram:1", "p/a", 1, 1, 1) // before the 24 h window
	add(t0.Add(-2*time.Hour), "telegram:1", "p/a", 10, 20, 0.5)
	add(t0.Add(-90*time.Minute), "slack:C1:t", "p/b", 5, 5, 0.25)
	add(t0.Add(-10*time.Minute), "", "p/a", 1, 2, 0)

	t.Run("ledger by model, incrementally", func(t *testing.T) {
		rows, last, err := db.UsageByModelAfter(ctx, 0)
		if err != nil || last != 4 || fmt.Sprint(rows) != "[{p/a 3 12 23 1.5} {p/b 1 5 5 0.25}]" {
			t.Fatalf("rows %v last %d err %v", rows, last, err)
		}
		add(t0, "telegram:2", "p/b", 1, 1, 0.01)
		rows, last, _ = db.UsageByModelAfter(ctx, last)
		if last != 5 || fmt.Sprint(rows) != "[{p/b 1 1 1 0.01}]" {
			t.Fatalf("after 4: rows %v last %d", rows, last)
		}
		if rows, last, _ = db.UsageByModelAfter(ctx, last); len(rows) != 0 || last != 5 {
			t.Fatalf("nothing new: rows %v last %d", rows, last)
		}
	})
	t.Run("series by channel in hour buckets", func(t *testing.T) {
		since := t0.Add(-24 * time.Hour)
		pts, err := db.UsageSeries(ctx, since, time.Hour, "channel")
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, p := range pts {
			got += fmt.Sprintf("%s %q %d %.2f; ", p.Bucket.Sub(since), p.Key, p.Calls, p.CostUSD)
		}
		want := `22h0m0s "slack" 1 0.25; 22h0m0s "telegram" 1 0.50; 23h0m0s "" 1 0.00; 24h0m0s "telegram" 1 0.01; `
		if got != want {
			t.Fatalf("series = %s\nwant     %s", got, want)
		}
		if _, err := db.UsageSeries(ctx, since, time.Hour, "user"); core.ErrorKind(err) != core.KindInvalid {
			t.Fatalf("by user: %v; want KindInvalid", err)
		}
	})
	t.Run("recent failures", func(t *testing.T) {
		items, _, _ := db.Claim(ctx, 10, clk.Now().Add(time.Hour))
		if err := db.Finish(ctx, items[0].ID, items[0].Lease, core.StatusFailed, "the AI provider refused my credentials"); err != nil {
			t.Fatal(err)
		}
		fs, err := db.RecentFailures(ctx, 5)
		if err != nil || len(fs) != 1 || fs[0].Channel != "telegram" || fs[0].Reason != "the AI provider refused my credentials" {
			t.Fatalf("failures = %+v %v", fs, err)
		}
	})
	t.Run("quick check", func(t *testing.T) {
		if probs, err := db.QuickCheck(ctx); err != nil || len(probs) != 0 {
			t.Fatalf("quick_check = %v %v", probs, err)
		}
	})
}

func TestBackupWhileWriting(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, Options{})
	conv := core.ConversationKey{Channel: "telegram", Chat: "1"}
	for i := range 50 {
		if _, _, err := db.Enqueue(ctx, msgItem(conv, fmt.Sprint(i), "before")); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			db.Enqueue(ctx, msgItem(conv, fmt.Sprint("w", i), "during"))
		}
	}()
	out := filepath.Join(t.TempDir(), "copy.db")
	err := db.Backup(ctx, out)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	cp, err := OpenFile(ctx, out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	counts, err := cp.QueueCounts(ctx)
	if err != nil || counts[core.StatusQueued] < 50 {
		t.Fatalf("the copy holds %v (%v); want at least the 50 messages written before", counts, err)
	}
	if probs, err := cp.QuickCheck(ctx); err != nil || len(probs) > 0 {
		t.Fatalf("the copy is not sound: %v %v", probs, err)
	}
	if err := db.Backup(ctx, out); core.ErrorKind(err) != core.KindInvalid {
		t.Fatalf("backup over an existing file: %v; want KindInvalid", err)
	}
}
