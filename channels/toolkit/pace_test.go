package toolkit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core/clock"
)

// sendAfter makes one paced send on pace, whose Sleep moves c, and
// returns how long it waited.
func sendAfter(t *testing.T, c *clock.Fake, pace Pace, key string, group bool) time.Duration {
	t.Helper()
	t0 := c.Now()
	if err := pace.Wait(context.Background(), key, group, false); err != nil {
		t.Fatal(err)
	}
	return c.Now().Sub(t0)
}

func TestPacerBurstThenGap(t *testing.T) {
	c := newClock()
	pace := Pace{Pacer: NewPacer(PacerOptions{Gap: time.Second, Now: c.Now}), Sleep: c.AutoSleep}
	var waits []time.Duration
	for range 6 {
		waits = append(waits, sendAfter(t, c, pace, "chat", false))
	}
	want := []time.Duration{0, 0, 0, time.Second, time.Second, time.Second}
	if !reflect.DeepEqual(waits, want) {
		t.Errorf("private waits = %v, want %v", waits, want)
	}
	// Another conversation has its own bucket; a group's gap is 3s.
	if w := sendAfter(t, c, pace, "other", false); w != 0 {
		t.Errorf("other conversation waits %v", w)
	}
	var gw []time.Duration
	for range 4 {
		gw = append(gw, sendAfter(t, c, pace, "group", true))
	}
	if !reflect.DeepEqual(gw, []time.Duration{0, 0, 0, 3 * time.Second}) {
		t.Errorf("group waits = %v", gw)
	}
	// After a quiet spell the bucket is full again.
	c.Advance(time.Minute)
	if w := sendAfter(t, c, pace, "chat", false); w != 0 {
		t.Errorf("after a minute the chat waits %v", w)
	}
	off := Pace{Pacer: NewPacer(PacerOptions{Gap: -1, Now: c.Now}), Sleep: c.AutoSleep}
	for range 4 {
		if w := sendAfter(t, c, off, "x", false); w != 0 {
			t.Fatal("a negative gap must turn pacing off")
		}
	}
}

// TestPacerQuickQuestionsAndLongRun: questions sent one after the other
// (each when the previous answer arrived, a few hundred ms apart) are not
// delayed at first, and a long run of them settles at one per gap.
func TestPacerQuickQuestionsAndLongRun(t *testing.T) {
	c := newClock()
	pace := Pace{Pacer: NewPacer(PacerOptions{Gap: time.Second, Now: c.Now}), Sleep: c.AutoSleep}
	var sent []time.Time
	for i := range 30 {
		if w := sendAfter(t, c, pace, "chat", false); i < 3 && w != 0 {
			t.Fatalf("quick question %d waited %v", i+1, w)
		}
		sent = append(sent, c.Now())
		c.Advance(300 * time.Millisecond) // the user reads and asks again
	}
	rate := float64(len(sent)-11) / sent[len(sent)-1].Sub(sent[10]).Seconds()
	if rate < 0.9 || rate > 1.1 {
		t.Errorf("steady rate = %.2f/s, want about 1/s", rate)
	}
}

// maxInWindow returns the most events within any window of length w.
func maxInWindow(ts []time.Time, w time.Duration) int {
	best := 0
	for i := range ts {
		n := 0
		for j := i; j < len(ts) && ts[j].Sub(ts[i]) < w; j++ {
			n++
		}
		best = max(best, n)
	}
	return best
}

func TestLimiterNeverExceedsNPerWindow(t *testing.T) {
	for seed := range uint64(20) {
		rnd := rand.New(rand.NewPCG(seed, 1))
		c := newClock()
		pace := Pace{Limiter: NewLimiter(30, time.Second, c.Now), Sleep: c.AutoSleep}
		var at []time.Time
		for range 500 {
			// Senders come at random moments, often in bursts.
			if rnd.IntN(4) == 0 {
				c.Advance(time.Duration(rnd.IntN(200)) * time.Millisecond)
			}
			sendAfter(t, c, pace, fmt.Sprint(rnd.IntN(50)), false)
			at = append(at, c.Now())
		}
		if n := maxInWindow(at, time.Second); n > 30 {
			t.Fatalf("seed %d: %d sends within one second, want <= 30", seed, n)
		}
	}
	if NewLimiter(0, time.Second, nil) != nil {
		t.Error("a limit of 0 must be no limiter")
	}
}

