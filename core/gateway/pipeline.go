package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/opentalon/opentalon/core"
)

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
func (g *Gateway) answerMessage(ctx context.Context, req core.CommandRequest, a answering, log *slog.Logger) (*core.Answer, error) {
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
	if name, args, ok := core.ParseCommand(req.In.Text); ok {
		req.Args = args
		cmd, known := g.commands.byName[name]
		if !known {
			return &core.Answer{Text: fmt.Sprintf("Unknown command /%s. Send /help for the list of commands.", name)}, nil
		}
		if cmd.Admin && !req.Admin {
			return &core.Answer{Text: fmt.Sprintf("Only an admin of this %s bot can use /%s.", req.In.Conversation.Channel, name)}, nil
		}
		if b := req.Behind; b != nil && b.Head != 0 {
			req.Wake = func() { g.wakeAfter(req.RequestID, b.Head) }
		}
		text, err := cmd.Run(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("command /%s: %w", name, err)
		}
		return &core.Answer{Text: text}, nil
	}
	t := core.TurnOverride{Text: req.In.Prompt()}
	if len(req.In.Files) > 0 {
		mi, err := g.readMedia(ctx, req.In)
		if err != nil {
			return nil, err
		}
		if mi.Reply != "" {
			return &core.Answer{Text: mi.Reply}, nil
		}
		t.Text = joinText(t.Text, mi.Text)
		t.Attachments, t.Echo = mi.Attachments, mi.Echo
	}
	return g.runTurn(ctx, req, t, a, log)
}

// readMedia reads the files of in through the channel's Fetch.
func (g *Gateway) readMedia(ctx context.Context, in core.Inbound) (core.MediaInput, error) {
	if g.opts.Media == nil {
		if in.Prompt() == "" {
			return core.MediaInput{Reply: "I cannot read files here, only text messages."}, nil
		}
		return core.MediaInput{}, nil
	}
	fetch := func(context.Context, core.InboundFile, io.Writer, int64) error {
		return core.Errorf(core.KindInvalid, "the %s channel cannot download files", in.Conversation.Channel)
	}
	if f, ok := g.channels[in.Conversation.Channel].(core.Fetcher); ok {
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
func (g *Gateway) decide(ctx context.Context, req core.CommandRequest, d core.Decision, a answering, log *slog.Logger) (*core.Answer, error) {
	if d.Turn != nil {
		return g.runTurn(ctx, req, *d.Turn, a, log)
	}
	return &core.Answer{Text: d.Reply}, nil
}

// runTurn is the one path of every answer the agent gives: pre-hooks →
// agent → post-hooks. A pre-hook may drop the turn (a *droppedError) or
// answer it itself.
func (g *Gateway) runTurn(ctx context.Context, req core.CommandRequest, t core.TurnOverride, a answering, log *slog.Logger) (*core.Answer, error) {
	hin := core.HookInput{In: req.In, Session: req.Session, Text: t.Text}
	h := g.opts.Hooks
	channel := req.In.Conversation.Channel
	if h != nil {
		t0 := g.now()
		pre, err := h.Pre(ctx, hin)
		g.obs.Stage(channel, core.StagePreHooks, g.now().Sub(t0))
		if err != nil {
			g.obs.HookFailed(channel, core.StagePreHooks)
			return nil, fmt.Errorf("pre-hooks: %w", err)
		}
		if pre.Reply != "" {
			log.Info("answered by a pre-hook", "dropped", pre.Drop, "reason", pre.Reason)
			return &core.Answer{Text: pre.Reply, Metadata: pre.Metadata}, nil
		}
		if pre.Drop {
			return nil, &droppedError{reason: pre.Reason}
		}
		hin.Text, hin.Metadata = pre.Text, pre.Metadata
	}
	turn := core.Turn{
		RequestID: req.RequestID, Session: req.Session, In: req.In, Admin: req.Admin, Text: hin.Text,
		Model: t.Model, Exclude: t.Exclude, Retry: t.Retry, Metadata: hin.Metadata,
		Attachments: t.Attachments,
	}
	if a.stream != nil && streamSafe(h, hin) {
		a.stream.setPrefix(echoLine(t.Echo))
		turn.Stream = a.stream
	}
	t0 := g.now()
	ans, err := g.agent.Answer(ctx, turn)
	g.obs.Stage(channel, core.StageAgent, g.now().Sub(t0))
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
		g.obs.Stage(channel, core.StagePostHooks, g.now().Sub(t0))
		if err != nil {
			g.obs.HookFailed(channel, core.StagePostHooks)
			return nil, fmt.Errorf("post-hooks: %w", err)
		}
	}
	return &ans, nil
}

// streamSafe says whether the hooks let the answer to in be shown while
// it is written.
func streamSafe(h core.Hooks, in core.HookInput) bool {
	if s, ok := h.(core.StreamSafety); ok {
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
