package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
)

// Options configure a Gateway.
type Options struct {
	Store Store
	Agent Agent
	// Hooks and Signals are optional.
	Hooks   Hooks
	Signals SignalSink
	// Workers bounds how many conversations are processed at once
	// (default 4). 1 makes the queue single-consumer.
	Workers int
	// MaxAttempts is how often a request is tried before the user gets an
	// error reply and the request is marked failed (default 3).
	MaxAttempts int
	// RequestTimeout bounds one attempt (default 5 minutes).
	RequestTimeout time.Duration
	// Backoff gives the wait before attempt n+1 after n failed attempts.
	Backoff func(attempt int) time.Duration
	Now     func() time.Time
	Logger  *slog.Logger
}

// Gateway accepts events from channels into the durable queue and
// processes them: strictly in order within a conversation, concurrently
// across conversations. Construct with New, add channels and commands,
// then Run.
type Gateway struct {
	opts      Options
	store     Store
	agent     Agent
	log       *slog.Logger
	now       func() time.Time
	channels  map[string]Channel
	commands  commandSet
	statusers []StatusProvider
	// interceptors see each message before commands and the agent.
	interceptors []Interceptor

	wake chan struct{}
	mu   sync.Mutex
	// accepting is false before Run and after shutdown began.
	accepting bool
}

// Interceptor may take a message before it reaches the commands and the
// agent (quality-signal follow-ups, escalation). It returns handled=true
// with the reply text when it answered the message itself.
type Interceptor interface {
	Intercept(ctx context.Context, req CommandRequest) (reply *Answer, handled bool, err error)
}

// ErrNotAccepting is returned by Accept while the gateway is not running.
var ErrNotAccepting = &Error{Kind: KindUnavailable, Msg: "gateway is not accepting messages (starting or shutting down)"}

// New builds a Gateway; it starts nothing.
func New(o Options) *Gateway {
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 3
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 5 * time.Minute
	}
	if o.Backoff == nil {
		o.Backoff = func(n int) time.Duration {
			d := 2 * time.Second
			for i := 1; i < n && d < time.Minute; i++ {
				d *= 4
			}
			return min(d, time.Minute)
		}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{
		opts:     o,
		store:    o.Store,
		agent:    o.Agent,
		log:      o.Logger.With("component", "gateway"),
		now:      o.Now,
		channels: map[string]Channel{},
		wake:     make(chan struct{}, 1),
	}
	for _, c := range g.builtinCommands() {
		g.commands.add(c)
	}
	return g
}

// AddChannel registers a channel; call before Run.
func (g *Gateway) AddChannel(ch Channel) { g.channels[ch.Name()] = ch }

// Channels returns the registered channels.
func (g *Gateway) Channels() []Channel {
	out := make([]Channel, 0, len(g.channels))
	for _, ch := range g.channels {
		out = append(out, ch)
	}
	return out
}

// AddCommand registers an in-chat command, replacing one of the same
// name; call before Run.
func (g *Gateway) AddCommand(c Command) { g.commands.add(c) }

// AddStatus registers a /status line provider; call before Run.
func (g *Gateway) AddStatus(p StatusProvider) { g.statusers = append(g.statusers, p) }

// AddInterceptor registers an Interceptor; call before Run.
func (g *Gateway) AddInterceptor(i Interceptor) { g.interceptors = append(g.interceptors, i) }

// Commands implements Sink.
func (g *Gateway) Commands() []CommandInfo { return g.commands.infos() }

func (g *Gateway) isAccepting() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.accepting
}

func (g *Gateway) setAccepting(v bool) {
	g.mu.Lock()
	g.accepting = v
	g.mu.Unlock()
}

