package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/store"
)

// parting is an editing channel whose messages hold ten characters: a
// longer draft fills several.
type parting struct {
	editing
	sent int
}

func (c *parting) Draft(text string) []core.DraftPart {
	var out []core.DraftPart
	for len(text) > 10 {
		out = append(out, core.DraftPart{Raw: text[:10], Part: text[:10]})
		text = text[10:]
	}
	return append(out, core.DraftPart{Raw: text, Part: text})
}

func (c *parting) Send(_ context.Context, _ core.Outbound, part string) (string, error) {
	c.mu.Lock()
	c.sent++
	id := fmt.Sprintf("m%d", c.sent)
	c.mu.Unlock()
	c.record(fmt.Sprintf("send %s %q", id, part))
	return id, nil
}

func (c *parting) Edit(_ context.Context, _ core.Outbound, id, part string) error {
	c.record(fmt.Sprintf("edit %s %q", id, part))
	return nil
}

// stepper is an agent that writes a delta, or a status line ("!line"),
// one step at a time as the test hands them over; an empty step ends
// the answer with the text written after the last status line.
type stepper struct{ steps chan string }

func (a stepper) Answer(ctx context.Context, t core.Turn) (core.Answer, error) {
	var text strings.Builder
	for {
		select {
		case s := <-a.steps:
			switch {
			case s == "":
				return core.Answer{Text: text.String(), Model: "fake/m"}, nil
			case strings.HasPrefix(s, "!"):
				text.Reset()
				t.Stream.Status(s[1:])
			default:
				text.WriteString(s)
				t.Stream.Delta(s)
			}
		case <-ctx.Done():
			return core.Answer{}, ctx.Err()
		}
	}
}

// TestStreamStatusAfterALongTextRewritesFilledMessages: text that filled
// a message before a tool call is replaced on screen by the status line
// and then by the answer; the filled message is not left showing the
// text that went away while the answer is written.
func TestStreamStatusAfterALongTextRewritesFilledMessages(t *testing.T) {
	clk := clock.NewFake(t0)
	ch := &parting{editing: editing{clk: clk, pol: core.StreamPolicy{Mode: core.StreamEdit}, seen: make(chan string, 10)}}
	_, give, shown := stepRun(t, clk, ch, ch.seen)

	give("Let me check that.")
	shown(`send m1 "Let me che"`)
	shown(`send m2 "ck that."`)
	give("!calc")
	shown(`edit m1 "_calc_"`)
	shown(`edit m2 "…"`)
	give("It is 42.")
	shown(`edit m1 "It is 42."`)
	give(" And 43.")
	shown(`edit m1 "It is 42. "`)
	shown(`edit m2 "And 43."`)
	give("")
}

// trimming is a parting channel whose display form drops trailing blank
// lines (as the formatters do), and which tells drafted when the stream
// drafted the text.
type trimming struct {
	parting
	drafted chan string
}

func (c *trimming) Draft(text string) []core.DraftPart {
	parts := c.parting.Draft(text)
	for i := range parts {
		parts[i].Part = strings.TrimRight(parts[i].Part, "\n")
	}
	c.drafted <- text
	return parts
}

// TestStreamSkipsAnEditThatChangesNothing: text whose display form is
// what the message shows already (a paragraph break not yet followed by
// words) is no edit: it would spend the platform's edit budget, and
// Telegram refuses it ("message is not modified").
func TestStreamSkipsAnEditThatChangesNothing(t *testing.T) {
	clk := clock.NewFake(t0)
	ch := &trimming{parting: parting{editing: editing{clk: clk, pol: core.StreamPolicy{Mode: core.StreamEdit}, seen: make(chan string, 10)}},
		drafted: make(chan string, 10)}
	wctx, give, shown := stepRun(t, clk, ch, ch.seen)
	drafted := func(want string) {
		t.Helper()
		for {
			select {
			case got := <-ch.drafted:
				if got == want {
					return
				}
			case <-wctx.Done():
				t.Fatalf("%q never drafted", want)
			}
		}
	}

	give("Hi.")
	shown(`send m1 "Hi."`)
	give("\n\n")
	drafted("Hi.\n\n")
	give("Ok")
	shown(`edit m1 "Hi.\n\nOk"`)
	give("")
}

// draftParting is a parting channel that streams natively as Telegram
// does: the last part is a draft (no message, ShowDraft returns ""), a
// filled part is ended as a message.
type draftParting struct{ parting }

