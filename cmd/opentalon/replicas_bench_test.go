package main

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/opentalon/opentalon/store/pgtest"
)

// BenchmarkPerfThroughputReplicas is BenchmarkPerfThroughputPostgres
// with two replicas in the process over the one database: one polls the
// fake Bot API (it holds the channel's lease), both claim from the
// queue. Besides the throughput figures it reports retried-requests: the
// requests that failed and were run again (a transaction that kept
// losing to another replica's shows here first):
//
//	go test -run '^$' -bench PerfThroughputReplicas -benchtime 1x ./cmd/opentalon
func BenchmarkPerfThroughputReplicas(b *testing.B) {
	dsn := pgtest.DurableDSN(b)
	tp, llm := newTPRun(b)
	var retried atomic.Int64
	log := slog.New(retryCounter{&retried})
	for range 2 {
		cfg := loadConfigFile(b, tpConfig(b, tp.tg.URL, llm.BaseURL(), dsn))
		defer runBenchApp(b, cfg, AppOptions{Logger: log})()
	}
	tp.cpu = processCPU
	measureThroughput(b, tp)
	b.ReportMetric(float64(retried.Load()), "retried-requests")
}

// retryCounter is a log handler that only counts the gateway's "request
// failed; will retry" records.
type retryCounter struct{ n *atomic.Int64 }

func (retryCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h retryCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "request failed; will retry" {
		h.n.Add(1)
	}
	return nil
}

func (h retryCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h retryCounter) WithGroup(string) slog.Handler      { return h }