// Accept implements Sink.
func (g *Gateway) Accept(ctx context.Context, in Inbound) error {
	if !g.isAccepting() {
		return ErrNotAccepting
	}
	if in.ReceivedAt.IsZero() {
		in.ReceivedAt = g.now()
	}
	item := QueueItem{
		Kind:         EventMessage,
		Conversation: in.Conversation,
		DedupeKey:    in.Conversation.Channel + ":m:" + in.MessageID,
		Message:      &in,
		CreatedAt:    g.now(),
	}
	_, dup, err := g.store.Enqueue(ctx, item)
	if err != nil {
		return fmt.Errorf("accept %s message %s: %w", in.Conversation.Channel, in.MessageID, err)
	}
	if dup {
		g.log.Debug("duplicate message dropped", "conv", in.Conversation.String(), "message_id", in.MessageID)
		return nil
	}
	g.poke()
	return nil
}

// Edit implements Sink.
func (g *Gateway) Edit(ctx context.Context, in Inbound) (bool, error) {
	return g.store.EditQueued(ctx, in.Conversation.Channel+":m:"+in.MessageID, in.Text)
}

// React implements Sink.
func (g *Gateway) React(ctx context.Context, r Reaction) error {
	if !g.isAccepting() {
		return ErrNotAccepting
	}
	if r.At.IsZero() {
		r.At = g.now()
	}
	item := QueueItem{
		Kind:         EventReaction,
		Conversation: r.Conversation,
		DedupeKey:    r.Conversation.Channel + ":r:" + r.EventID,
		Reaction:     &r,
		CreatedAt:    g.now(),
	}
	_, dup, err := g.store.Enqueue(ctx, item)
	if err != nil {
		return fmt.Errorf("accept %s reaction: %w", r.Conversation.Channel, err)
	}
	if !dup {
		g.poke()
	}
	return nil
}

func (g *Gateway) poke() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// Run re-queues what a crash left running, starts the channels and
// processes the queue until ctx is cancelled. Then it stops accepting,
// lets in-flight requests finish within grace and returns; what is
// still queued stays for the next start.
func (g *Gateway) Run(ctx context.Context, grace time.Duration) error {
	n, err := g.store.RequeueRunning(ctx)
	if err != nil {
		return fmt.Errorf("requeue interrupted requests: %w", err)
	}
	if n > 0 {
		g.log.Info("re-queued requests interrupted by a previous stop", "count", n)
	}
	g.setAccepting(true)

	chErr := make(chan error, len(g.channels))
	chCtx, stopChannels := context.WithCancel(ctx)
	var chWG sync.WaitGroup
	for _, ch := range g.channels {
		chWG.Add(1)
		go func() {
			defer chWG.Done()
			if err := ch.Run(chCtx, g); err != nil && chCtx.Err() == nil {
				chErr <- fmt.Errorf("channel %s: %w", ch.Name(), err)
			}
		}()
	}

	// Work runs on its own context so in-flight requests survive the
	// shutdown signal until the grace period ends.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var runErr error
	var wg sync.WaitGroup
	done := make(chan struct{}, g.opts.Workers)
	inflight := 0
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
loop:
	for {
		var next time.Time
		if free := g.opts.Workers - inflight; free > 0 {
			items, nx, err := g.store.Claim(workCtx, free, g.now())
			if err != nil {
				g.log.Error("claim from queue", "err", err)
				nx = g.now().Add(time.Second)
			}
			next = nx
			for _, it := range items {
				inflight++
				wg.Add(1)
				go func() {
					defer wg.Done()
					g.process(workCtx, it)
					done <- struct{}{}
				}()
			}
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = max(next.Sub(g.now()), time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			break loop
		case err := <-chErr:
			runErr = err
			break loop
		case <-done:
			inflight--
		case <-g.wake:
		case <-timer.C:
		}
	}

	g.setAccepting(false)
	stopChannels()
	chWG.Wait()
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(grace):
		g.log.Warn("shutdown grace period over; unfinished requests stay queued for the next start", "in_flight", inflight)
		cancelWork()
		<-finished
	}
	return runErr
}

// maxQuietWait is the longest server-requested wait the gateway sits out
// silently before retrying; past it the user is told at once when to try
// again (every credential and model of the failover chain is cooling).
const maxQuietWait = 30 * time.Second