func (c *draftParting) ShowDraft(_ context.Context, _ core.Outbound, d core.NativeDraft) (string, error) {
	c.record(fmt.Sprintf("draft %q", d.Part))
	return "", nil
}

func (c *draftParting) EndDraft(ctx context.Context, to core.Outbound, d core.NativeDraft, part string) (string, error) {
	if d.ID != "" {
		return d.ID, c.Edit(ctx, to, d.ID, part)
	}
	return c.Send(ctx, to, part)
}

// TestStreamStatusAfterALongTextRewritesFilledNativeMessages: natively
// streamed, a message filled (ended) before a tool call is edited to the
// status line and then to the answer, as when editing.
func TestStreamStatusAfterALongTextRewritesFilledNativeMessages(t *testing.T) {
	clk := clock.NewFake(t0)
	ch := &draftParting{parting{editing: editing{clk: clk, pol: core.StreamPolicy{Mode: core.StreamNative}, seen: make(chan string, 10)}}}
	_, give, shown := stepRun(t, clk, ch, ch.seen)

	give("Let me check that.")
	shown(`send m1 "Let me che"`)
	shown(`draft "ck that."`)
	give("!calc")
	shown(`edit m1 "_calc_"`)
	shown(`draft "…"`)
	give("It is 42.")
	shown(`edit m1 "It is 42."`)
	give("")
}

// stepRun serves ch with a stepper agent on clk and accepts one message;
// give hands the agent its next step and shown says what ch must show
// next (seen is where ch records it). Both fail the test once wctx, 10 s,
// ends.
func stepRun(t *testing.T, clk *clock.Fake, ch core.Channel, seen <-chan string) (wctx context.Context, give, shown func(string)) {
	t.Helper()
	_, wctx, give, shown = stepRunOn(t, clk, ch, seen)
	return wctx, give, shown
}

// stepRunOn is stepRun that also gives the gateway (to accept more
// messages).
func stepRunOn(t *testing.T, clk *clock.Fake, ch core.Channel, seen <-chan string) (g *gateway.Gateway, wctx context.Context, give, shown func(string)) {
	t.Helper()
	ag := stepper{steps: make(chan string)}
	db := openDB(t, store.Options{Now: clk.Now})
	g = gateway.New(gateway.Options{Store: db, Agent: ag, Clock: clk})
	g.AddChannel(ch)
	serve(t, g)
	in := core.Inbound{Conversation: core.ConversationKey{Channel: "fake", Chat: "c"}, MessageID: "1", UserID: "u", Text: "tell me"}
	for g.Accept(context.Background(), in) != nil {
		time.Sleep(time.Millisecond)
	}
	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	give = func(s string) {
		t.Helper()
		select {
		case ag.steps <- s:
		case <-wctx.Done():
			t.Fatalf("the agent did not take %q", s)
		}
	}
	shown = func(want string) {
		t.Helper()
		select {
		case got := <-seen:
			if got != want {
				t.Fatalf("%s; want %s", got, want)
			}
		case <-wctx.Done():
			t.Fatalf("nothing shown; want %s", want)
		}
	}
	return g, wctx, give, shown
}

// deletingParting is a parting channel that deletes messages.
type deletingParting struct{ parting }

func (c *deletingParting) Delete(_ context.Context, _ core.Outbound, id string) error {
	c.record("delete " + id)
	return nil
}

// deletingDraftParting is a draftParting channel that deletes messages.
type deletingDraftParting struct{ draftParting }

func (c *deletingDraftParting) Delete(_ context.Context, _ core.Outbound, id string) error {
	c.record("delete " + id)
	return nil
}

