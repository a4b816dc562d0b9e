package routing

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
	"github.com/opentalon/opentalon/routing/provider"
)

// fakeProvider is a scriptable provider.Provider that records calls.
type fakeProvider struct {
	id string
	// fn answers a call; nil answers "ok from <model>".
	fn       func(cred provider.Credentials, req *provider.Request) (*provider.Response, error)
	mu       sync.Mutex
	calls    []fakeCall
	inflight atomic.Int32
	peak     atomic.Int32
	hold     chan struct{} // when set, each call waits for a receive
}

type fakeCall struct {
	Key, Model string
}

func (f *fakeProvider) ID() string { return f.id }

func (f *fakeProvider) Complete(ctx context.Context, cred provider.Credentials, req *provider.Request) (*provider.Response, error) {
	n := f.inflight.Add(1)
	defer f.inflight.Add(-1)
	for {
		p := f.peak.Load()
		if n <= p || f.peak.CompareAndSwap(p, n) {
			break
		}
	}
	f.mu.Lock()
	f.calls = append(f.calls, fakeCall{Key: cred.APIKey, Model: req.Model})
	f.mu.Unlock()
	if f.hold != nil {
		select {
		case <-f.hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if f.fn != nil {
		return f.fn(cred, req)
	}
	return &provider.Response{Text: "ok from " + req.Model, Usage: core.Usage{InputTokens: 1000, OutputTokens: 500}}, nil
}

func (f *fakeProvider) Stream(ctx context.Context, cred provider.Credentials, req *provider.Request, onText func(string)) (*provider.Response, error) {
	resp, err := f.Complete(ctx, cred, req)
	if err == nil {
		onText(resp.Text)
	}
	return resp, err
}

func (f *fakeProvider) Calls() []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeCall(nil), f.calls...)
}

// fakeClock is the repository's one fake clock (core/clock).
type fakeClock = clock.Fake

func newClock() *fakeClock { return clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) }

func userMsg(s string) provider.Request {
	return provider.Request{Messages: []core.ChatMessage{{Role: core.RoleUser, Content: s}}}
}

// testCatalog: cheap (90) > mid (50) > big (10), all on provider "p",
// plus "q/other" (40) on a second provider.
func testCatalog() []Model {
	return []Model{
		{Ref: "p/cheap", Alias: "cheap", Weight: 90, CostIn: 0.25, CostOut: 1.25, ContextWindow: 8000},
		{Ref: "p/mid", Alias: "mid", Weight: 50, CostIn: 3, CostOut: 15, ContextWindow: 200000},
		{Ref: "p/big", Alias: "big", Weight: 10, CostIn: 15, CostOut: 75, ContextWindow: 200000},
		{Ref: "q/other", Alias: "other", Weight: 40, CostIn: 2, CostOut: 8, ContextWindow: 128000},
	}
}