func TestLimiterBurstOf50(t *testing.T) {
	c := newClock()
	pace := Pace{Limiter: NewLimiter(30, time.Second, c.Now), Sleep: c.AutoSleep}
	for i := range 50 {
		want := time.Duration(0)
		if i == 30 {
			want = time.Second // the 31st waits a window, the rest go with it
		}
		if w := sendAfter(t, c, pace, "chat", false); w != want {
			t.Fatalf("send %d waits %v, want %v", i, w, want)
		}
	}
}

func TestPaceWaitsForBoth(t *testing.T) {
	c := newClock()
	var slept []time.Duration
	pace := Pace{
		Pacer:   NewPacer(PacerOptions{Gap: time.Second, Burst: 1, Now: c.Now}),
		Limiter: NewLimiter(2, time.Second, c.Now),
		Sleep: func(ctx context.Context, d time.Duration) error {
			slept = append(slept, d)
			return c.AutoSleep(ctx, d)
		},
	}
	for _, key := range []string{"a", "b", "c", "a"} {
		sendAfter(t, c, pace, key, false)
	}
	// a, b at once; c waits for the global window; a again is past its gap.
	if want := []time.Duration{time.Second}; !reflect.DeepEqual(slept, want) {
		t.Errorf("sleeps = %v, want %v", slept, want)
	}
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := (Pace{}).Wait(cctx, "x", false, false); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait on a cancelled context = %v", err)
	}
}

// paceStep is one step of a paceCase: start a sender (start, in
// conversation key, a notice when notice), cancel one (cancel), or move
// the clock (advance); then (at least) sleepers senders are sleeping on
// the clock, and every sender due by now has sent.
type paceStep struct {
	start, key string
	notice     bool
	cancel     string
	advance    time.Duration
	sleepers   int
}