// TestStopLeavesNoPlaceholder: an answer stopped while a message (or a
// native draft) shows only the placeholder of text that went back is
// not left with it: the message is deleted, and the draft is not ended
// as a message of its own (it vanishes).
func TestStopLeavesNoPlaceholder(t *testing.T) {
	stopped := `send m2 "Stopped. Send a message when you want me to go on."`
	for _, tc := range []struct {
		name  string
		ch    func(pol core.StreamPolicy, seen chan string) core.Channel
		mode  core.StreamMode
		steps []string // what is shown from the first text to the stop
		after []string // what is shown once /stop is taken
	}{
		{
			name: "edited",
			ch: func(pol core.StreamPolicy, seen chan string) core.Channel {
				return &deletingParting{parting{editing: editing{pol: pol, seen: seen}}}
			},
			mode:  core.StreamEdit,
			steps: []string{`send m1 "Let me che"`, `send m2 "ck that."`, `edit m1 "_calc_"`, `edit m2 "…"`},
			after: []string{`delete m2`, `send m3 "Stopped. Send a message when you want me to go on."`},
		},
		{
			name: "native draft",
			ch: func(pol core.StreamPolicy, seen chan string) core.Channel {
				return &deletingDraftParting{draftParting{parting{editing: editing{pol: pol, seen: seen}}}}
			},
			mode:  core.StreamNative,
			steps: []string{`send m1 "Let me che"`, `draft "ck that."`, `edit m1 "_calc_"`, `draft "…"`},
			after: []string{stopped},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			seen := make(chan string, 10)
			ch := tc.ch(core.StreamPolicy{Mode: tc.mode}, seen)
			g, _, give, shown := stepRunOn(t, clk, ch, seen)
			give("Let me check that.")
			shown(tc.steps[0])
			shown(tc.steps[1])
			give("!calc")
			shown(tc.steps[2])
			shown(tc.steps[3])
			stop := core.Inbound{Conversation: core.ConversationKey{Channel: "fake", Chat: "c"}, MessageID: "2", UserID: "u", Text: "/stop"}
			for g.Accept(context.Background(), stop) != nil {
				time.Sleep(time.Millisecond)
			}
			for _, want := range tc.after {
				shown(want)
			}
		})
	}
}

// streamParting is a deletingParting channel that streams natively as
// Slack does: the last part is a message the platform holds open
// (ShowDraft opens or appends to it), ended by EndDraft.
type streamParting struct{ deletingParting }

func (c *streamParting) ShowDraft(ctx context.Context, to core.Outbound, d core.NativeDraft) (string, error) {
	if d.ID == "" {
		c.mu.Lock()
		c.sent++
		id := fmt.Sprintf("m%d", c.sent)
		c.mu.Unlock()
		c.record(fmt.Sprintf("stream %s %q", id, d.Part))
		return id, nil
	}
	c.record(fmt.Sprintf("append %s %q", d.ID, d.Part))
	return d.ID, nil
}

func (c *streamParting) EndDraft(ctx context.Context, to core.Outbound, d core.NativeDraft, part string) (string, error) {
	if d.ID == "" {
		return c.Send(ctx, to, part)
	}
	c.record(fmt.Sprintf("end %s %q", d.ID, part))
	return d.ID, nil
}

// TestStreamPlaceholderIsDeletedByTheFinalAnswer: a message showing the
// placeholder of text that went back, which the final answer does not
// need, is deleted by the final delivery (no "…" is left), whether it
// was edited or a native stream ended showing it.
func TestStreamPlaceholderIsDeletedByTheFinalAnswer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ch    func(pol core.StreamPolicy, seen chan string) core.Channel
		mode  core.StreamMode
		shown []string // from the first text to the placeholder
	}{
		{
			name: "edited",
			ch: func(pol core.StreamPolicy, seen chan string) core.Channel {
				return &deletingParting{parting{editing: editing{pol: pol, seen: seen}}}
			},
			mode:  core.StreamEdit,
			shown: []string{`send m1 "Let me che"`, `send m2 "ck that."`, `edit m1 "_calc_"`, `edit m2 "…"`},
		},
		{
			name: "native stream",
			ch: func(pol core.StreamPolicy, seen chan string) core.Channel {
				return &streamParting{deletingParting{parting{editing: editing{pol: pol, seen: seen}}}}
			},
			mode:  core.StreamNative,
			shown: []string{`send m1 "Let me che"`, `stream m2 "ck that."`, `edit m1 "_calc_"`, `end m2 "…"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			seen := make(chan string, 10)
			ch := tc.ch(core.StreamPolicy{Mode: tc.mode}, seen)
			_, give, shown := stepRun(t, clk, ch, seen)
			give("Let me check that.")
			shown(tc.shown[0])
			shown(tc.shown[1])
			give("!calc")
			shown(tc.shown[2])
			shown(tc.shown[3])
			give("It is 42.")
			shown(`edit m1 "It is 42."`)
			give("")
			shown(`delete m2`)
		})
	}
}