// process runs one queue item to its end state.
func (g *Gateway) process(ctx context.Context, it QueueItem) {
	ctx, cancel := context.WithTimeout(ctx, g.opts.RequestTimeout)
	defer cancel()
	log := g.log.With("request", it.ID, "conv", it.Conversation.String(), "kind", it.Kind)
	var err error
	if it.Attempts >= g.opts.MaxAttempts {
		// Every attempt was interrupted (a crash, a kill): the message may
		// be what crashes the process, so it is not tried again.
		err = &Error{Kind: KindInvalid, Msg: fmt.Sprintf("gave up after %d interrupted attempts", it.Attempts)}
	} else {
		err = g.handle(ctx, it, log)
	}
	// Store writes below use a context that survives cancellation so the
	// outcome is recorded even during shutdown.
	sctx := context.WithoutCancel(ctx)
	switch {
	case err == nil:
		if ferr := g.store.Finish(sctx, it.ID, StatusDone, ""); ferr != nil {
			log.Error("mark request done", "err", ferr)
		}
	case errors.Is(ctx.Err(), context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		// Shutdown: leave it running; the next start re-queues it.
		log.Info("request interrupted by shutdown; it will be retried at next start")
	case Transient(err) && it.Attempts+1 < g.opts.MaxAttempts && RetryAfter(err) <= maxQuietWait:
		wait := max(g.opts.Backoff(it.Attempts+1), RetryAfter(err))
		log.Warn("request failed; will retry", "attempt", it.Attempts+1, "in", wait, "err", err)
		if rerr := g.store.Retry(sctx, it.ID, g.now().Add(wait), err.Error()); rerr != nil {
			log.Error("re-queue request", "err", rerr)
		}
	default:
		log.Error("request failed", "attempts", it.Attempts+1, "err", err)
		if it.Kind == EventMessage {
			g.apologize(sctx, it, err, log)
		}
		if ferr := g.store.Finish(sctx, it.ID, StatusFailed, err.Error()); ferr != nil {
			log.Error("mark request failed", "err", ferr)
		}
	}
}

// handle runs one item; a panic in a channel, hook or the agent becomes a
// permanent failure of that item instead of a crash of the gateway.
func (g *Gateway) handle(ctx context.Context, it QueueItem, log *slog.Logger) (err error) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("panic while processing a request", "panic", p, "stack", string(debug.Stack()))
			err = &Error{Kind: KindInvalid, Msg: "an internal error occurred (logged)", Err: fmt.Errorf("panic: %v", p)}
		}
	}()
	switch it.Kind {
	case EventMessage:
		return g.handleMessage(ctx, it, log)
	case EventReaction:
		return g.handleReaction(ctx, it)
	}
	return Errorf(KindInvalid, "unknown queue item kind %q", it.Kind)
}

func (g *Gateway) handleMessage(ctx context.Context, it QueueItem, log *slog.Logger) error {
	in := *it.Message
	ch, ok := g.channels[in.Conversation.Channel]
	if !ok {
		return Errorf(KindInvalid, "channel %q is not enabled; enable channels.%s in the config to answer its queued messages", in.Conversation.Channel, in.Conversation.Channel)
	}
	// A reply stored by an earlier attempt is only delivered again.
	if r, err := g.store.ReplyForRequest(ctx, it.ID, it.Conversation); err != nil {
		return err
	} else if r != nil {
		return g.deliver(ctx, ch, in, r)
	}
	if ind, ok := ch.(Indicator); ok {
		stop := ind.Working(ctx, in)
		defer stop()
	}
	sess, err := g.store.ActiveSession(ctx, in.Conversation)
	if err != nil {
		return err
	}
	req := CommandRequest{RequestID: it.ID, In: in, Session: sess}
	ans, err := g.answer(ctx, req, log)
	if err != nil || ans == nil {
		return err
	}
	return g.saveAndDeliver(ctx, ch, it.ID, sess.ID, in, ans)
}

