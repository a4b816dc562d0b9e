package core

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Interceptor looks at each message before the commands and the agent
// (quality-signal follow-ups, escalation). It decides what to answer and
// never calls the agent itself: the gateway turns its decision into work.
type Interceptor interface {
	Intercept(ctx context.Context, req CommandRequest) (Decision, error)
}

// ReactionInterceptor is an optional Interceptor capability: it may ask
// for an answer to a judged reaction (routing re-answers a 👎 on the
// latest answer with the next model when routing.escalate_on_reaction is
// on). The gateway has already recorded the reaction's signal.
type ReactionInterceptor interface {
	InterceptReaction(ctx context.Context, r Reaction, judged *Reply, s Session) (Decision, error)
}

// Decision is an interceptor's verdict on a message. The zero Decision
// lets the message go on to the commands and the agent.
type Decision struct {
	// Reply answers the message with this text as it is, like a command.
	Reply string
	// Turn answers the message by answering this turn instead, through the
	// same pipeline as every answer (pre-hooks, agent, post-hooks).
	Turn *TurnOverride
}

// Taken reports whether the interceptor took the message.
func (d Decision) Taken() bool { return d.Reply != "" || d.Turn != nil }

// TurnOverride describes a turn answered in place of the message as
// written: an earlier question answered again (/retry, "no, try again",
// a 👎 re-answer).
type TurnOverride struct {
	// Text is the text to answer.
	Text string
	// Retry says the history already ends with Text: the agent answers it
	// again instead of appending it.
	Retry bool
	// Model forces a model ("" = the router chooses); Exclude lists models
	// that must not answer.
	Model   string
	Exclude []string
	// Finish, when set, sees the agent's answer before the post-hooks: it
	// learns which model answered and may add a note to the text.
	Finish func(*Answer)
	// Attachments are the images of the message (from its files); Echo is
	// shown ahead of the answer (a voice note's transcript).
	Attachments []Attachment
	Echo        string
}

// answering is what the pipeline knows of the item being answered
// besides the request: the stream its answer may be shown on (nil = not
// streamed).
type answering struct {
	stream *stream
}

// droppedError ends a request a pre-hook dropped: it is recorded as done
// with the reason, and nothing is sent.
type droppedError struct{ reason string }

func (e *droppedError) Error() string {
	if e.reason == "" {
		return "dropped by a pre-hook"
	}
	return "dropped by a pre-hook: " + e.reason
}

// answerMessage produces the answer to a message: an interceptor's
// decision, a command's reply, or the message itself through the turn
// pipeline.
func (g *Gateway) answerMessage(ctx context.Context, req CommandRequest, a answering, log *slog.Logger) (*Answer, error) {
	req.Admin = g.isAdmin(req.In)
	if !req.Admin && g.authorizes(req.In) {
		_, req.Admin = g.authorized(ctx, req.In)
	}
	for _, ic := range g.interceptors {
		d, err := ic.Intercept(ctx, req)
		if err != nil {
			return nil, err
		}
		if d.Taken() {
			return g.decide(ctx, req, d, a, log)
		}
	}
	if name, args, ok := ParseCommand(req.In.Text); ok {
		req.Args = args
		cmd, known := g.commands.byName[name]
		if !known {
			return &Answer{Text: fmt.Sprintf("Unknown command /%s. Send /help for the list of commands.", name)}, nil
		}
		if cmd.Admin && !req.Admin {
			return &Answer{Text: fmt.Sprintf("Only an admin of this %s bot can use /%s.", req.In.Conversation.Channel, name)}, nil
		}
		text, err := cmd.Run(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("command /%s: %w", name, err)
		}
		return &Answer{Text: text}, nil
	}
	t := TurnOverride{Text: req.In.Text}
	if len(req.In.Files) > 0 {
		mi, err := g.readMedia(ctx, req.In)
		if err != nil {
			return nil, err
		}
		if mi.Reply != "" {
			return &Answer{Text: mi.Reply}, nil
		}
		t.Text = joinText(t.Text, mi.Text)
		t.Attachments, t.Echo = mi.Attachments, mi.Echo
	}
	return g.runTurn(ctx, req, t, a, log)
}

