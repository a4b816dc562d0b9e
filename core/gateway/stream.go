package gateway

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
)

// stream shows one answer while the agent writes it: after the channel's
// first delay it sends the text so far as a message (or a native draft),
// then updates it at most once per interval, always with the latest
// text, continuing in a further message when the text outgrows one. The
// agent's calls (Delta, Status) only record the text; one goroutine,
// started by the first of them, talks to the platform.
//
// Every message the stream opens is recorded with the reply (a draft
// reply row, created with the first message) as it is created, so a
// restart finishes the answer by editing the same messages.
type stream struct {
	g   *Gateway
	ch  core.Channel
	st  core.Streamer
	nat core.NativeStreamer // nil while editing
	pol core.StreamPolicy
	to  core.Outbound
	log *slog.Logger
	// reply is the draft reply: its id is 0 until the first message.
	reply *core.Reply

	mu     sync.Mutex
	prefix string // shown ahead of the text (a transcript's echo)
	// text is the text of the current LLM call: a builder, as a long
	// answer comes in hundreds of deltas (a string += each would copy
	// the whole text so far every time).
	text    strings.Builder
	status  string // a tool status line, until the next delta
	version int    // bumped on every change
	started bool
	// first starts the worker once the first delay is over (nil: started
	// at once); an answer complete before it never has a worker.
	first   clock.Timer
	closing bool
	ctx     context.Context
	wake    chan struct{}
	quit    chan struct{} // closed by finish
	done    chan struct{}

	// The worker's own state; read by finish after the worker stopped.
	slots []slot
	shown int       // the version shown last
	last  time.Time // when a message was last updated
	dead  bool
}

// slot is one message of the streamed answer.
type slot struct {
	id   string
	raw  string // the Markdown it shows
	part string // its display form
	// ended: a filled message whose text is complete (a native draft
	// turned into an ordinary message).
	ended bool
	// open: a native stream the platform still holds open (Slack).
	open bool
	// edited: the message is edited, never streamed to natively: one an
	// earlier attempt opened (what it shows is not known, so nothing is
	// appended to it), or a native stream ended because its text went
	// back (a status line replaced by the answer).
	edited bool
	// reused: an earlier attempt opened the message. What it shows is not
	// known, so the stream leaves it as it is (a draft only grows: an
	// edit from this attempt's shorter text would take words back); the
	// final delivery sets its text.
	reused bool
}