// saveAndDeliver stores the answer to a queue item with the turn's history
// entries, then sends its parts.
func (g *Gateway) saveAndDeliver(ctx context.Context, ch Channel, requestID, sessionID int64, to Inbound, ans *Answer) error {
	r := &Reply{
		RequestID:    requestID,
		SessionID:    sessionID,
		Conversation: to.Conversation,
		Text:         ans.Text,
		Parts:        ch.Format(ans.Text),
		Model:        ans.Model,
		TaskType:     ans.TaskType,
		Reason:       ans.Reason,
		Usage:        ans.Usage,
		CreatedAt:    g.now(),
	}
	r.Sent = make([]string, len(r.Parts))
	var err error
	if r.ID, err = g.store.SaveReply(ctx, r, ans.Messages); err != nil {
		return err
	}
	return g.deliver(ctx, ch, to, r)
}

// answer produces the reply for a message: an interceptor, a command, or
// hooks around the agent. A nil answer means the message was dropped.
func (g *Gateway) answer(ctx context.Context, req CommandRequest, log *slog.Logger) (*Answer, error) {
	for _, ic := range g.interceptors {
		ans, handled, err := ic.Intercept(ctx, req)
		if err != nil || handled {
			return ans, err
		}
	}
	if name, args, ok := ParseCommand(req.In.Text); ok {
		req.Args = args
		cmd, known := g.commands.byName[name]
		if !known {
			return &Answer{Text: fmt.Sprintf("Unknown command /%s. Send /help for the list of commands.", name)}, nil
		}
		text, err := cmd.Run(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("command /%s: %w", name, err)
		}
		return &Answer{Text: text}, nil
	}
	text := req.In.Text
	var meta map[string]string
	if h := g.opts.Hooks; h != nil {
		var drop bool
		var err error
		text, meta, drop, err = h.Pre(ctx, req.In, text)
		if err != nil {
			return nil, fmt.Errorf("pre-hooks: %w", err)
		}
		if drop {
			log.Info("message dropped by a pre-hook")
			return nil, nil
		}
	}
	ans, err := g.agent.Answer(ctx, Turn{RequestID: req.RequestID, Session: req.Session, In: req.In, Text: text, Metadata: meta})
	if err != nil {
		return nil, err
	}
	if h := g.opts.Hooks; h != nil {
		if ans.Text, err = h.Post(ctx, req.In, ans.Text); err != nil {
			return nil, fmt.Errorf("post-hooks: %w", err)
		}
	}
	return &ans, nil
}

// deliver sends the parts of r not sent yet, recording each as it goes.
func (g *Gateway) deliver(ctx context.Context, ch Channel, in Inbound, r *Reply) error {
	for i, part := range r.Parts {
		if i < len(r.Sent) && r.Sent[i] != "" {
			continue
		}
		to := Outbound{Conversation: in.Conversation, ReplyTo: in.MessageID, Meta: in.Meta, Part: i, Parts: len(r.Parts)}
		id, err := ch.Send(ctx, to, part)
		if err != nil {
			return fmt.Errorf("send part %d/%d: %w", i+1, len(r.Parts), err)
		}
		if id == "" {
			id = "-"
		}
		if err := g.store.MarkSent(context.WithoutCancel(ctx), r.ID, i, id); err != nil {
			return err
		}
	}
	return nil
}

// apologize tells the user, best effort, that their message failed.
func (g *Gateway) apologize(ctx context.Context, it QueueItem, cause error, log *slog.Logger) {
	ch, ok := g.channels[it.Conversation.Channel]
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	in := *it.Message
	for i, part := range ch.Format(UserMessage(cause)) {
		if _, err := ch.Send(ctx, Outbound{Conversation: in.Conversation, ReplyTo: in.MessageID, Meta: in.Meta, Part: i, Parts: 1}, part); err != nil {
			log.Error("send error reply", "err", err)
			return
		}
	}
}

