package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/opentalon/opentalon/core"
)

// channelState is what the gateway knows of a channel's lifecycle.
type channelState struct {
	// lastErr is the error the channel's Run last stopped with; restarted
	// is when it was started again after it.
	lastErr   error
	restarted time.Time
	restarts  int
}

// stableAfter is how long a restarted channel must run before its last
// failure stops counting against it.
const stableAfter = 30 * time.Second

// ChannelState is a channel's supervision state, for /readyz.
type ChannelState struct {
	Name string
	// Err is non-nil while the channel is down: its Run stopped with Err
	// and it is being restarted (or has run for less than 30s since,
	// without saying it connected again: core.ConnectionReporter).
	Err      error
	Restarts int
}

// ChannelStates reports every channel's supervision state, sorted by name.
func (g *Gateway) ChannelStates() []ChannelState {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	out := make([]ChannelState, 0, len(g.chanState))
	for _, ch := range g.Channels() {
		st := g.chanState[ch.Name()]
		cs := ChannelState{Name: ch.Name(), Restarts: st.restarts}
		if st.lastErr != nil && (st.restarted.IsZero() || now.Sub(st.restarted) < stableAfter) && !reconnected(ch, st.restarted) {
			cs.Err = st.lastErr
		}
		out = append(out, cs)
	}
	return out
}

// reconnected says a channel restarted at restarted (zero: not yet) has
// said since that it is connected (core.ConnectionReporter): its failure
// no longer counts, settling time or not.
func reconnected(ch core.Channel, restarted time.Time) bool {
	cr, ok := ch.(core.ConnectionReporter)
	return ok && !restarted.IsZero() && !cr.ConnectedAt().Before(restarted)
}

// supervise runs ch until ctx ends. A Run that stops with an error of kind
// KindAuth (the platform refused the credential) or KindInvalid (the
// config cannot work) is fatal: it is sent on fatal and the gateway stops.
// Any other stop is logged and the channel restarted with backoff, while
// the other channels keep answering.
func (g *Gateway) supervise(ctx context.Context, ch core.Channel, fatal chan<- error) {
	name := ch.Name()
	failures := 0
	for {
		started := g.now()
		err := ch.Run(ctx, g)
		// A refusal is fatal even when the stop came with it: a start
		// that failed must not end as a clean stop (exit 0).
		if core.Refusal(err) {
			fatal <- fmt.Errorf("channel %s: %w", name, err)
			return
		}
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("Run returned while the gateway was running")
		}
		if g.now().Sub(started) >= stableAfter {
			failures = 0 // it ran well for a while: start the backoff again
		}
		wait := g.opts.ChannelBackoff(failures)
		failures++
		g.mu.Lock()
		st := g.chanState[name]
		st.lastErr, st.restarted = err, time.Time{}
		st.restarts++
		g.mu.Unlock()
		g.log.Error("channel stopped; restarting it while the other channels go on", "channel", name, "in", wait, "restarts", st.restarts, "err", err)
		if g.clock.Sleep(ctx, wait) != nil {
			return
		}
		g.mu.Lock()
		st.restarted = g.now()
		g.mu.Unlock()
	}
}
