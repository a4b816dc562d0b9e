package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/opentalon/opentalon/core"
)

// errStopped is the cause of the work /stop cancels.
var errStopped = errors.New("stopped by the user (/stop)")

// stopLedger is the store's memory of what /stop ended (store.DB): whether
// the /stop queued as item id of conv stopped an item before it.
type stopLedger interface {
	StoppedBefore(ctx context.Context, conv core.ConversationKey, id int64) (bool, error)
}

// isStop says text is the /stop command.
func (g *Gateway) isStop(text string) bool {
	if len(text) < 2 || text[0] != '/' {
		return false
	}
	name, _, ok := core.ParseCommand(text)
	return ok && name == "stop" && g.commands.byName["stop"].Run != nil
}

// requestStop stops the answer being written in conv, in this process
// and, on a shared database (core.Stopper), on the replica writing it.
// It runs once /stop is queued: the command itself answers after the
// stopped work ended, in the conversation's order.
func (g *Gateway) requestStop(ctx context.Context, conv core.ConversationKey) {
	n := g.interrupt(conv)
	if s, ok := g.store.(core.Stopper); ok {
		if err := s.RequestStop(ctx, conv); err != nil {
			g.log.Warn("tell the other replicas to stop an answer; the one writing it finishes it", "conv", conv.String(), "err", err)
		}
	}
	g.log.Info("/stop: stopping the answer being written", "conv", conv.String(), "here", n)
}

// interrupt cancels the work under way in this process for conv (the
// answer ends where it is; settle records it as stopped) and says how
// many items it stopped.
func (g *Gateway) interrupt(conv core.ConversationKey) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, f := range g.flights {
		if !f.keep && f.conv.String() == conv.String() {
			f.cancel(errStopped)
			n++
		}
	}
	return n
}

// pastStop puts the work of ctx out of /stop's reach once its answer is
// written (only storing and sending it are left: a stop then would cut
// the delivery of an answer the history holds in full, and leave a
// native stream open) and says whether a stop came first.
func (g *Gateway) pastStop(ctx context.Context) bool {
	if f, _ := ctx.Value(leaseFenceKey{}).(*leaseFence); f != nil {
		g.mu.Lock()
		f.keep = true
		g.mu.Unlock()
	}
	// interrupt cancels under g.mu: a stop before the lock is seen here.
	return errors.Is(context.Cause(ctx), errStopped)
}

// listenStops interrupts the work of the conversations other replicas
// asked to stop, until ctx ends.
func (g *Gateway) listenStops(ctx context.Context) {
	s, ok := g.store.(core.Stopper)
	if !ok {
		return
	}
	stops := s.StopRequests()
	if stops == nil {
		return
	}
	g.side.Add(1)
	go func() {
		defer g.side.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case conv := <-stops:
				if n := g.interrupt(conv); n > 0 {
					g.log.Debug("/stop from the database: stopped the answer being written here", "conv", conv.String())
				}
			}
		}
	}()
}

// cmdStop answers /stop once the work it stopped has ended (it runs in
// the conversation's order, after the answer it stopped).
func (g *Gateway) cmdStop(ctx context.Context, req core.CommandRequest) (string, error) {
	if b := req.Behind; b != nil && b.Waiting > 0 {
		// Answered aside: the earlier messages only wait for a provider
		// or a retry, and none is being written.
		wait := core.HumanDuration(b.Next.Sub(g.now()))
		if b.Waiting == 1 {
			return fmt.Sprintf("Nothing is being written now: your earlier message waits for the model, tried again in about %s, and is still answered.", wait), nil
		}
		return fmt.Sprintf("Nothing is being written now: %d earlier messages wait for the model, the first tried again in about %s, and are still answered.", b.Waiting, wait), nil
	}
	if l, ok := g.store.(stopLedger); ok {
		stopped, err := l.StoppedBefore(ctx, req.In.Conversation, req.RequestID)
		if err != nil {
			return "", err
		}
		if stopped {
			return "Stopped. Send a message when you want me to go on.", nil
		}
	}
	return "Nothing to stop: no answer was being written here.", nil
}

// endStopped ends the native streams an answer /stop stopped left
// showing: each shows what it showed, as an ordinary message (edited
// streams already are). That is a stream the platform holds open
// (Slack) and a draft that is no message until it ends (Telegram's
// sendMessageDraft, which would vanish).
func (g *Gateway) endStopped(ctx context.Context, w *work) {
	s := w.stream
	if s == nil {
		return
	}
	s.finish() // the worker has stopped: its slots are read below
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	s.dropPlaceholders(ctx, w.log)
	if s.nat == nil {
		return
	}
	for i, sl := range s.slots {
		if sl.part == "" || sl.ended || !sl.open && sl.id != "" || sl.raw == continued {
			continue // nothing shown, a message already, an edited one, or a placeholder
		}
		to := s.to
		to.Part = i
		d := core.NativeDraft{Seq: i, Key: s.reply.RequestID, ID: sl.id, Shown: sl.raw, Raw: sl.raw, Part: sl.part}
		id, err := s.nat.EndDraft(ctx, to, d, sl.part)
		if err != nil {
			w.log.Warn("end the stream of a stopped answer; the platform closes it later", "part", i, "err", err)
			continue
		}
		if id != "" && id != sl.id {
			if err := s.record(i, id); err != nil {
				w.log.Warn("record a message of a stopped answer", "part", i, "err", err)
			}
		}
	}
}

// dropPlaceholders deletes the messages of a stopped answer that show
// only the placeholder of text that went back (see show), where the
// channel can, and forgets them: no answer ever grows into them now. A
// native draft showing it is no message and vanishes by itself.
func (s *stream) dropPlaceholders(ctx context.Context, log *slog.Logger) {
	d, ok := s.ch.(core.Deleter)
	if !ok {
		return
	}
	for i, sl := range s.slots {
		if sl.raw != continued || sl.id == "" {
			continue
		}
		to := s.to
		to.Part = i
		if err := d.Delete(ctx, to, sl.id); err != nil {
			log.Warn("delete the placeholder message of a stopped answer; it stays", "part", i, "err", err)
			continue
		}
		if err := s.g.store.ForgetPart(ctx, s.reply.ID, i); err != nil {
			log.Warn("forget the deleted placeholder message of a stopped answer", "part", i, "err", err)
		}
		s.slots[i] = slot{}
	}
}