// readMedia reads the files of in through the channel's Fetch.
func (g *Gateway) readMedia(ctx context.Context, in Inbound) (MediaInput, error) {
	if g.opts.Media == nil {
		if in.Text == "" {
			return MediaInput{Reply: "I cannot read files here, only text messages."}, nil
		}
		return MediaInput{}, nil
	}
	fetch := func(context.Context, InboundFile, io.Writer, int64) error {
		return Errorf(KindInvalid, "the %s channel cannot download files", in.Conversation.Channel)
	}
	if f, ok := g.channels[in.Conversation.Channel].(Fetcher); ok {
		fetch = f.Fetch
	}
	return g.opts.Media.Read(ctx, in, fetch)
}

// joinText puts the text a message's files add after its own.
func joinText(own, added string) string {
	switch {
	case added == "":
		return own
	case own == "":
		return added
	}
	return own + "\n\n" + added
}

// decide turns an interceptor's decision into the answer.
func (g *Gateway) decide(ctx context.Context, req CommandRequest, d Decision, a answering, log *slog.Logger) (*Answer, error) {
	if d.Turn != nil {
		return g.runTurn(ctx, req, *d.Turn, a, log)
	}
	return &Answer{Text: d.Reply}, nil
}

// runTurn is the one path of every answer the agent gives: pre-hooks →
// agent → post-hooks. A pre-hook may drop the turn (a *droppedError) or
// answer it itself.
func (g *Gateway) runTurn(ctx context.Context, req CommandRequest, t TurnOverride, a answering, log *slog.Logger) (*Answer, error) {
	hin := HookInput{In: req.In, Session: req.Session, Text: t.Text}
	h := g.opts.Hooks
	channel := req.In.Conversation.Channel
	if h != nil {
		t0 := g.now()
		pre, err := h.Pre(ctx, hin)
		g.obs.Stage(channel, StagePreHooks, g.now().Sub(t0))
		if err != nil {
			g.obs.HookFailed(channel, StagePreHooks)
			return nil, fmt.Errorf("pre-hooks: %w", err)
		}
		if pre.Reply != "" {
			log.Info("answered by a pre-hook", "dropped", pre.Drop, "reason", pre.Reason)
			return &Answer{Text: pre.Reply, Metadata: pre.Metadata}, nil
		}
		if pre.Drop {
			return nil, &droppedError{reason: pre.Reason}
		}
		hin.Text, hin.Metadata = pre.Text, pre.Metadata
	}
	turn := Turn{
		RequestID: req.RequestID, Session: req.Session, In: req.In, Text: hin.Text,
		Model: t.Model, Exclude: t.Exclude, Retry: t.Retry, Metadata: hin.Metadata,
		Attachments: t.Attachments,
	}
	if a.stream != nil && streamSafe(h, hin) {
		a.stream.setPrefix(echoLine(t.Echo))
		turn.Stream = a.stream
	}
	t0 := g.now()
	ans, err := g.agent.Answer(ctx, turn)
	g.obs.Stage(channel, StageAgent, g.now().Sub(t0))
	if err != nil {
		return nil, err
	}
	ans.Metadata = hin.Metadata
	if t.Echo != "" {
		ans.Text = echoLine(t.Echo) + "\n\n" + ans.Text
	}
	if t.Finish != nil {
		t.Finish(&ans)
	}
	if h != nil {
		t0 := g.now()
		ans.Text, err = h.Post(ctx, hin, ans.Text)
		g.obs.Stage(channel, StagePostHooks, g.now().Sub(t0))
		if err != nil {
			g.obs.HookFailed(channel, StagePostHooks)
			return nil, fmt.Errorf("post-hooks: %w", err)
		}
	}
	return &ans, nil
}

// streamSafe says whether the hooks let the answer to in be shown while
// it is written.
func streamSafe(h Hooks, in HookInput) bool {
	if s, ok := h.(StreamSafety); ok {
		return s.StreamSafe(in)
	}
	return true
}

// echoLine is how a transcript is shown ahead of the answer.
func echoLine(transcript string) string {
	if transcript == "" {
		return ""
	}
	return "🎤 _" + strings.TrimSpace(transcript) + "_"
}