// UserMessage is the short text a user sees when their request failed.
func UserMessage(err error) string {
	const pre = "Sorry, I could not answer that: "
	switch ErrorKind(err) {
	case KindRateLimited:
		if d := RetryAfter(err); d > 0 {
			return pre + fmt.Sprintf("the AI provider is rate limiting me. Please try again in %s.", d.Round(time.Second))
		}
		return pre + "the AI provider is rate limiting me. Please try again in a minute."
	case KindAuth:
		return pre + "the AI provider refused my credentials. The operator has been told (see the log)."
	case KindBilling:
		return pre + "the AI provider's quota or credit is used up. The operator has been told (see the log)."
	case KindUnavailable, KindTimeout:
		return pre + "the AI provider is not answering right now. Please try again later."
	case KindContextTooLong:
		return pre + "the conversation is too long for the model. Send /new to start a fresh one."
	case KindMalformed:
		return pre + "the AI provider sent an answer I could not read. The error is logged; please try again."
	case KindInvalid, KindBadRequest:
		var e *Error
		if errors.As(err, &e) && e.Msg != "" {
			return pre + e.Msg // the cause stays in the log
		}
		return pre + "the request was not valid."
	}
	return pre + "something went wrong on my side. The error is logged; please try again."
}

// ReactionInterceptor is an optional Interceptor capability: it may
// answer a judged reaction (routing re-answers a 👎 on the latest answer
// with the next model when routing.escalate_on_reaction is on). A nil
// answer means nothing is sent.
type ReactionInterceptor interface {
	InterceptReaction(ctx context.Context, r Reaction, judged *Reply, s Session) (*Answer, error)
}

// handleReaction turns a reaction on one of the bot's replies into a
// quality signal, and lets reaction interceptors answer it; reactions on
// anything else are ignored.
func (g *Gateway) handleReaction(ctx context.Context, it QueueItem) error {
	re := it.Reaction
	if re.Polarity == Neutral {
		return nil
	}
	ch, ok := g.channels[re.Conversation.Channel]
	if !ok {
		return nil
	}
	to := Inbound{Conversation: re.Conversation, MessageID: re.MessageID, UserID: re.UserID, ReceivedAt: re.At}
	// An answer stored by an earlier attempt is only delivered again.
	if prev, err := g.store.ReplyForRequest(ctx, it.ID, it.Conversation); err != nil || prev != nil {
		if err != nil {
			return err
		}
		return g.deliver(ctx, ch, to, prev)
	}
	judged, err := g.store.ReplyByPlatformID(ctx, re.Conversation.Channel, re.MessageID)
	if err != nil || judged == nil {
		return err
	}
	// The judged reply knows its conversation precisely (a platform may
	// not say in which thread or topic a reaction was made).
	to.Conversation = judged.Conversation
	p := re.Polarity
	if !re.Added {
		// Taking a reaction back cancels its judgement.
		p = -p
	}
	// A retried item does not count its signal twice.
	if g.opts.Signals != nil && it.Attempts == 0 {
		if err := g.opts.Signals.RecordSignal(ctx, Signal{
			Kind: SignalReaction, Polarity: p, ReplyID: judged.ID, Model: judged.Model,
			TaskType: judged.TaskType, UserID: re.UserID, Weight: 1, At: re.At,
		}); err != nil {
			return err
		}
	}
	if p != Negative || !re.Added {
		return nil
	}
	for _, ic := range g.interceptors {
		ri, ok := ic.(ReactionInterceptor)
		if !ok {
			continue
		}
		sess, err := g.store.ActiveSession(ctx, judged.Conversation)
		if err != nil || sess.ID != judged.SessionID {
			return err // a reply of an ended session is not re-answered
		}
		ans, err := ri.InterceptReaction(ctx, *re, judged, sess)
		if err != nil || ans == nil {
			return err
		}
		return g.saveAndDeliver(ctx, ch, it.ID, sess.ID, to, ans)
	}
	return nil
}
