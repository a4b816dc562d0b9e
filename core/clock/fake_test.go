package clock_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core/clock"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestAdvanceFiresInDeadlineOrderAtTheirTimes(t *testing.T) {
	c := clock.NewFake(t0)
	var mu sync.Mutex
	var got []string
	record := func(name string) func() {
		return func() {
			mu.Lock()
			got = append(got, name+"@"+c.Now().Sub(t0).String())
			mu.Unlock()
		}
	}
	c.AfterFunc(3*time.Second, record("c"))
	c.AfterFunc(time.Second, record("a"))
	c.AfterFunc(2*time.Second, record("b1"))
	c.AfterFunc(2*time.Second, record("b2"))
	stopped := c.AfterFunc(2*time.Second, record("never"))
	if !stopped.Stop() {
		t.Fatal("Stop of a waiting timer = false")
	}
	c.Advance(2500 * time.Millisecond)
	want := []string{"a@1s", "b1@2s", "b2@2s"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if now := c.Now().Sub(t0); now != 2500*time.Millisecond {
		t.Errorf("Now after Advance = +%v, want +2.5s", now)
	}
	c.Advance(time.Second)
	if len(got) != 4 || got[3] != "c@3s" {
		t.Errorf("after the second Advance fired %v", got)
	}
	if stopped.Stop() {
		t.Error("a second Stop = true")
	}
}

func TestTimerChannelAndReset(t *testing.T) {
	c := clock.NewFake(t0)
	tm := c.NewTimer(time.Minute)
	c.Advance(59 * time.Second)
	select {
	case <-tm.C():
		t.Fatal("timer fired early")
	default:
	}
	if !tm.Reset(time.Minute) {
		t.Error("Reset of a waiting timer = false")
	}
	c.Advance(59 * time.Second)
	select {
	case <-tm.C():
		t.Fatal("reset timer fired at its old deadline")
	default:
	}
	c.Advance(time.Second)
	select {
	case at := <-tm.C():
		if want := t0.Add(119 * time.Second); !at.Equal(want) {
			t.Errorf("fired with %v, want %v", at, want)
		}
	default:
		t.Fatal("timer did not fire at its deadline")
	}
	if tm.Stop() {
		t.Error("Stop after firing = true")
	}
}

func TestTickerTicksEveryPeriodAndDropsMissedTicks(t *testing.T) {
	c := clock.NewFake(t0)
	tk := c.NewTicker(10 * time.Second)
	defer tk.Stop()
	c.Advance(10 * time.Second)
	if at := <-tk.C(); !at.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("first tick at %v", at)
	}
	c.Advance(35 * time.Second) // ticks at 20, 30, 40: only one is kept
	if at := <-tk.C(); !at.Equal(t0.Add(20 * time.Second)) {
		t.Errorf("kept tick at %v, want the first missed one (+20s)", at)
	}
	select {
	case at := <-tk.C():
		t.Errorf("a second buffered tick at %v", at)
	default:
	}
	tk.Reset(time.Second)
	c.Advance(time.Second)
	if at := <-tk.C(); !at.Equal(t0.Add(46 * time.Second)) {
		t.Errorf("tick after Reset at %v, want +46s", at)
	}
}

func TestSleepersWakeInOrderAndOnCancel(t *testing.T) {
	c := clock.NewFake(t0)
	woke := make(chan time.Duration, 3)
	for _, d := range []time.Duration{3 * time.Second, time.Second, 2 * time.Second} {
		go func() {
			if err := c.Sleep(context.Background(), d); err != nil {
				t.Error(err)
			}
			woke <- d
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.BlockUntil(ctx, 3); err != nil {
		t.Fatal(err)
	}
	for _, want := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second} {
		c.Advance(time.Second)
		if got := <-woke; got != want {
			t.Fatalf("woke the %v sleeper, want the %v one", got, want)
		}
	}

	cctx, ccancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Sleep(cctx, time.Hour) }()
	if err := c.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	ccancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Sleep = %v", err)
	}
	if n := c.Waiters(); n != 0 {
		t.Errorf("a cancelled sleeper is still waiting (%d waiters)", n)
	}
}

func TestAutoSleepMovesToTheDeadlineOnce(t *testing.T) {
	c := clock.NewFake(t0)
	fired := 0
	c.AfterFunc(time.Second, func() { fired++ })
	// Two sleepers that started together end together: the second does
	// not add its second on top of the first's.
	start := c.Now()
	_ = c.AutoSleep(context.Background(), time.Second)
	c.Set(start) // never backwards
	if got := c.Now().Sub(t0); got != time.Second {
		t.Fatalf("Now = +%v, want +1s", got)
	}
	if fired != 1 {
		t.Errorf("timer due at the deadline fired %d times", fired)
	}
}

func TestRealSleepHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := (clock.Real{}).Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on a cancelled context = %v", err)
	}
	if clock.Or(nil) != (clock.Real{}) {
		t.Error("Or(nil) is not the real clock")
	}
}

func TestStopAndResetDropAFiringNotReceived(t *testing.T) {
	c := clock.NewFake(t0)
	tm := c.NewTimer(time.Second)
	c.Advance(time.Second) // fired; nobody read it
	if tm.Reset(time.Minute) {
		t.Error("Reset of a fired timer = true")
	}
	select {
	case at := <-tm.C():
		t.Fatalf("read the stale firing at %v after Reset", at)
	default:
	}
	c.Advance(time.Minute)
	c.Advance(time.Second)
	tm.Stop()
	select {
	case at := <-tm.C():
		t.Fatalf("read the firing at %v after Stop", at)
	default:
	}

	tk := c.NewTicker(time.Second)
	c.Advance(time.Second)
	tk.Reset(time.Minute)
	select {
	case at := <-tk.C():
		t.Fatalf("read the stale tick at %v after Ticker.Reset", at)
	default:
	}
}
