package toolkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
)

func TestAccess(t *testing.T) {
	tests := []struct {
		list     []string
		id, name string
		want     bool
	}{
		{nil, "42", "", true},
		{[]string{"42"}, "42", "", true},
		{[]string{"42"}, "43", "", false},
		{[]string{"@Bob"}, "7", "bob", true},
		{[]string{"bob"}, "7", "@BOB", true}, // a name without "@": not an id's shape
		{[]string{"bob"}, "7", "", false},
		{[]string{" 42 "}, "42", "", true},
		{[]string{""}, "", "", true}, // only blanks: the list is empty
		// Issue 25, finding 7: a username spelled like an allowed id is
		// not that user, and an id is not a name.
		{[]string{"42"}, "7", "42", false},
		{[]string{"@42"}, "42", "", false},
		{[]string{"@42"}, "7", "42", true},
	}
	for _, tt := range tests {
		if got := NewAccess(tt.list, Digits).Allows(tt.id, tt.name); got != tt.want {
			t.Errorf("NewAccess(%q).Allows(%q, %q) = %v, want %v", tt.list, tt.id, tt.name, got, tt.want)
		}
	}
	chats := NewAccess([]string{"-100", "@team"}, Digits)
	if !chats.AllowsAny("5", "-100") || chats.AllowsAny("team") || chats.AllowsAny() {
		t.Error("AllowsAny checks ids only")
	}
	if n := chats.Names(); len(n) != 1 || n[0] != "@team" {
		t.Errorf("Names = %v", n)
	}
	// Without an id shape every entry without "@" is an id (Slack).
	if NewAccess([]string{"UALICE"}, nil).Allows("U1", "UALICE") {
		t.Error("a Slack name matched an id entry")
	}
}

func TestTrigger(t *testing.T) {
	tests := []struct {
		trigger string
		a       Addressing
		want    bool
	}{
		{config.TriggerMention, Addressing{}, false},
		{"", Addressing{}, false},
		{config.TriggerMention, Addressing{Private: true}, true},
		{config.TriggerMention, Addressing{Mentioned: true}, true},
		{config.TriggerMention, Addressing{ReplyToBot: true}, true},
		{config.TriggerMention, Addressing{Command: true}, true},
		{config.TriggerAll, Addressing{}, true},
	}
	for _, tt := range tests {
		if got := Trigger(tt.trigger).Admits(tt.a); got != tt.want {
			t.Errorf("Trigger(%q).Admits(%+v) = %v, want %v", tt.trigger, tt.a, got, tt.want)
		}
	}
}

