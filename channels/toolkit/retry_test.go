package toolkit

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

func TestRetryBacksOffThenSucceeds(t *testing.T) {
	var slept []time.Duration
	var told []int
	calls := 0
	err := Retry(context.Background(), RetryOptions{
		Attempts: 4, Base: 100 * time.Millisecond,
		Sleep:   func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil },
		OnRetry: func(n int, _ time.Duration, _ error) { told = append(told, n) },
	}, func(context.Context) error {
		calls++
		if calls < 3 {
			return &core.Error{Kind: core.KindUnavailable, Msg: "502"}
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("err %v after %d calls, want success on the third", err, calls)
	}
	if want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}; !reflect.DeepEqual(slept, want) {
		t.Errorf("waits = %v, want %v", slept, want)
	}
	if !reflect.DeepEqual(told, []int{1, 2}) {
		t.Errorf("OnRetry attempts = %v", told)
	}
}

func TestRetryGivesUpAndKeepsTheCause(t *testing.T) {
	calls := 0
	cause := &core.Error{Kind: core.KindUnavailable, Msg: "HTTP 500"}
	err := Retry(context.Background(), RetryOptions{Attempts: 3, Base: time.Second, Max: 1500 * time.Millisecond,
		Sleep: func(context.Context, time.Duration) error { return nil }},
		func(context.Context) error { calls++; return cause })
	if calls != 3 || err == nil || !strings.Contains(err.Error(), "gave up after 3 attempts") || !errors.Is(err, cause) || core.ErrorKind(err) != core.KindUnavailable {
		t.Fatalf("after %d calls: %v (kind %v)", calls, err, core.ErrorKind(err))
	}
}

func TestRetryStopsOnPermanentErrorsAndContext(t *testing.T) {
	calls := 0
	perm := &core.Error{Kind: core.KindBadRequest, Msg: "HTTP 400"}
	err := Retry(context.Background(), RetryOptions{}, func(context.Context) error { calls++; return perm })
	if calls != 1 || err != perm {
		t.Errorf("a permanent error: %d calls, err %v; want one call and the error as is", calls, err)
	}

	// A wait the error asks for is taken when longer than the backoff.
	var slept []time.Duration
	limited := &core.Error{Kind: core.KindRateLimited, RetryAfter: 7 * time.Second}
	calls = 0
	_ = Retry(context.Background(), RetryOptions{Attempts: 2, Base: time.Second,
		Sleep: func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }},
		func(context.Context) error { calls++; return limited })
	if !reflect.DeepEqual(slept, []time.Duration{7 * time.Second}) {
		t.Errorf("waits = %v, want the 7s the error asked for", slept)
	}

	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	err = Retry(ctx, RetryOptions{Attempts: 5, Base: time.Hour}, func(context.Context) error {
		calls++
		cancel()
		return errors.New("connection reset")
	})
	if calls != 1 || err == nil || !strings.Contains(err.Error(), "connection reset") {
		t.Errorf("cancelled while failing: %d calls, err %v", calls, err)
	}
	calls = 0
	ctx2, cancel2 := context.WithCancel(context.Background())
	err = Retry(ctx2, RetryOptions{Attempts: 5, Sleep: func(ctx context.Context, _ time.Duration) error { cancel2(); return ctx.Err() }},
		func(context.Context) error { calls++; return errors.New("timeout talking to the server") })
	if calls != 1 || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "timeout talking") {
		t.Errorf("cancelled while waiting: %d calls, err %v", calls, err)
	}
}