// newStream prepares the stream of an answer to the item whose reply is
// r (a draft reply left by an earlier attempt, or a new one). It returns
// nil when ch does not stream this conversation.
func (g *Gateway) newStream(ctx context.Context, ch core.Channel, to core.Outbound, r *core.Reply, log *slog.Logger) *stream {
	st, ok := ch.(core.Streamer)
	if !ok {
		return nil
	}
	pol := st.Streaming(to)
	if pol.Mode != core.StreamEdit && pol.Mode != core.StreamNative {
		return nil
	}
	s := &stream{g: g, ch: ch, st: st, pol: pol, to: to, reply: r, ctx: ctx, log: log,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	if pol.Mode == core.StreamNative {
		s.nat, _ = ch.(core.NativeStreamer)
	}
	// The messages an earlier attempt opened are reused in order.
	s.slots = slotsOf(r)
	return s
}

// Delta implements core.Stream.
func (s *stream) Delta(text string) {
	if text == "" {
		return
	}
	s.mu.Lock()
	s.text.WriteString(text)
	s.status = ""
	s.changed()
	s.mu.Unlock()
}

// Status implements core.Stream.
func (s *stream) Status(line string) {
	s.mu.Lock()
	s.text.Reset()
	s.status = line
	s.changed()
	s.mu.Unlock()
}

// setPrefix sets the text shown ahead of the answer.
func (s *stream) setPrefix(p string) {
	s.mu.Lock()
	s.prefix = p
	s.mu.Unlock()
}

// changed wakes the worker, starting it on the first change; the caller
// holds mu.
func (s *stream) changed() {
	s.version++
	if s.closing {
		return
	}
	if !s.started {
		s.started = true
		if d := s.pol.FirstDelay; d > 0 {
			// Most answers of a quick model are complete before the
			// delay is over: they need no goroutine, and their finish
			// waits for none.
			s.first = s.g.clock.AfterFunc(d, func() { go s.run() })
		} else {
			go s.run()
		}
		return
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// current is the text to show and its version; the caller holds mu.
func (s *stream) current() (string, int) {
	body := s.text.String()
	if strings.TrimSpace(body) == "" && s.status != "" {
		body = "_" + s.status + "_"
	}
	if s.prefix != "" && body != "" {
		body = s.prefix + "\n\n" + body
	}
	return body, s.version
}

// run is the worker, started once the first delay is over: one update
// per interval with the latest text, until finish.
func (s *stream) run() {
	defer close(s.done)
	if !s.sleep(0) {
		return
	}
	for {
		s.mu.Lock()
		text, v := s.current()
		closing := s.closing
		s.mu.Unlock()
		if closing {
			return
		}
		if v != s.shown && strings.TrimSpace(text) != "" {
			s.shown = v
			err := s.show(text)
			s.last = s.g.clock.Now()
			if err != nil {
				if s.ctx.Err() == nil {
					s.log.Warn("streaming the answer failed; it is sent once complete", "err", err)
				}
				s.dead = true
				return
			}
			// The interval runs from the end of the update: counted
			// from its start, a slow call followed by a quick one would
			// reach the platform closer together than its limit.
			if !s.sleep(s.pol.Interval) {
				return
			}
			continue
		}
		select {
		case <-s.wake:
		case <-s.quit:
			return
		case <-s.ctx.Done():
			return
		}
	}
}

// sleep waits d (or not at all when d <= 0); false when the stream is
// closing or ctx ended meanwhile.
func (s *stream) sleep(d time.Duration) bool {
	if d > 0 {
		t := s.g.clock.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C():
		case <-s.quit:
			return false
		case <-s.ctx.Done():
			return false
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.closing && s.ctx.Err() == nil
}

// show brings the messages up to text: filled messages are completed,
// the last one updated.
func (s *stream) show(text string) error {
	parts := s.st.Draft(text)
	for i, p := range parts {
		for len(s.slots) <= i {
			s.slots = append(s.slots, slot{})
		}
		sl := &s.slots[i]
		last := i == len(parts)-1
		if sl.reused || (sl.raw == p.Raw && sl.part == p.Part && sl.id != "") {
			continue
		}
		if sl.id != "" && sl.part == p.Part && (s.nat == nil || sl.edited) {
			// An edited message already shows this display form (a
			// paragraph break not followed by words yet): an edit would
			// change nothing and spend the platform's edit budget.
			sl.raw = p.Raw
			continue
		}
		if sl.ended {
			if sl.raw == p.Raw {
				continue // a filled message keeps its text as the draft grows
			}
			// The text went back (a status line replaced text that
			// filled this message): the message is edited to show what
			// is written now, never left showing the text that went.
			sl.edited = true
		}
		if err := s.update(i, sl, p, last); err != nil {
			return err
		}
	}
	// Messages (or native drafts) past the text's last part held text
	// that went back (a status line replaced text that filled several
	// messages): each is edited to a placeholder rather than left
	// showing what went; it is written on again when the answer grows
	// into it, or deleted by the final delivery.
	for i := len(parts); i < len(s.slots); i++ {
		sl := &s.slots[i]
		if sl.raw == "" || sl.reused || sl.raw == continued {
			continue
		}
		ps := s.st.Draft(continued)
		if len(ps) == 0 {
			break
		}
		p := ps[0]
		if sl.ended {
			sl.edited = true
		}
		if err := s.update(i, sl, p, true); err != nil {
			return err
		}
	}
	return nil
}

// continued is what a streamed message shows while the text that
// filled it is gone (see show).
const continued = "…"

// update shows p in message i; a message that is not the last is
// completed.
func (s *stream) update(i int, sl *slot, p core.DraftPart, last bool) error {
	ctx := s.ctx
	awaitDurable(ctx)
	if err := s.g.mayStillSend(ctx); err != nil {
		return err // past the lease: another claimer may be answering
	}
	to := s.to
	to.Part = i
	var id string
	var err error
	if s.nat != nil && !sl.edited {
		d := core.NativeDraft{Seq: i, Key: s.reply.RequestID, ID: sl.id, Shown: sl.raw, Raw: p.Raw, Part: p.Part}
		switch {
		case sl.open && !strings.HasPrefix(p.Raw, sl.raw):
			// A native stream only grows: it is ended showing the new
			// text, and the message edited from now on.
			id, err = s.nat.EndDraft(ctx, to, d, p.Part)
			sl.open, sl.edited, sl.ended = false, true, !last
		case last:
			id, err = s.nat.ShowDraft(ctx, to, d)
			sl.open = id != ""
		default:
			id, err = s.nat.EndDraft(ctx, to, d, p.Part)
			sl.ended, sl.open = true, false
		}
		if errors.Is(err, core.ErrNoNativeStream) {
			s.log.Info("the platform refused native streaming here; editing a message instead", "conv", to.Conversation.String())
			s.nat = nil
			sl.ended, sl.open = false, false
			return s.update(i, sl, p, last)
		}
	} else {
		if sl.id == "" {
			id, err = s.ch.Send(ctx, to, p.Part)
		} else {
			id, err = sl.id, s.st.Edit(ctx, to, sl.id, p.Part)
		}
		sl.ended = !last
	}
	if err != nil {
		return err
	}
	sl.raw, sl.part = p.Raw, p.Part
	if id != "" && id != sl.id {
		sl.id = id
		if err := s.record(i, id); err != nil {
			return err
		}
	}
	return nil
}

// record stores message i's id with the draft reply, creating the reply
// row with the first message.
func (s *stream) record(i int, id string) error {
	ctx := context.WithoutCancel(s.ctx)
	if s.reply.ID == 0 {
		rid, err := s.g.store.BeginReply(ctx, s.reply)
		if err != nil {
			return err
		}
		s.reply.ID = rid
	}
	return s.g.store.MarkDraft(ctx, s.reply.ID, i, id)
}

// finish stops the stream and waits for the update in flight. It returns
// what the messages show, for the final delivery; nil when nothing was
// shown.
func (s *stream) finish() *shownParts {
	shown, open := s.finishSlots()
	if shown == nil {
		return nil
	}
	sp := &shownParts{shown: shown, open: open}
	if !s.last.IsZero() {
		sp.notBefore = s.last.Add(s.pol.Interval)
	}
	return sp
}

// finishSlots is finish's part: what each message shows (by part index)
// and the native streams the platform still holds open.
func (s *stream) finishSlots() (shown map[int]string, open map[int]core.NativeDraft) {
	s.mu.Lock()
	first := !s.closing
	s.closing = true
	started, timer := s.started, s.first
	s.mu.Unlock()
	if first && s.quit != nil {
		close(s.quit)
	}
	switch {
	case !started:
	case timer != nil && timer.Stop():
		// Finished within the first delay: the worker never starts.
		close(s.done)
	default:
		<-s.done
	}
	for i, sl := range s.slots {
		if sl.id == "" {
			continue
		}
		if shown == nil {
			shown = map[int]string{}
		}
		shown[i] = sl.part
		if sl.open && s.nat != nil {
			if open == nil {
				open = map[int]core.NativeDraft{}
			}
			open[i] = core.NativeDraft{Seq: i, Key: s.reply.RequestID, ID: sl.id, Shown: sl.raw, Raw: sl.raw, Part: sl.part}
		}
	}
	return shown, open
}

// stop is finish on a stream that may be nil (an answer not streamed).
func (s *stream) stop() *shownParts {
	if s == nil {
		return nil
	}
	return s.finish()
}

// slotsOf lists the messages a draft reply's stream opened.
func slotsOf(r *core.Reply) []slot {
	var out []slot
	for i, id := range r.Sent {
		if id != "" && i < len(r.Draft) && r.Draft[i] {
			for len(out) < i {
				out = append(out, slot{})
			}
			out = append(out, slot{id: id, edited: true, reused: true})
		}
	}
	return out
}

// opened reports whether the stream opened a message (this attempt or an
// earlier one).
func (s *stream) opened() bool {
	if s == nil {
		return false
	}
	for _, sl := range s.slots {
		if sl.id != "" {
			return true
		}
	}
	return false
}
