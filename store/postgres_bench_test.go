package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store/pgtest"
)

// BenchmarkQueuePostgres is BenchmarkQueue on a local PostgreSQL server
// with durable commits (fsync and synchronous_commit on), one claimer:
// enqueue → claim → finish per second.
func BenchmarkQueuePostgres(b *testing.B) {
	db, err := Open(context.Background(), b.TempDir(), Options{Postgres: &Postgres{DSN: pgtest.DurableDSN(b)}, LeaseTTL: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		conv := core.ConversationKey{Channel: "bench", Chat: fmt.Sprint(i % 50)}
		if _, _, err := db.Enqueue(ctx, msgItem(conv, fmt.Sprint(i), "hello")); err != nil {
			b.Fatal(err)
		}
		items, _, err := db.Claim(ctx, 1, time.Now())
		if err != nil || len(items) != 1 {
			b.Fatalf("claim: %v %d", err, len(items))
		}
		if err := db.Finish(ctx, items[0].ID, items[0].Lease, core.StatusDone, ""); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// BenchmarkClaimHeadsPostgres is BenchmarkClaimHeads on PostgreSQL: 2,000
// waiting in 200 conversations whose heads all run.
func BenchmarkClaimHeadsPostgres(b *testing.B) {
	db, err := Open(context.Background(), b.TempDir(), Options{Postgres: &Postgres{DSN: pgtest.DSN(b)}, LeaseTTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	for i := range 2000 {
		conv := core.ConversationKey{Channel: "bench", Chat: fmt.Sprint(i % 200)}
		if _, _, err := db.Enqueue(ctx, msgItem(conv, fmt.Sprint(i), "hello")); err != nil {
			b.Fatal(err)
		}
	}
	if items, _, err := db.Claim(ctx, 200, time.Now()); err != nil || len(items) != 200 {
		b.Fatalf("claim: %v %d", err, len(items))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := db.Claim(ctx, 4, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}
