package console

import (
	"bytes"
	"context"
	"io"
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

// lockedBuffer is Out shared by the channel's goroutines and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor waits until out holds want.
func waitFor(t *testing.T, out *lockedBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for out.String() != want {
		if time.Now().After(deadline) {
			t.Fatalf("terminal shows %q; want %q", out.String(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// On a terminal: a prompt, a waiting line that counts the seconds and
// gives way to the answer, the prompt again, a continuation prompt, and
// the prompt's line ended at Ctrl-D. Through pipes none of it.
func TestInteractivePromptAndWaitingLine(t *testing.T) {
	in, typing := io.Pipe()
	out := &lockedBuffer{}
	now := time.Unix(1000, 0)
	var clk sync.Mutex
	eof := make(chan struct{})
	ch := New(Options{In: in, Out: out, Interactive: true, Tick: 10 * time.Millisecond, OnEOF: func() { close(eof) },
		Now: func() time.Time { clk.Lock(); defer clk.Unlock(); return now }})
	s := &sink{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go ch.Run(ctx, s)
	waitFor(t, out, "› ")

	io.WriteString(typing, "hello\n") // the terminal echoes it and moves to a new line
	for len(s.accepted()) == 0 {
		time.Sleep(time.Millisecond)
	}
	stop := ch.Working(ctx, s.accepted()[0])
	waitFor(t, out, "› \r\x1b[K  thinking… 0s")
	clk.Lock()
	now = now.Add(3 * time.Second)
	clk.Unlock()
	waitFor(t, out, "› \r\x1b[K  thinking… 0s\r\x1b[K  thinking… 3s")
	// The gateway sends the answer, then stops the indicator.
	if _, err := ch.Send(ctx, core.Outbound{}, "Hi there."); err != nil {
		t.Fatal(err)
	}
	stop()
	want := "› \r\x1b[K  thinking… 0s\r\x1b[K  thinking… 3s\r\x1b[KHi there.\n› "
	waitFor(t, out, want)

	// A message that arrives while the prompt shows replaces it, and the
	// prompt comes back below it.
	ch.Send(ctx, core.Outbound{}, "Your answer is delayed.")
	want += "\r\x1b[KYour answer is delayed.\n› "
	waitFor(t, out, want)

	io.WriteString(typing, "first\\\n")
	want += "· "
	waitFor(t, out, want)
	typing.Close()
	<-eof
	waitFor(t, out, want+"\n")
}

func (s *sink) accepted() []core.Inbound {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]core.Inbound(nil), s.got...)
}

func TestPipedConsoleShowsAnswersOnly(t *testing.T) {
	var out bytes.Buffer
	ch := New(Options{In: strings.NewReader("hi\n"), Out: &out})
	stop := ch.Working(context.Background(), core.Inbound{})
	ch.Send(context.Background(), core.Outbound{}, "answer")
	stop()
	if out.String() != "answer\n" {
		t.Fatalf("piped console wrote %q; want the answer only", out.String())
	}
}

// When the gateway stops (Ctrl-C) while an answer is being written, a
// terminal says so and shows no prompt again: it no longer reads what is
// typed. Through pipes nothing is added.
func TestStoppingIsShownOnATerminal(t *testing.T) {
	for _, interactive := range []bool{true, false} {
		var out bytes.Buffer
		in, w := io.Pipe()
		defer w.Close()
		ch := New(Options{In: in, Out: &out, Interactive: interactive, Tick: time.Hour})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- ch.Run(ctx, &sink{}) }()
		stop := ch.Working(context.Background(), core.Inbound{})
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		stop()
		if _, err := ch.Send(context.Background(), core.Outbound{}, "the answer"); err != nil {
			t.Fatal(err)
		}
		got := out.String()
		if !interactive {
			if got != "the answer\n" {
				t.Fatalf("through a pipe the console wrote %q; want the answer only", got)
			}
			continue
		}
		i := strings.Index(got, stoppingNotice)
		if i < 0 {
			t.Fatalf("the terminal shows %q; want the stopping notice %q", got, stoppingNotice)
		}
		if rest := got[i:]; strings.Contains(rest, Prompt) || !strings.HasSuffix(rest, "the answer\n") {
			t.Fatalf("after the stopping notice the terminal shows %q; want the answer and no prompt", rest)
		}
	}
}

// A terminal in line mode drops what comes past 4095 bytes of a line:
// with stdin on a terminal, whatever stdout is, such a line is taken as
// cut and not sent (with the rest of a message continued across it),
// and a notice says so. Through a pipe nothing is cut, and the line is
// sent.
func TestLineCutByTheTerminalIsNotSent(t *testing.T) {
	cut := strings.Repeat("x", terminalLineMax)
	fits := strings.Repeat("y", terminalLineMax-1)
	input := cut + "\nshort\nfirst\\\n" + cut + "\n" + fits + "\n"
	for _, tc := range []struct {
		interactive bool
		terminalIn  bool // stdin a terminal, stdout not (opentalon run | tee FILE)
		want        []string
		notices     int
	}{
		{true, true, []string{"short", fits}, 2},
		{false, true, []string{"short", fits}, 2},
		{false, false, []string{cut, "short", "first\n" + cut, fits}, 0},
	} {
		var out bytes.Buffer
		eof := make(chan struct{})
		ch := New(Options{In: strings.NewReader(input), Out: &out, Interactive: tc.interactive, TerminalIn: tc.terminalIn, OnEOF: func() { close(eof) }})
		s := &sink{}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- ch.Run(ctx, s) }()
		<-eof
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, in := range s.got {
			got = append(got, in.Text)
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("interactive=%v terminalIn=%v: accepted %d messages %.40q…; want %d", tc.interactive, tc.terminalIn, len(got), got, len(tc.want))
		}
		if tc.interactive && !strings.Contains(out.String(), lineCutNotice+"\n"+Prompt) {
			t.Errorf("no prompt follows the notice of a cut line: %.200q", out.String()[strings.Index(out.String(), "not sent"):])
		}
		if n := strings.Count(out.String(), lineCutNotice); n != tc.notices {
			t.Errorf("interactive=%v terminalIn=%v: the notice of a cut line shows %d times; want %d", tc.interactive, tc.terminalIn, n, tc.notices)
		}
	}
}

// After Ctrl-D the answers still being written are shown, and no prompt
// after them: nothing reads it, and the shell's prompt would follow it on
// its line.
func TestNoPromptAfterTheInputEnded(t *testing.T) {
	var out bytes.Buffer
	eof := make(chan struct{})
	ch := New(Options{In: strings.NewReader("question\n"), Out: &out, Interactive: true, Tick: time.Hour, OnEOF: func() { close(eof) }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- ch.Run(ctx, &sink{}) }()
	<-eof
	stop := ch.Working(context.Background(), core.Inbound{})
	stop()
	if _, err := ch.Send(context.Background(), core.Outbound{}, "the answer"); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.HasSuffix(got, "the answer\n") {
		t.Fatalf("after Ctrl-D the terminal shows %q; want it to end with the answer and a line break", got)
	}
}