func TestNormEmoji(t *testing.T) {
	for in, want := range map[string]string{
		"❤️":              "❤",
		"❤":               "❤",
		"👍🏽":              "👍",
		" 👎 ":             "👎",
		":+1:":            "+1",
		"+1::skin-tone-3": "+1",
		"Thumbsdown":      "thumbsdown",
		"👨‍👩‍👧":           "👨‍👩‍👧", // a ZWJ sequence stays whole
	} {
		if got := NormEmoji(in); got != want {
			t.Errorf("NormEmoji(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReactionsPolarityAndEvents(t *testing.T) {
	r := NewReactions(config.Reactions{Positive: []string{"👍", "❤️", "+1"}, Negative: []string{"👎"}})
	for e, want := range map[string]core.Polarity{"👍🏿": core.Positive, "❤": core.Positive, "+1::skin-tone-2": core.Positive, "👎": core.Negative} {
		if p, ok := r.Polarity(e); !ok || p != want {
			t.Errorf("Polarity(%q) = %v, %v; want %v", e, p, ok, want)
		}
	}
	if _, ok := r.Polarity("🤔"); ok {
		t.Error("🤔 is not a signal")
	}
	added, removed := r.Diff([]string{"👍", "🤔", "❤️"}, []string{"❤", "👎", "🎉", "👎"})
	if !reflect.DeepEqual(added, []string{"👎"}) || !reflect.DeepEqual(removed, []string{"👍"}) {
		t.Fatalf("Diff = +%q -%q, want +[👎] -[👍]", added, removed)
	}
	base := core.Reaction{Conversation: core.ConversationKey{Channel: "x", Chat: "c"}, EventID: "m1:u1:100", MessageID: "m1", UserID: "u1"}
	evs := r.Events(base, []string{"👍"}, []string{"👎"})
	if len(evs) != 2 {
		t.Fatalf("events = %+v", evs)
	}
	if evs[0].Added || evs[0].Polarity != core.Positive || evs[0].EventID != "m1:u1:100:-👍" {
		t.Errorf("first event (removal) = %+v", evs[0])
	}
	if !evs[1].Added || evs[1].Polarity != core.Negative || evs[1].EventID != "m1:u1:100:+👎" || evs[1].MessageID != "m1" {
		t.Errorf("second event (addition) = %+v", evs[1])
	}
}

func newClock() *clock.Fake { return clock.NewFake(time.Unix(1_700_000_000, 0)) }

func TestWorkingTypingAckUnack(t *testing.T) {
	var mu sync.Mutex
	var events []string
	rec := func(s string) func(context.Context) {
		return func(context.Context) { mu.Lock(); events = append(events, s); mu.Unlock() }
	}
	stop := Working(context.Background(), WorkingOptions{Typing: rec("typing"), Every: 5 * time.Millisecond, Ack: rec("ack"), Unack: rec("unack")})
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := strings.Count(strings.Join(events, ","), "typing")
		mu.Unlock()
		if n >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	stop() // a second stop is harmless
	mu.Lock()
	defer mu.Unlock()
	if len(events) < 5 || events[0] != "ack" || events[1] != "typing" || events[len(events)-1] != "unack" {
		t.Errorf("events = %v, want ack, typing at least three times, unack last", events)
	}
}

// TestWorkingStopWaitsForTheCallUnderWay: stop returns only once the
// typing call under way has returned, takes the ack back after it, and
// no typing follows; a context that ended first leaves the ack (and
// stops the repeats).
func TestWorkingStopWaitsForTheCallUnderWay(t *testing.T) {
	var mu sync.Mutex
	var events []string
	add := func(s string) { mu.Lock(); events = append(events, s); mu.Unlock() }
	inCall, release := make(chan struct{}), make(chan struct{})
	var first sync.Once
	typing := func(context.Context) {
		add("typing")
		first.Do(func() { close(inCall); <-release })
	}
	stop := Working(context.Background(), WorkingOptions{Typing: typing, Every: time.Millisecond, Unack: func(context.Context) { add("unack") }})
	<-inCall
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("stop returned while a typing call was under way")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-stopped
	time.Sleep(10 * time.Millisecond) // a repeat after stop would show now
	mu.Lock()
	got := strings.Join(events, ",")
	mu.Unlock()
	if got != "typing,unack" {
		t.Errorf("events = %s, want typing,unack", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int32
	stop = Working(ctx, WorkingOptions{Typing: func(context.Context) { n.Add(1) }, Every: time.Millisecond, Unack: func(context.Context) { t.Error("unack after the work's context ended") }})
	for n.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	time.Sleep(50 * time.Millisecond) // a repeat under way ends
	was := n.Load()
	time.Sleep(10 * time.Millisecond)
	if now := n.Load(); now != was {
		t.Errorf("typing went on after the context ended: %d calls, then %d", was, now)
	}
	stop()
}

func TestHealth(t *testing.T) {
	c := newClock()
	h := NewHealth("tg", time.Minute, c.Now)
	if err := h.Healthy(); err == nil || !strings.Contains(err.Error(), "not started") {
		t.Errorf("before start: %v", err)
	}
	h.Starting()
	if err := h.Healthy(); err != nil {
		t.Errorf("just started: %v", err)
	}
	c.Advance(2 * time.Minute)
	if err := h.Healthy(); err == nil || !strings.Contains(err.Error(), "not connected yet") {
		t.Errorf("never connected for 2m: %v", err)
	}
	h.Connected()
	h.Event()
	if err := h.Healthy(); err != nil || !h.LastEvent().Equal(c.Now()) {
		t.Errorf("connected: %v, last event %v", err, h.LastEvent())
	}
	h.Failed(errors.New("409 conflict"))
	c.Advance(30 * time.Second)
	if err := h.Healthy(); err != nil {
		t.Errorf("within the grace period: %v", err)
	}
	c.Advance(31 * time.Second)
	if err := h.Healthy(); err == nil || !strings.Contains(err.Error(), "409 conflict") {
		t.Errorf("past the grace period: %v", err)
	}
	h.Connected()
	h.Down(errors.New("invalid_auth"))
	if err := h.Healthy(); err == nil || !strings.Contains(err.Error(), "invalid_auth") {
		t.Errorf("down: %v", err)
	}
}

func TestScrubber(t *testing.T) {
	s := NewScrubber("123:SECRET", "")
	err := fmt.Errorf("post https://api/bot123:SECRET/getMe: %w", fs.ErrNotExist)
	got := s.Error(err)
	if strings.Contains(got.Error(), "SECRET") || !strings.Contains(got.Error(), "<token>") || !errors.Is(got, fs.ErrNotExist) {
		t.Errorf("scrubbed = %v (Is ErrNotExist: %v)", got, errors.Is(got, fs.ErrNotExist))
	}
	plain := errors.New("nothing to hide")
	if s.Error(plain) != plain || s.Error(nil) != nil {
		t.Error("an error without a secret must be returned as is")
	}
}

func TestNewServerLimits(t *testing.T) {
	srv := NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
			return
		}
		w.Write([]byte("ok"))
	}), ServerLimits{Idle: 100 * time.Millisecond, ReadHeader: 100 * time.Millisecond, Body: 10})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String()
	resp, err := http.Post(url, "text/plain", strings.NewReader("this body is longer than ten bytes"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized body: %d, want 413", resp.StatusCode)
	}
	// A connection that sends nothing is closed by the server.
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Error("an idle connection got data instead of being closed")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Error("the server kept an idle connection open for 10s")
	}
}

func TestEndpoint(t *testing.T) {
	var e Endpoint
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var startedAt net.Addr
	go func() {
		done <- e.Serve(ctx, "channels.x.listen", "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("hi"))
		}), ServerLimits{}, func(addr net.Addr) error { startedAt = addr; return nil })
	}()
	addr, err := e.Addr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil || startedAt == nil || startedAt.String() != addr.String() {
		t.Fatalf("Serve = %v, started with %v, want nil after the context ended and started with %v", err, startedAt, addr)
	}
	// A busy address names the key; an error of started ends Serve.
	var busy Endpoint
	ln, lerr := net.Listen("tcp", "127.0.0.1:0")
	if lerr != nil {
		t.Fatal(lerr)
	}
	defer ln.Close()
	err = busy.Serve(context.Background(), "channels.x.listen", ln.Addr().String(), http.NotFoundHandler(), ServerLimits{}, nil)
	if core.ErrorKind(err) != core.KindInvalid || !strings.Contains(err.Error(), "channels.x.listen") {
		t.Fatalf("busy address: %v", err)
	}
	var refused Endpoint
	err = refused.Serve(context.Background(), "channels.x.listen", "127.0.0.1:0", http.NotFoundHandler(), ServerLimits{}, func(net.Addr) error {
		return errors.New("the platform refused the webhook")
	})
	if err == nil || !strings.Contains(err.Error(), "refused the webhook") {
		t.Fatalf("started error: %v", err)
	}
}

