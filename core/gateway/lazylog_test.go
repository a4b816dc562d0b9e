package gateway

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
)

// TestLazyWithWritesWhatWithWrites: a logger from lazyWith writes the
// same lines as one from With, through further With and WithGroup.
func TestLazyWithWritesWhatWithWrites(t *testing.T) {
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	write := func(with func(*slog.Logger, ...any) *slog.Logger, json bool) string {
		var buf bytes.Buffer
		o := &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: noTime}
		var h slog.Handler = slog.NewTextHandler(&buf, o)
		if json {
			h = slog.NewJSONHandler(&buf, o)
		}
		base := slog.New(h).With("component", "gateway")
		log := with(base, "request", int64(7), "conv", "telegram:42", "kind", "message", slog.Int("n", 1), 99, "dangling")
		log.Debug("not written", "x", 1)
		log.Info("written", "err", "boom")
		log.With("more", true).Warn("with more")
		log.WithGroup("g").Error("grouped", "k", "v")
		return buf.String()
	}
	for _, json := range []bool{false, true} {
		got, want := write(lazyWith, json), write((*slog.Logger).With, json)
		if got != want {
			t.Errorf("json=%v:\nlazyWith wrote\n%s\nWith wrote\n%s", json, got, want)
		}
	}
}

// TestLazyWithTakesTheAttrsOnlyToWrite: nothing logged at the level set,
// the handler never formats the attributes.
func TestLazyWithTakesTheAttrsOnlyToWrite(t *testing.T) {
	h := &countingHandler{level: slog.LevelInfo}
	log := lazyWith(slog.New(h), "request", 7)
	log.Debug("below the level")
	if h.withAttrs != 0 {
		t.Fatalf("WithAttrs called %d times before anything was written", h.withAttrs)
	}
	log.Info("one")
	log.Info("two")
	if h.withAttrs != 1 || h.handled != 2 {
		t.Errorf("WithAttrs %d times, %d records; want once, 2", h.withAttrs, h.handled)
	}
}

type countingHandler struct {
	level              slog.Level
	withAttrs, handled int
}

func (h *countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }
func (h *countingHandler) Handle(context.Context, slog.Record) error    { h.handled++; return nil }
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler           { h.withAttrs++; return h }
func (h *countingHandler) WithGroup(string) slog.Handler                { return h }

// BenchmarkItemLogger is the logger each item's work starts with, on a
// text handler at info, with no line written (a plain answer).
func BenchmarkItemLogger(b *testing.B) {
	base := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})).With("component", "gateway")
	for name, with := range map[string]func(*slog.Logger, ...any) *slog.Logger{"With": (*slog.Logger).With, "lazyWith": lazyWith} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				log := with(base, "request", int64(i), "conv", "telegram:42", "kind", "message")
				log.Debug("processing request", "attempts", 0)
			}
		})
	}
}