// TestPaceLines: senders wait in line; one whose context ends leaves its
// turn to the ones behind it, an answer goes before the notices waiting,
// and the limits hold for the sends made.
func TestPaceLines(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name  string
		limit int                      // global sends per 10s (0: none)
		steps []paceStep               // in order
		want  map[string]time.Duration // when each sender sends; -1: never
	}{{
		name: "a cancelled waiter's turn goes to the next",
		steps: []paceStep{
			{start: "a"},
			{start: "b", sleepers: 1},
			{start: "c", sleepers: 1},
			{cancel: "b", sleepers: 1},
			{advance: s},
		},
		want: map[string]time.Duration{"a": 0, "b": -1, "c": s},
	}, {
		name: "a cancelled waiter further back moves the ones behind it up",
		steps: []paceStep{
			{start: "a"},
			{start: "b", sleepers: 1},
			{start: "c", sleepers: 1},
			{start: "d", sleepers: 1},
			{cancel: "c", sleepers: 1},
			{advance: s, sleepers: 1},
			{advance: s},
		},
		want: map[string]time.Duration{"a": 0, "b": s, "c": -1, "d": 2 * s},
	}, {
		name:  "a sender cancelled in the global line gives back its conversation's turn",
		limit: 1,
		steps: []paceStep{
			{start: "a", key: "x"},
			{start: "b", sleepers: 1},
			{start: "c", sleepers: 1},
			{cancel: "b", sleepers: 1},
			{advance: 10 * s},
		},
		want: map[string]time.Duration{"a": 0, "b": -1, "c": 10 * s},
	}, {
		name: "an answer goes before the notices waiting",
		steps: []paceStep{
			{start: "a"},
			{start: "n1", notice: true, sleepers: 1},
			{start: "n2", notice: true, sleepers: 1},
			{start: "x", sleepers: 2},
			{advance: s, sleepers: 1},
			{advance: s, sleepers: 1},
			{advance: s},
		},
		want: map[string]time.Duration{"a": 0, "x": s, "n1": 2 * s, "n2": 3 * s},
	}, {
		name:  "an answer goes before a notice in the global line",
		limit: 1,
		steps: []paceStep{
			{start: "a", key: "x"},
			{start: "n", key: "y", notice: true, sleepers: 1},
			{start: "b", key: "z", sleepers: 2},
			{advance: 10 * s, sleepers: 1},
			{advance: 10 * s},
		},
		want: map[string]time.Duration{"a": 0, "b": 10 * s, "n": 20 * s},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			start := c.Now()
			pace := Pace{Pacer: NewPacer(PacerOptions{Gap: s, Burst: 1, Now: c.Now}), Limiter: NewLimiter(tc.limit, 10*s, c.Now), Sleep: c.Sleep}
			var (
				mu      sync.Mutex
				sent    = map[string]time.Duration{}
				keys    = map[string]string{}
				cancels = map[string]context.CancelFunc{}
				done    = map[string]chan struct{}{}
			)
			defer func() {
				for _, cancel := range cancels {
					cancel()
				}
				for _, d := range done {
					<-d
				}
			}()
			settle := func(what string, ok func() bool) {
				t.Helper()
				for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						mu.Lock()
						defer mu.Unlock()
						t.Fatalf("%s: at +%v, sent %v, %d sleeping", what, c.Now().Sub(start), sent, c.Waiters())
					}
				}
			}
			for _, st := range tc.steps {
				switch {
				case st.start != "":
					key := st.key
					if key == "" {
						key = "chat"
					}
					ctx, cancel := context.WithCancel(context.Background())
					name, before, d := st.start, pace.waiting(), make(chan struct{})
					keys[name], cancels[name], done[name] = key, cancel, d
					go func() {
						defer close(d)
						if pace.Wait(ctx, key, false, st.notice) == nil {
							mu.Lock()
							sent[name] = c.Now().Sub(start)
							mu.Unlock()
						}
					}()
					// In line (or through) before the next step.
					settle("start "+name, func() bool {
						select {
						case <-d:
							return true
						default:
							return pace.waiting() > before
						}
					})
				case st.cancel != "":
					cancels[st.cancel]()
					<-done[st.cancel]
				default:
					c.Advance(st.advance)
				}
				now := c.Now().Sub(start)
				settle(fmt.Sprintf("%+v", st), func() bool {
					mu.Lock()
					defer mu.Unlock()
					for name, at := range tc.want {
						if _, ok := sent[name]; at >= 0 && at <= now && !ok && done[name] != nil {
							return false
						}
					}
					return c.Waiters() >= st.sleepers
				})
			}
			mu.Lock()
			defer mu.Unlock()
			got := map[string]time.Duration{}
			for name := range tc.want {
				got[name] = -1
				if at, ok := sent[name]; ok {
					got[name] = at
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("sent at %v, want %v", got, tc.want)
			}
			// The limits hold for the sends made.
			byKey := map[string][]time.Time{}
			var all []time.Time
			for name, at := range sent {
				byKey[keys[name]] = append(byKey[keys[name]], start.Add(at))
				all = append(all, start.Add(at))
			}
			sortTimes(all)
			for key, ts := range byKey {
				sortTimes(ts)
				if n := maxInWindow(ts, s); n > 1 {
					t.Errorf("%d sends in %s within one gap", n, key)
				}
			}
			if n := maxInWindow(all, 10*s); tc.limit > 0 && n > tc.limit {
				t.Errorf("%d sends within the global window, want <= %d", n, tc.limit)
			}
		})
	}
}

// waiting is how many senders are in the lines of p (one holding its
// conversation's turn while in the global line counts twice).
func (p Pace) waiting() int {
	n := 0
	if p.Pacer != nil {
		p.Pacer.mu.Lock()
		for _, c := range p.Pacer.convs {
			n += len(c.line)
		}
		p.Pacer.mu.Unlock()
	}
	if p.Limiter != nil {
		p.Limiter.mu.Lock()
		n += len(p.Limiter.line)
		p.Limiter.mu.Unlock()
	}
	return n
}

func sortTimes(ts []time.Time) {
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && ts[j].Before(ts[j-1]); j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
}