// TestIndicatorsQuietBeforeASend: a message sent in a place first quiets
// the indicators shown there: a typing not yet sent is held back (the
// ack before it still goes, and is taken back at stop), one under way is
// waited for; an indicator in another place types on.
func TestIndicatorsQuietBeforeASend(t *testing.T) {
	var is Indicators
	ctx := context.Background()
	var mu sync.Mutex
	var calls []string
	add := func(s string) { mu.Lock(); calls = append(calls, s); mu.Unlock() }
	ackHeld := make(chan struct{})
	acking := make(chan struct{})
	stop := is.Working(ctx, "chat-1", WorkingOptions{
		Ack:    func(context.Context) { close(acking); <-ackHeld; add("ack") },
		Typing: func(context.Context) { add("typing") },
		Unack:  func(context.Context) { add("unack") },
	})
	typedElsewhere := make(chan struct{}, 1)
	other := is.Working(ctx, "chat-2", WorkingOptions{Typing: func(context.Context) { typedElsewhere <- struct{}{} }})
	<-acking
	sent := is.Quiet(ctx, "chat-1")
	add("send")
	sent()
	close(ackHeld)
	<-typedElsewhere // another place's first typing is not held back
	stop()
	other()
	mu.Lock()
	got := fmt.Sprint(calls)
	mu.Unlock()
	if got != "[send ack unack]" {
		t.Errorf("calls = %s; want the send, the ack, its removal, and no typing after the send", got)
	}

	// A typing call under way is waited for.
	typing := make(chan struct{})
	typed := make(chan struct{})
	stop = is.Working(ctx, "chat-1", WorkingOptions{Typing: func(context.Context) { close(typing); <-typed }})
	<-typing
	quieted := make(chan struct{})
	go func() { is.Quiet(ctx, "chat-1"); close(quieted) }()
	select {
	case <-quieted:
		t.Fatal("Quiet returned while a typing call was under way")
	case <-time.After(50 * time.Millisecond):
	}
	close(typed)
	<-quieted
	stop()
	if is.at != nil && len(is.at) != 0 {
		t.Errorf("stopped indicators are still kept: %v", is.at)
	}
}

// TestIndicatorsQuietHoldsTypingUntilSent: a send can wait far longer
// than the indicator's period (its turn in a group's pace, a flood
// control retry, a large file's upload); the indicator of its place
// stays quiet until the send is over, or a typing call would race the
// message and show "typing…" under the answer. After it, the work's
// indicator types again. Another place's typing stands for the time
// that passes (many of the quiet period's length).
func TestIndicatorsQuietHoldsTypingUntilSent(t *testing.T) {
	var is Indicators
	ctx := context.Background()
	typed := make(chan struct{}, 1000)
	stop := is.Working(ctx, "chat-1", WorkingOptions{Every: time.Millisecond, Typing: func(context.Context) { typed <- struct{}{} }})
	defer stop()
	<-typed
	sent := is.Quiet(ctx, "chat-1")
	for len(typed) > 0 { // a repeat that went before the send
		<-typed
	}
	elsewhere := make(chan struct{}, 1000)
	other := is.Working(ctx, "chat-2", WorkingOptions{Every: time.Millisecond, Typing: func(context.Context) { elsewhere <- struct{}{} }})
	for range 30 {
		<-elsewhere
	}
	other()
	if n := len(typed); n != 0 {
		t.Errorf("%d typing calls while the message was being sent; want none until it is sent", n)
	}
	sent()
	<-typed // the work goes on: typing shows again after the message
}
