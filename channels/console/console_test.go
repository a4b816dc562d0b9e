package console

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

// sink records what the channel hands to core.
type sink struct {
	mu  sync.Mutex
	got []core.Inbound
}

func (s *sink) Accept(_ context.Context, in core.Inbound) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, in)
	return nil
}
func (s *sink) Edit(context.Context, core.Inbound) (bool, error) { return false, nil }
func (s *sink) React(context.Context, core.Reaction) error       { return nil }
func (s *sink) Commands() []core.CommandInfo                     { return nil }

func TestReadsLinesAndWritesReplies(t *testing.T) {
	var out bytes.Buffer
	eof := make(chan struct{})
	ch := New(Options{In: strings.NewReader("hello\n\n  \nfirst line\\\nsecond line\n"), Out: &out, OnEOF: func() { close(eof) }})
	s := &sink{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- ch.Run(ctx, s) }()
	select {
	case <-eof:
	case <-time.After(5 * time.Second):
		t.Fatal("OnEOF not called at the end of the input")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(s.got) != 2 || s.got[0].Text != "hello" || s.got[1].Text != "first line\nsecond line" {
		t.Fatalf("accepted %+v; want two messages, the second joined across the backslash", s.got)
	}
	if s.got[0].MessageID == s.got[1].MessageID || s.got[0].Conversation.String() != "console:local" || !s.got[0].Private {
		t.Fatalf("message ids/conversation = %+v", s.got)
	}
	id, err := ch.Send(context.Background(), core.Outbound{}, "**answer**")
	if err != nil || id == "" || out.String() != "**answer**\n" {
		t.Fatalf("send: id=%q err=%v out=%q", id, err, out.String())
	}
	if parts := ch.Format(strings.Repeat("x", 10000)); len(parts) != 1 {
		t.Fatalf("console split a reply into %d parts", len(parts))
	}
}

func TestIDsDifferAcrossRestarts(t *testing.T) {
	t0 := time.Unix(100, 0)
	a := New(Options{Now: func() time.Time { return t0 }})
	b := New(Options{Now: func() time.Time { return t0.Add(time.Millisecond) }})
	if a.start == b.start {
		t.Fatal("two console channels started at different times share a message id prefix")
	}
}

func TestLongLineDoesNotEndInput(t *testing.T) {
	long := strings.Repeat("x", 2<<20)
	eof := make(chan struct{})
	ch := New(Options{In: strings.NewReader(long + "\nafter\n"), Out: &bytes.Buffer{}, OnEOF: func() { close(eof) }})
	s := &sink{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go ch.Run(ctx, s)
	select {
	case <-eof:
	case <-time.After(5 * time.Second):
		t.Fatal("input never ended")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.got) != 2 || len(s.got[0].Text) != len(long) || s.got[1].Text != "after" {
		t.Fatalf("accepted %d messages; want the 2 MiB line and the one after it", len(s.got))
	}
}
