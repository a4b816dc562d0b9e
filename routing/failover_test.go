package routing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

func threeProfiles(o *Options) {
	o.Profiles = map[string][]Profile{"p": {
		{ID: "p:a", Provider: "p", Key: "key-a"},
		{ID: "p:b", Provider: "p", Key: "key-b"},
		{ID: "p:c", Provider: "p", Key: "key-c"},
	}}
}

func keys(calls []fakeCall) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.Key
	}
	return out
}

func TestProfileRoundRobinOrder(t *testing.T) {
	r, p, _, _, clk := newTestRouter(t, threeProfiles)
	for range 4 {
		if _, err := r.Chat(context.Background(), Call{Req: userMsg("hi")}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
	}
	if got := fmt.Sprint(keys(p.Calls())); got != "[key-a key-b key-c key-a]" {
		t.Fatalf("keys used = %s", got)
	}
}

// TestSessionKeepsItsProfileUntilItCools: a conversation's calls go to
// the profile of its last answer, so two conversations keep two
// credentials; when that profile cools down the conversation moves on
// and keeps the new one.
func TestSessionKeepsItsProfileUntilItCools(t *testing.T) {
	r, p, _, _, clk := newTestRouter(t, threeProfiles)
	s1, s2 := &core.Session{ID: 1}, &core.Session{ID: 2}
	ask := func(s *core.Session) string {
		t.Helper()
		res, err := r.Chat(context.Background(), Call{Session: s, Req: userMsg("hi")})
		if err != nil {
			t.Fatal(err)
		}
		s.State.ActiveProfile = res.Profile // as the orchestrator keeps it
		clk.Advance(time.Second)
		return res.Profile
	}
	var got []string
	for range 3 {
		got = append(got, ask(s1), ask(s2))
	}
	if fmt.Sprint(got) != "[p:a p:b p:a p:b p:a p:b]" {
		t.Fatalf("profiles by call = %v; want each conversation to keep its first", got)
	}
	// s1's profile, p:a, is rate limited: s1 moves to the next (p:c,
	// the oldest used) and stays there; s2 keeps p:b.
	p.fn = func(c provider.Credentials, req *provider.Request) (*provider.Response, error) {
		if c.APIKey == "key-a" {
			return nil, &core.Error{Kind: core.KindRateLimited, Msg: "429"}
		}
		return &provider.Response{Text: "ok", Model: req.Model}, nil
	}
	got = got[:0]
	for range 2 {
		got = append(got, ask(s1), ask(s2))
	}
	if fmt.Sprint(got) != "[p:c p:b p:c p:b]" {
		t.Fatalf("profiles by call after p:a cooled = %v; want s1 on p:c, s2 still on p:b", got)
	}
}

// TestKeptProfileYieldsToAuthOrder: a conversation that moved to the
// backup while auth.order's first profile cooled down goes back to it
// once it is free; the kept profile only decides among equals.
func TestKeptProfileYieldsToAuthOrder(t *testing.T) {
	r, p, _, _, clk := newTestRouter(t, func(o *Options) {
		o.Profiles = map[string][]Profile{"p": {{ID: "p:a", Provider: "p", Key: "key-a"}, {ID: "p:b", Provider: "p", Key: "key-b"}}}
		o.AuthOrder = map[string][]string{"p": {"p:a", "p:b"}}
	})
	s := &core.Session{ID: 1}
	var got []string
	ask := func() {
		res, err := r.Chat(context.Background(), Call{Session: s, Req: userMsg("hi")})
		if err != nil {
			t.Fatal(err)
		}
		s.State.ActiveProfile = res.Profile
		got = append(got, res.Profile)
	}
	ask()
	p.fn = func(c provider.Credentials, req *provider.Request) (*provider.Response, error) {
		if c.APIKey == "key-a" {
			return nil, &core.Error{Kind: core.KindRateLimited, Msg: "429"}
		}
		return &provider.Response{Text: "ok", Model: req.Model}, nil
	}
	ask()
	p.fn = nil
	ask() // p:a still cools
	clk.Advance(2 * time.Hour)
	ask()
	if fmt.Sprint(got) != "[p:a p:b p:b p:a]" {
		t.Fatalf("profiles by call = %v; want back on auth.order's first once it is free", got)
	}
	// /model says a profile is kept only while the next call goes to it.
	if r.keeps("p/cheap", "p:b") || !r.keeps("p/cheap", "p:a") || r.keeps("q/other", "p:a") {
		t.Fatal("keeps: want p:a (auth.order's first, free) kept, not p:b, and no profile of p kept for q's model")
	}
}

func TestProfileOrderRules(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ps := []Profile{{ID: "a"}, {ID: "b"}, {ID: "c", OAuth: true}, {ID: "d"}}
	st := map[string]core.ProfileState{
		"a": {LastUsed: now.Add(-time.Minute)},
		"b": {LastUsed: now.Add(-time.Hour)},
		"d": {LastUsed: now.Add(-2 * time.Hour), CooldownUntil: now.Add(time.Minute)},
	}
	ids := func(ps []Profile) string {
		s := ""
		for _, p := range ps {
			s += p.ID
		}
		return s
	}
	for _, tc := range []struct {
		name         string
		pinned, kept string
		order        []string
		want         string
	}{
		{"oauth first, then oldest use, cooling last", "", "", nil, "cbad"},
		{"session pin first", "a", "", nil, "acbd"},
		{"auth.order", "", "", []string{"a", "b"}, "abcd"},
		{"cooling pin still last", "d", "", nil, "cbad"},
		{"kept before older uses", "", "a", nil, "cabd"},
		{"kept after auth.order", "", "b", []string{"a", "b"}, "abcd"},
		{"kept after OAuth", "", "a", nil, "cabd"},
		{"pin before kept", "b", "a", nil, "bcad"},
		{"cooling kept still last", "", "d", nil, "cbad"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ids(orderProfiles(ps, st, tc.pinned, tc.kept, tc.order, now)); got != tc.want {
				t.Fatalf("order = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestCooldownSteps(t *testing.T) {
	r, p, q, st, clk := newTestRouter(t, func(o *Options) {
		o.Profiles = map[string][]Profile{"p": {{ID: "p:a", Provider: "p", Key: "key-a"}}}
		o.Fallbacks = []string{"q/other"}
	})
	p.fn = func(provider.Credentials, *provider.Request) (*provider.Response, error) {
		return nil, &core.Error{Kind: core.KindRateLimited, Msg: "429"}
	}
	// Each failure cools p:a for 1, 5, 25, 60, 60 minutes; q/other answers.
	for i, want := range []time.Duration{time.Minute, 5 * time.Minute, 25 * time.Minute, time.Hour, time.Hour} {
		res, err := r.Chat(context.Background(), Call{Req: userMsg("hi")})
		if err != nil || res.Model != "q/other" {
			t.Fatalf("call %d: %v %v", i, res.Model, err)
		}
		s := r.Profiles("p")[0]
		if got := s.CooldownUntil.Sub(clk.Now()); got != want {
			t.Fatalf("failure %d: cooldown %v, want %v", i+1, got, want)
		}
		clk.Advance(want) // cooled down: the next call tries p:a again
	}
	if n := len(p.Calls()); n != 5 {
		t.Fatalf("p calls = %d", n)
	}
	if len(q.Calls()) != 5 {
		t.Fatalf("q calls = %d", len(q.Calls()))
	}
	// A success resets the failure count: the next failure cools 1 minute.
	p.fn = nil
	if res, err := r.Chat(context.Background(), Call{Req: userMsg("hi")}); err != nil || res.Model != "p/cheap" {
		t.Fatalf("recovery: %v %v", res.Model, err)
	}
	p.fn = func(provider.Credentials, *provider.Request) (*provider.Response, error) {
		return nil, &core.Error{Kind: core.KindTimeout}
	}
	// Timeouts of two different requests cool it (one request's do not).
	r.Chat(context.Background(), Call{Req: userMsg("hi")})
	r.Chat(context.Background(), Call{Req: userMsg("hi")})
	if got := r.Profiles("p")[0].CooldownUntil.Sub(clk.Now()); got != time.Minute {
		t.Fatalf("after reset: cooldown %v", got)
	}
	// The state is persisted, without the key.
	states, _ := st.ProfileStates(context.Background())
	var pa core.ProfileState
	for _, s := range states {
		if s.ID == "p:a" {
			pa = s
		}
	}
	if pa.Failures != 1 || pa.LastError != "timeout" || pa.Uses != 8 {
		t.Fatalf("stored state = %+v", states)
	}
}

func TestBillingLane(t *testing.T) {
	r, p, _, _, clk := newTestRouter(t, func(o *Options) {
		o.Profiles = map[string][]Profile{"p": {{ID: "p:a", Provider: "p", Key: "key-a"}}}
		o.Fallbacks = []string{"q/other"}
	})
	p.fn = func(provider.Credentials, *provider.Request) (*provider.Response, error) {
		return nil, &core.Error{Kind: core.KindBilling}
	}
	for i, want := range []time.Duration{5 * time.Hour, 10 * time.Hour, 20 * time.Hour, 24 * time.Hour, 24 * time.Hour} {
		r.Chat(context.Background(), Call{Req: userMsg("hi")})
		if got := r.Profiles("p")[0].CooldownUntil.Sub(clk.Now()); got != want {
			t.Fatalf("billing failure %d: cooldown %v, want %v", i+1, got, want)
		}
		clk.Advance(want)
	}
}

func TestRetryAfter(t *testing.T) {
	clk := newClock()
	for _, tc := range []struct {
		name   string
		header string
		want   time.Duration
	}{
		{"seconds", "600", 10 * time.Minute},
		{"http date", clk.Now().Add(2 * time.Hour).Format(http.TimeFormat), 2 * time.Hour},
		{"shorter than the step", "10", 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := providertest.NewOpenAI(t)
			srv.Enqueue(providertest.Script{Status: 429, Header: map[string]string{"Retry-After": tc.header}, Body: `{"error":{"message":"slow down","type":"rate_limit"}}`})
			prov := provider.NewOpenAI(provider.Options{ID: "p", BaseURL: srv.BaseURL(), Now: clk.Now})
			r, err := New(Options{
				Providers: map[string]provider.Provider{"p": prov},
				Catalog:   []Model{{Ref: "p/m", Weight: 50}},
				Profiles:  map[string][]Profile{"p": {{ID: "p:a", Provider: "p", Key: "sk-a"}}},
				Store:     NewMemStore(), Now: clk.Now,
			})
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.Chat(context.Background(), Call{Req: userMsg("hi")})
			if core.ErrorKind(err) != core.KindRateLimited {
				t.Fatalf("err = %v", err)
			}
			if got := r.Profiles("p")[0].CooldownUntil.Sub(clk.Now()); got != tc.want {
				t.Fatalf("cooldown = %v, want %v", got, tc.want)
			}
			if got := core.RetryAfter(err); got != tc.want {
				t.Fatalf("error RetryAfter = %v, want %v", got, tc.want)
			}
			if srv.Count() != 1 {
				t.Fatalf("requests = %d", srv.Count())
			}
		})
	}
}

// TestShortRetryAfterClimbsTheLadder (issue 25, finding 12): a server
// that answers every call with 429 and "Retry-After: 1" is not called
// every second: its Retry-After starts the cooldown ladder (× the
// multiplier per failure in a row), and a success resets it.
func TestShortRetryAfterClimbsTheLadder(t *testing.T) {
	clk := newClock()
	srv := providertest.NewOpenAI(t)
	var limited atomic.Bool
	limited.Store(true)
	srv.SetReply(func(r providertest.Received) providertest.Script {
		if limited.Load() {
			return providertest.Script{Status: 429, Header: map[string]string{"Retry-After": "1"}, Body: `{"error":{"message":"slow down","type":"rate_limit"}}`}
		}
		return providertest.Echo(r)
	})
	r := srvRouter(t, clk, srv, 0, "sk-a")
	for i, want := range []time.Duration{time.Second, 5 * time.Second, 25 * time.Second, 125 * time.Second, 625 * time.Second, 3125 * time.Second, time.Hour, time.Hour} {
		_, err := r.Chat(context.Background(), Call{Req: userMsg("hi")})
		if core.ErrorKind(err) != core.KindRateLimited {
			t.Fatalf("call %d: err = %v", i, err)
		}
		if got := core.RetryAfter(err); got != want {
			t.Fatalf("429 #%d in a row: retry after %v, want %v", i+1, got, want)
		}
		clk.Advance(want)
	}
	if n := srv.Count(); n != 8 {
		t.Fatalf("requests = %d, want one per cooldown", n)
	}
	limited.Store(false)
	if _, err := r.Chat(context.Background(), Call{Req: userMsg("hi")}); err != nil {
		t.Fatal(err)
	}
	limited.Store(true)
	_, err := r.Chat(context.Background(), Call{Req: userMsg("hi")})
	if got := core.RetryAfter(err); got != time.Second {
		t.Fatalf("after a success: retry after %v, want the server's 1s again", got)
	}
}

// TestConcurrentRateLimitsAreOneStep: a rate limit fails every call in
// flight at once; that is one event, one step of the ladder, not one
// per call (five concurrent 429s with "Retry-After: 1" would otherwise
// rest the only credential for 625 s). A call made after the cooldown
// that fails again climbs on.
func TestConcurrentRateLimitsAreOneStep(t *testing.T) {
	clk := newClock()
	srv := providertest.NewOpenAI(t)
	const inFlight = 5
	r := srvRouter(t, clk, srv, inFlight, "sk-a")
	errs := failAtOnce(t, clk, srv, r, inFlight, providertest.Script{Status: 429, Header: map[string]string{"Retry-After": "1"}, Body: `{"error":{"message":"slow down","type":"rate_limit"}}`})
	for _, err := range errs {
		if core.ErrorKind(err) != core.KindRateLimited {
			t.Fatalf("err = %v", err)
		}
	}
	st := r.Profiles("p")[0]
	if until := st.CooldownUntil.Sub(clk.Now()); until != time.Second {
		t.Fatalf("%d concurrent 429s cool the credential for %v, want the server's 1s (one step)", inFlight, until)
	}
	clk.Advance(time.Second)
	_, err := r.Chat(context.Background(), Call{Req: userMsg("hi")})
	if got := core.RetryAfter(err); got != 5*time.Second {
		t.Fatalf("the next 429, after the cooldown: retry after %v, want 5s (the ladder's second step)", got)
	}
}

// failAtOnce makes n calls to r at once, which srv holds until all have
// arrived and then answers with fail (a later call gets fail at once);
// the clock moves on 100 ms in between. It returns their errors.
func failAtOnce(t *testing.T, clk *fakeClock, srv *providertest.Server, r *Router, n int, fail providertest.Script) []error {
	t.Helper()
	var arrived sync.WaitGroup
	arrived.Add(n)
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // before the server's Close, which waits for its handlers
	var first atomic.Int32
	srv.SetReply(func(providertest.Received) providertest.Script {
		if first.Add(1) <= int32(n) {
			arrived.Done()
			<-release
		}
		return fail
	})
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := r.Chat(context.Background(), Call{Req: userMsg("hi")})
			errs <- err
		}()
	}
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	select {
	case <-all:
	case <-time.After(30 * time.Second):
		t.Fatalf("%d calls never were under way at once", n)
	}
	// The calls are all under way; the clock moves on before they fail.
	clk.Advance(100 * time.Millisecond)
	free()
	out := make([]error, n)
	for i := range out {
		out[i] = <-errs
	}
	return out
}

// TestProbeFollowsTheServersRetryAfter: a credential the ladder rests far
// longer than its server asked (a second 429 with "Retry-After: 10" rests
// it 50 s) is probed as often as the server asked, so a provider back
// after 10 s answers then, not when the cooldown or cooldowns.initial
// ends.
func TestProbeFollowsTheServersRetryAfter(t *testing.T) {
	clk := newClock()
	srv, limited := limitedServer(t, "10")
	r := srvRouter(t, clk, srv, 0, "sk-a")
	// Two 429s in a row: the ladder rests it 50 s; a probe 10 s later
	// that finds it still limited leaves the 40 s that remain (not the
	// ladder's next 250 s), and the next probe is due after the
	// server's 10 s again.
	for _, want := range []time.Duration{10 * time.Second, 50 * time.Second, 40 * time.Second} {
		_, err := r.Chat(context.Background(), Call{Req: userMsg("hi")})
		if got := core.RetryAfter(err); got != want {
			t.Fatalf("429: retry after %v, want %v", got, want)
		}
		if want == 40*time.Second && core.RecheckAfter(err) != 10*time.Second {
			t.Fatalf("after the refused probe: recheck after %v, want the server's 10s", core.RecheckAfter(err))
		}
		clk.Advance(10 * time.Second)
	}
	limited.Store(false)
	if _, err := r.Chat(context.Background(), Call{Req: userMsg("hi")}); err != nil {
		t.Fatalf("10 s after the last 429, with the provider back: %v; want it answered", err)
	}
}

// TestProbesFollowTheServerAfterARestart: the server's Retry-After is
// kept with the cooldown it set, so a restarted router (or another
// replica) probes as often as the server asked too. Kept in memory only,
// it was forgotten by a restart, and a soak killed every few seconds
// probed once per cooldowns.initial (a minute) while the ladder rested
// the credential for minutes: its backlog waited 112 s after the
// provider was back instead of 25.
func TestProbesFollowTheServerAfterARestart(t *testing.T) {
	clk := newClock()
	srv, limited := limitedServer(t, "10")
	st := NewMemStore()
	first := srvRouterOn(t, clk, srv, st, 0, nil, "sk-a")
	// Two 429s in a row: the ladder rests the credential 50 s.
	for _, want := range []time.Duration{10 * time.Second, 50 * time.Second} {
		_, err := first.Chat(context.Background(), Call{Req: userMsg("hi")})
		if got := core.RetryAfter(err); got != want {
			t.Fatalf("429: retry after %v, want %v", got, want)
		}
		clk.Advance(10 * time.Second)
	}
	restarted := srvRouterOn(t, clk, srv, st, 0, nil, "sk-a")
	limited.Store(false)
	if _, err := restarted.Chat(context.Background(), Call{Req: userMsg("hi")}); err != nil {
		t.Fatalf("after a restart, 10 s after the last 429 (asking 10 s), with the provider back: %v; want it probed and answered", err)
	}
}

// TestCoolingErrorSaysWhenTheNextProbeIs: while a credential cools
// down, the router's error says when it will next be probed (Recheck),
// sooner than the cooldown's end (RetryAfter): a caller coming back then
// finds out whether the provider is back.
func TestCoolingErrorSaysWhenTheNextProbeIs(t *testing.T) {
	clk := newClock()
	srv := providertest.NewOpenAI(t)
	srv.SetReply(func(providertest.Received) providertest.Script { return rateLimited("10") })
	r := srvRouter(t, clk, srv, 0, "sk-a")
	// A 429, then the trial after its cooldown another: the ladder rests
	// the credential 50 s, probed every 10 s (the server's Retry-After).
	r.Chat(context.Background(), Call{Req: userMsg("hi")})
	clk.Advance(10 * time.Second)
	r.Chat(context.Background(), Call{Req: userMsg("hi")})
	clk.Advance(3 * time.Second)
	_, err := r.Chat(context.Background(), Call{Req: userMsg("hi")})
	if got, want := core.RetryAfter(err), 47*time.Second; got != want {
		t.Fatalf("retry after %v; want the cooldown's end in %v (%v)", got, want, err)
	}
	if got, want := core.RecheckAfter(err), 7*time.Second; got != want {
		t.Fatalf("recheck %v; want the next probe in %v", got, want)
	}
}

// TestAFixedKeyIsTriedAfterARestart: a credential the provider refused
// (401) cools down, and its cooldown is stored; an operator who fixes the
// key and restarts got "the AI provider refused my credentials" without a
// call for the rest of the cooldown. A router that finds a credential
// cooling for a refusal when it starts tries it once at once; if it is
// still refused its cooldown stands (no step). A rate limit's cooldown is
// not tried early: the server asked for the wait.
func TestAFixedKeyIsTriedAfterARestart(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    int
		fixed     bool
		wantCalls int
		wantErr   core.Kind
	}{
		{"refused, fixed", 401, true, 1, core.KindUnknown},
		{"refused, still refused", 401, false, 1, core.KindAuth},
		{"rate limited", 429, true, 0, core.KindRateLimited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			srv := providertest.NewOpenAI(t)
			var fixed atomic.Bool
			srv.SetReply(func(r providertest.Received) providertest.Script {
				if fixed.Load() {
					return providertest.Echo(r)
				}
				return providertest.Script{Status: tc.status, Body: `{"error":{"message":"no"}}`}
			})
			st := NewMemStore()
			first := srvRouterOn(t, clk, srv, st, 0, nil, "sk-a")
			if _, err := first.Chat(context.Background(), Call{Req: userMsg("hi")}); err == nil {
				t.Fatal("the refused call succeeded")
			}
			fixed.Store(tc.fixed)
			clk.Advance(5 * time.Second)
			calls := srv.Count()
			restarted := srvRouterOn(t, clk, srv, st, 0, nil, "sk-a")
			_, err := restarted.Chat(context.Background(), Call{Req: userMsg("hi")})
			if got := srv.Count() - calls; got != tc.wantCalls {
				t.Fatalf("calls after the restart = %d; want %d (%v)", got, tc.wantCalls, err)
			}
			if tc.wantErr == core.KindUnknown && err != nil || tc.wantErr != core.KindUnknown && core.ErrorKind(err) != tc.wantErr {
				t.Fatalf("after the restart: %v; want kind %v", err, tc.wantErr)
			}
			if tc.name == "refused, still refused" {
				states, _ := st.ProfileStates(context.Background())
				if len(states) != 1 || states[0].Failures != 1 {
					t.Fatalf("state = %+v; want the cooldown standing without another step", states)
				}
				calls := srv.Count()
				restarted.Chat(context.Background(), Call{Req: userMsg("hi")})
				if srv.Count() != calls {
					t.Fatal("a second call tried the refused credential again; want it cooling")
				}
			}
		})
	}
}

// TestASuccessStartedBeforeARateLimitLeavesItsCooldown (found by a soak):
// three calls in flight, one gets a 429 and cools the credential, and one
// that started before it succeeds a moment later. That success cleared
// the cooldown, so the next call found no cooldown and failed as a rate
// limit without a wait ("try again later"), which the gateway counts as
// an attempt. Now a call started before the credential's latest failure
// is older news: the cooldown stands.
func TestASuccessStartedBeforeARateLimitLeavesItsCooldown(t *testing.T) {
	clk := newClock()
	srv := providertest.NewOpenAI(t)
	arrived, release := make(chan struct{}), make(chan struct{})
	var n atomic.Int32
	srv.SetReply(func(r providertest.Received) providertest.Script {
		switch n.Add(1) {
		case 1: // in flight when the limit begins
			close(arrived)
			<-release
			return providertest.Echo(r)
		case 2:
			return providertest.Script{Status: 429, Header: map[string]string{"Retry-After": "4"}, Body: `{"error":{"message":"slow down","type":"rate_limit"}}`}
		}
		return providertest.Echo(r)
	})
	r := srvRouter(t, clk, srv, 4, "sk-a")
	first := make(chan error, 1)
	go func() {
		_, err := r.Chat(context.Background(), Call{Req: userMsg("slow")})
		first <- err
	}()
	<-arrived
	clk.Advance(100 * time.Millisecond)
	if _, err := r.Chat(context.Background(), Call{Req: userMsg("hi")}); core.ErrorKind(err) != core.KindRateLimited {
		t.Fatalf("second call: %v; want the 429", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the call in flight: %v", err)
	}
	calls := srv.Count()
	_, err := r.Chat(context.Background(), Call{Req: userMsg("hi")})
	if core.ErrorKind(err) != core.KindRateLimited || core.RetryAfter(err) <= 0 || srv.Count() != calls {
		t.Fatalf("after the success of a call older than the 429: %v (retry after %v, %d calls); want the cooldown standing, no call", err, core.RetryAfter(err), srv.Count()-calls)
	}
}

// TestACallWaitingForItsSlotIsNotSentAfterA429 (found by a soak): with
// one call at a time (a local provider), calls that picked the credential
// and waited for the slot were all sent after the 429 that cooled it. Now
// a call whose credential failed while it waited is not sent: it fails as
// the cooldown, with its wait.
func TestACallWaitingForItsSlotIsNotSentAfterA429(t *testing.T) {
	clk := newClock()
	srv := providertest.NewOpenAI(t)
	arrived, release := make(chan struct{}), make(chan struct{})
	var n atomic.Int32
	srv.SetReply(func(r providertest.Received) providertest.Script {
		if n.Add(1) == 1 {
			close(arrived)
			<-release
			return rateLimited("10")
		}
		return providertest.Echo(r)
	})
	r := srvRouter(t, clk, srv, 1, "sk-a") // one cloud call at a time
	first := make(chan error, 1)
	go func() {
		_, err := r.Chat(context.Background(), Call{Req: userMsg("first")})
		first <- err
	}()
	<-arrived
	second := make(chan error, 1)
	go func() {
		_, err := r.Chat(context.Background(), Call{Req: userMsg("second")})
		second <- err
	}()
	// The second call has picked the credential (its use is counted)
	// and waits for the slot.
	for deadline := time.Now().Add(10 * time.Second); r.Profiles("p")[0].Uses < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second call never picked the credential")
		}
	}
	clk.Advance(time.Millisecond)
	close(release)
	if err := <-first; core.ErrorKind(err) != core.KindRateLimited {
		t.Fatalf("first call: %v; want the 429", err)
	}
	err := <-second
	if core.ErrorKind(err) != core.KindRateLimited || core.RetryAfter(err) <= 0 || srv.Count() != 1 {
		t.Fatalf("the call that waited for its slot: %v (retry after %v); the server got %d calls; want it not sent, told to wait", err, core.RetryAfter(err), srv.Count())
	}
}

// TestOnBackIsToldWhenAProviderAnswersAgain: a success after a
// credential's failure (a 429's cooldown, a 401) tells Options.OnBack,
// which wakes the messages waiting for a cooling credential; a success on
// a healthy credential does not, nor one after an outage (a 500), whose
// waits keep their backoff.
func TestOnBackIsToldWhenAProviderAnswersAgain(t *testing.T) {
	for _, status := range []int{429, 401, 500} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			clk := newClock()
			srv := providertest.NewOpenAI(t)
			var failing atomic.Bool
			failing.Store(true)
			srv.SetReply(func(r providertest.Received) providertest.Script {
				if failing.Load() {
					return providertest.Script{Status: status, Header: map[string]string{"Retry-After": "5"}, Body: `{"error":{"message":"not now"}}`}
				}
				return providertest.Echo(r)
			})
			back := make(chan string, 4)
			r := srvRouterOn(t, clk, srv, NewMemStore(), 0, func(o *Options) { o.OnBack = func(p string) { back <- p } }, "sk-a")
			if _, err := r.Chat(context.Background(), Call{Req: userMsg("hi")}); err == nil {
				t.Fatal("the failing call succeeded")
			}
			failing.Store(false)
			clk.Advance(10 * time.Second)
			if _, err := r.Chat(context.Background(), Call{Req: userMsg("hi")}); err != nil {
				t.Fatalf("with the provider back: %v", err)
			}
			select {
			case p := <-back:
				if p != "p" || status == 500 {
					t.Fatalf("OnBack(%q) after a %d; want p, and none after an outage", p, status)
				}
			case <-time.After(time.Second):
				if status != 500 {
					t.Fatal("OnBack was not called after the provider answered again")
				}
			}
			if _, err := r.Chat(context.Background(), Call{Req: userMsg("hi")}); err != nil {
				t.Fatal(err)
			}
			select {
			case p := <-back:
				t.Fatalf("OnBack(%q) after a success on a healthy credential", p)
			case <-time.After(50 * time.Millisecond):
			}
		})
	}
}

// TestOneCallFindsOutWhetherACredentialIsBack: when a credential's
// cooldown ends, one call at a time tries it until one succeeds; the
// others wait (a transient error saying when to come back) instead of
// hitting it all at once — 12 waiting messages did, found the provider
// still limiting and climbed its ladder together.
func TestOneCallFindsOutWhetherACredentialIsBack(t *testing.T) {
	clk := newClock()
	srv := providertest.NewOpenAI(t)
	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	var n atomic.Int32
	srv.SetReply(func(r providertest.Received) providertest.Script {
		switch n.Add(1) {
		case 1:
			return providertest.Script{Status: 429, Header: map[string]string{"Retry-After": "1"}, Body: `{"error":{"message":"slow down","type":"rate_limit"}}`}
		case 2:
			close(arrived)
			<-release
		}
		return providertest.Echo(r)
	})
	r := srvRouter(t, clk, srv, 4, "sk-a")
	if _, err := r.Chat(context.Background(), Call{Req: userMsg("hi")}); core.ErrorKind(err) != core.KindRateLimited {
		t.Fatalf("first call: %v; want the 429", err)
	}
	clk.Advance(time.Second)
	first := make(chan error, 1)
	go func() {
		_, err := r.Chat(context.Background(), Call{Req: userMsg("hi")})
		first <- err
	}()
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the call after the cooldown never reached the server")
	}
	_, err := r.Chat(context.Background(), Call{Req: userMsg("hi")})
	if core.ErrorKind(err) != core.KindRateLimited || !core.Transient(err) || core.RetryAfter(err) <= 0 || srv.Count() != 2 {
		t.Fatalf("a second call while the first finds out: %v (retry after %v), %d requests; want it told to wait, not sent", err, core.RetryAfter(err), srv.Count())
	}
	free()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if _, err := r.Chat(context.Background(), Call{Req: userMsg("hi")}); err != nil || srv.Count() != 3 {
		t.Fatalf("after the success: %v, %d requests; want the call sent and answered", err, srv.Count())
	}
}

// TestIdleCredentialStartsTheLadderOver: a credential whose last cooldown
// ended longer ago than it lasted, with no call since (the conversations
// kept another credential), starts its ladder over at its next failure:
// a single 429 asking for 1 s rested it for the ladder's fourth step.
func TestIdleCredentialStartsTheLadderOver(t *testing.T) {
	clk := newClock()
	srv := providertest.NewOpenAI(t)
	srv.SetReply(func(r providertest.Received) providertest.Script {
		return providertest.Script{Status: 429, Header: map[string]string{"Retry-After": "1"}, Body: `{"error":{"message":"slow down","type":"rate_limit"}}`}
	})
	r := srvRouter(t, clk, srv, 0, "sk-a")
	for _, want := range []time.Duration{time.Second, 5 * time.Second, 25 * time.Second} {
		_, err := r.Chat(context.Background(), Call{Req: userMsg("hi")})
		if got := core.RetryAfter(err); got != want {
			t.Fatalf("429 in a row: retry after %v, want %v", got, want)
		}
		clk.Advance(want)
	}
	// Right after the cooldown the ladder climbs on; an hour later it
	// starts over.
	_, err := r.Chat(context.Background(), Call{Req: userMsg("hi")})
	if got := core.RetryAfter(err); got != 125*time.Second {
		t.Fatalf("a 429 right after the cooldown: retry after %v, want 125s", got)
	}
	clk.Advance(time.Hour)
	_, err = r.Chat(context.Background(), Call{Req: userMsg("hi")})
	if got := core.RetryAfter(err); got != time.Second {
		t.Fatalf("a 429 an hour after the last cooldown ended: retry after %v, want the server's 1s (a new episode)", got)
	}
}

// TestShortRetryAfterClimbsWhenRetriedLate: the gateway comes back to a
// rate-limited message no sooner than its queue backoff (2 s), so with
// "Retry-After: 1" every call comes a moment after the 1 s cooldown ended.
// That is the same episode, not an idle credential: the ladder climbs
// (1, 5, 25 s …) instead of starting over at 1 s on every call (which
// called the provider every 2 s for the whole of queue.max_wait).
func TestShortRetryAfterClimbsWhenRetriedLate(t *testing.T) {
	clk := newClock()
	srv := providertest.NewOpenAI(t)
	srv.SetReply(func(r providertest.Received) providertest.Script {
		return providertest.Script{Status: 429, Header: map[string]string{"Retry-After": "1"}, Body: `{"error":{"message":"slow down","type":"rate_limit"}}`}
	})
	r := srvRouter(t, clk, srv, 0, "sk-a")
	for i, want := range []time.Duration{time.Second, 5 * time.Second, 25 * time.Second, 125 * time.Second} {
		_, err := r.Chat(context.Background(), Call{Req: userMsg("hi")})
		if got := core.RetryAfter(err); core.ErrorKind(err) != core.KindRateLimited || got != want {
			t.Fatalf("429 #%d in a row, each call 2 s after the last: err %v, retry after %v, want %v", i+1, err, got, want)
		}
		clk.Advance(want + 2*time.Second)
	}
}

// TestRetryAfterOneForAMinute: a provider answering every call with 429
// and "Retry-After: 1", called the way a waiting message calls it (at
// the next probe the error names, else when its cooldown ends, and never
// sooner than the queue's 2 s backoff): the probes come every 5 s at
// most, no call slips in between them, and the ladder climbs only when a
// cooldown ends — after a minute it rests the credential minutes, not
// the hour it reached when every refused probe cut the cooldown to the
// server's second and the call after it climbed again.
func TestRetryAfterOneForAMinute(t *testing.T) {
	clk := newClock()
	srv := providertest.NewOpenAI(t)
	srv.SetReply(func(r providertest.Received) providertest.Script {
		return providertest.Script{Status: 429, Header: map[string]string{"Retry-After": "1"}, Body: `{"error":{"message":"slow down","type":"rate_limit"}}`}
	})
	r := srvRouter(t, clk, srv, 0, "sk-a")
	start := clk.Now()
	var err error
	for clk.Now().Sub(start) < time.Minute {
		_, err = r.Chat(context.Background(), Call{Req: userMsg("hi")})
		wait := core.RetryAfter(err)
		if rc := core.RecheckAfter(err); rc > 0 && rc < wait {
			wait = rc
		}
		clk.Advance(max(wait, 2*time.Second))
	}
	if n := srv.Count(); n > 13 {
		t.Errorf("%d calls in a minute; want at most one per 5 s probe (and the first two)", n)
	}
	if got := core.RetryAfter(err); got > 5*time.Minute {
		t.Errorf("after a minute the credential rests %v; want the ladder's few minutes, not an hour", got)
	}
}

// TestOutageWaitIsNotAnotherCredentialsCooldown: when a credential that
// is not cooling fails with an outage, the caller comes back after the
// outage's wait, not when another credential's long cooldown ends.
func TestOutageWaitIsNotAnotherCredentialsCooldown(t *testing.T) {
	clk := newClock()
	srv := providertest.NewOpenAI(t)
	var down atomic.Bool
	srv.SetReply(func(r providertest.Received) providertest.Script {
		switch {
		case down.Load():
			return providertest.Script{Status: 502, Body: `{"error":{"message":"bad gateway"}}`}
		case r.APIKey == "sk-a":
			return providertest.Script{Status: 429, Header: map[string]string{"Retry-After": "3000"}, Body: `{"error":{"message":"slow down","type":"rate_limit"}}`}
		}
		return providertest.Echo(r)
	})
	r := srvRouter(t, clk, srv, 0, "sk-a", "sk-b")
	for range 2 {
		if _, err := r.Chat(context.Background(), Call{Req: userMsg("hi")}); err != nil {
			t.Fatal(err)
		}
	}
	if st := r.Profiles("p")[0]; st.Profile.ID != "p:a" || !st.CooldownUntil.After(clk.Now().Add(time.Hour/2)) {
		t.Fatalf("profile %s cools until %v; want p:a cooling for 50 minutes", st.Profile.ID, st.CooldownUntil)
	}
	down.Store(true)
	_, err := r.Chat(context.Background(), Call{Req: userMsg("hi")})
	if got := core.RetryAfter(err); core.ErrorKind(err) != core.KindUnavailable || got != 2*time.Second {
		t.Fatalf("err = %v, retry after %v; want the outage's 2s, not p:a's cooldown", err, got)
	}
}

// TestConcurrentOutagesAreOneEvent: an outage fails every call in flight
// at once; that is one outage, not one per call (30 conversations failing
// in a 2-second outage made the next wait a minute).
func TestConcurrentOutagesAreOneEvent(t *testing.T) {
	clk := newClock()
	srv := providertest.NewOpenAI(t)
	const inFlight = 5
	r := srvRouter(t, clk, srv, inFlight, "sk-a")
	for _, err := range failAtOnce(t, clk, srv, r, inFlight, providertest.Script{Status: 502, Body: `{"error":{"message":"bad gateway"}}`}) {
		if got := core.RetryAfter(err); core.ErrorKind(err) != core.KindUnavailable || got != 2*time.Second {
			t.Fatalf("err = %v, retry after %v; want every call told 2s (one outage)", err, got)
		}
	}
}

// TestFailuresWithinAnOutagesWaitAreThatOutage: other conversations'
// calls failing before the wait an outage told is over are the same
// outage; a call after the wait that fails again is the next one.
func TestFailuresWithinAnOutagesWaitAreThatOutage(t *testing.T) {
	r, p, _, _, clk := newTestRouter(t, func(o *Options) { o.Cooldowns.Initial = 30 * time.Second })
	p.fn = func(_ provider.Credentials, req *provider.Request) (*provider.Response, error) {
		return nil, &core.Error{Kind: core.KindUnavailable, Msg: "provider p: HTTP 500"}
	}
	call := func(chat string) time.Duration {
		conv := core.ConversationKey{Channel: "telegram", Chat: chat}
		_, err := r.Chat(context.Background(), Call{Session: &core.Session{ID: 1, Conversation: conv, ModelPin: "p/cheap"}, Conversation: conv, Req: userMsg("hi")})
		return core.RetryAfter(err)
	}
	for i, step := range []struct {
		chat    string
		advance time.Duration
		want    time.Duration
	}{
		{"1", 0, 2 * time.Second},
		{"2", 500 * time.Millisecond, 2 * time.Second}, // within the first outage's 2s
		{"3", 500 * time.Millisecond, 2 * time.Second},
		{"1", 2 * time.Second, 4 * time.Second}, // after the wait: the next outage
		{"2", time.Second, 4 * time.Second},
	} {
		clk.Advance(step.advance)
		if got := call(step.chat); got != step.want {
			t.Fatalf("call %d (chat %s): retry after %v, want %v", i+1, step.chat, got, step.want)
		}
	}
}

// TestOutageSaysWhenToComeBack (issue 25, finding 13): when every model
// of the chain fails with a 5xx or a timeout, the error says when to try
// again like a rate limit does — 2 s after the first outage, doubling per
// outage in a row up to auth.cooldowns.initial — so the caller waits with
// backoff instead of giving up; a success starts over.
func TestOutageSaysWhenToComeBack(t *testing.T) {
	for _, kind := range []core.Kind{core.KindUnavailable, core.KindTimeout} {
		t.Run(kind.String(), func(t *testing.T) {
			r, p, _, _, clk := newTestRouter(t, func(o *Options) { o.Cooldowns.Initial = 30 * time.Second })
			down := true
			p.fn = func(_ provider.Credentials, req *provider.Request) (*provider.Response, error) {
				if down {
					return nil, &core.Error{Kind: kind, Msg: "provider p: HTTP 500"}
				}
				return &provider.Response{Text: "ok"}, nil
			}
			// One conversation's request (its timeouts do not cool the
			// credential every conversation shares).
			conv := core.ConversationKey{Channel: "telegram", Chat: "1"}
			call := Call{Session: &core.Session{ID: 1, Conversation: conv, ModelPin: "p/cheap"}, Conversation: conv, Req: userMsg("hi")}
			for i, want := range []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second} {
				_, err := r.Chat(context.Background(), call)
				if core.ErrorKind(err) != kind || !core.Transient(err) {
					t.Fatalf("outage %d: err = %v", i+1, err)
				}
				if got := core.RetryAfter(err); got != want {
					t.Fatalf("outage %d in a row: retry after %v, want %v", i+1, got, want)
				}
				clk.Advance(want)
			}
			down = false
			if _, err := r.Chat(context.Background(), call); err != nil {
				t.Fatal(err)
			}
			down = true
			if _, err := r.Chat(context.Background(), call); core.RetryAfter(err) != 2*time.Second {
				t.Fatalf("after a success: retry after %v, want 2s", core.RetryAfter(err))
			}
		})
	}
}

// An answer that arrives garbled is asked for again once, on the same
// model and credential, before the model is set aside.
func TestGarbledAnswerIsAskedOnceMore(t *testing.T) {
	r, p, _, _, _ := newTestRouter(t, threeProfiles)
	garbled := 1
	p.fn = func(_ provider.Credentials, _ *provider.Request) (*provider.Response, error) {
		if garbled > 0 {
			garbled--
			return nil, &core.Error{Kind: core.KindMalformed, Msg: "provider p: the stream ended without a finish"}
		}
		return &provider.Response{Text: "ok"}, nil
	}
	conv := core.ConversationKey{Channel: "telegram", Chat: "1"}
	call := Call{Session: &core.Session{ID: 1, Conversation: conv, ModelPin: "p/cheap"}, Conversation: conv, Req: userMsg("hi")}
	res, err := r.Chat(context.Background(), call)
	if err != nil || res.Text != "ok" {
		t.Fatalf("got %+v, %v; want the answer asked for again", res, err)
	}
	if ks := keys(p.Calls()); len(ks) != 2 || ks[0] != ks[1] {
		t.Fatalf("keys used = %v; want the same credential asked twice", ks)
	}
	// Garbled twice: asked once more only, then the model is set aside
	// (what answers next is failover's choice).
	garbled = 2
	before := len(p.Calls())
	r.Chat(context.Background(), call)
	calls := p.Calls()[before:]
	if len(calls) < 2 || calls[1] != calls[0] {
		t.Fatalf("calls after two garbled answers = %+v; want the same one asked once more", calls)
	}
	if len(calls) > 2 && calls[2] == calls[0] {
		t.Fatalf("calls after two garbled answers = %+v; want no third ask of the same model and credential", calls)
	}
}

func TestFallbackWhenEveryProfileCools(t *testing.T) {
	r, p, q, _, _ := newTestRouter(t, func(o *Options) {
		threeProfiles(o)
		o.Fallbacks = []string{"q/other", "p/big"}
	})
	p.fn = func(cred provider.Credentials, _ *provider.Request) (*provider.Response, error) {
		return nil, &core.Error{Kind: core.KindAuth, Msg: "401 for " + cred.APIKey}
	}
	res, err := r.Chat(context.Background(), Call{Req: userMsg("hi")})
	if err != nil || res.Model != "q/other" {
		t.Fatalf("got %q, %v", res.Model, err)
	}
	if got := fmt.Sprint(keys(p.Calls())); got != "[key-a key-b key-c]" {
		t.Fatalf("stage 1 rotation = %s", got)
	}
	if len(q.Calls()) != 1 {
		t.Fatalf("q calls = %d", len(q.Calls()))
	}
	// The next call goes straight to the fallback: no call to a cooling profile.
	if res, err := r.Chat(context.Background(), Call{Req: userMsg("hi")}); err != nil || res.Model != "q/other" {
		t.Fatalf("second: %q %v", res.Model, err)
	}
	if len(p.Calls()) != 3 {
		t.Fatalf("cooling profiles were called: %v", keys(p.Calls()))
	}
}

func TestChainExhaustedSaysWhen(t *testing.T) {
	r, p, q, _, _ := newTestRouter(t, func(o *Options) { o.Fallbacks = []string{"q/other"} })
	fail := func(provider.Credentials, *provider.Request) (*provider.Response, error) {
		return nil, &core.Error{Kind: core.KindRateLimited, RetryAfter: 3 * time.Minute}
	}
	p.fn, q.fn = fail, fail
	_, err := r.Chat(context.Background(), Call{Req: userMsg("hi")})
	if core.ErrorKind(err) != core.KindRateLimited || core.RetryAfter(err) != 3*time.Minute {
		t.Fatalf("err = %v (retry after %v)", err, core.RetryAfter(err))
	}
	if msg := core.UserMessage(err); msg == "" || !strings.Contains(msg, "3 minutes") {
		t.Fatalf("user message = %q", msg)
	}
}

func TestProbeOnlyForCoolingProfile(t *testing.T) {
	r, p, _, _, clk := newTestRouter(t, func(o *Options) {
		o.Profiles = map[string][]Profile{"p": {{ID: "p:a", Provider: "p", Key: "key-a"}}}
	})
	p.fn = func(provider.Credentials, *provider.Request) (*provider.Response, error) {
		return nil, &core.Error{Kind: core.KindRateLimited}
	}
	// Fail three times: cooldown 1m, then 5m, then 25m.
	r.Chat(context.Background(), Call{Req: userMsg("hi")})
	clk.Advance(time.Minute)
	r.Chat(context.Background(), Call{Req: userMsg("hi")})
	if n := len(p.Calls()); n != 2 {
		t.Fatalf("calls = %d", n)
	}
	// Cooling for 5 minutes: twenty calls over the next 4.5 minutes reach
	// the provider only as one probe per minute.
	for i := range 20 {
		clk.Advance(time.Minute * 45 / 200 * 1) // 13.5s steps
		_, err := r.Chat(context.Background(), Call{Req: userMsg("hi")})
		if err == nil {
			t.Fatalf("call %d succeeded", i)
		}
	}
	// 20 × 13.5s = 4.5 min: probes at ≥1m intervals → at most 4.
	if n := len(p.Calls()) - 2; n > 4 || n < 1 {
		t.Fatalf("probes = %d, want 1..4", n)
	}
	// A successful probe clears the cooldown.
	p.fn = nil
	clk.Advance(time.Hour)
	if _, err := r.Chat(context.Background(), Call{Req: userMsg("hi")}); err != nil {
		t.Fatal(err)
	}
	if !r.Profiles("p")[0].CooldownUntil.IsZero() {
		t.Fatal("cooldown not cleared")
	}
}

func TestStrictPin(t *testing.T) {
	r, p, q, _, _ := newTestRouter(t, func(o *Options) { o.Fallbacks = []string{"q/other"} })
	p.fn = func(_ provider.Credentials, req *provider.Request) (*provider.Response, error) {
		if req.Model == "mid" {
			return nil, &core.Error{Kind: core.KindUnavailable, Msg: "503"}
		}
		return &provider.Response{Text: "ok"}, nil
	}
	sess := &core.Session{ID: 1, ModelPin: "p/mid"}
	_, err := r.Chat(context.Background(), Call{Session: sess, Req: userMsg("hi")})
	if err == nil || !strings.Contains(err.Error(), "pinned") || !strings.Contains(err.Error(), "/model auto") {
		t.Fatalf("err = %v", err)
	}
	if len(q.Calls()) != 0 {
		t.Fatal("a pinned model was silently replaced")
	}
	// Asked for by the request, it is not switched either, and the
	// error names no pin.
	_, err = r.Chat(context.Background(), Call{Model: "p/mid", Req: userMsg("hi")})
	if err == nil || strings.Contains(err.Error(), "pinned") || strings.Contains(err.Error(), "/model") || !strings.Contains(err.Error(), "the model this request asked for (p/mid) is failing") {
		t.Fatalf("per-request model: err = %v; want it named as asked for, without /model", err)
	}
	if len(q.Calls()) != 0 {
		t.Fatal("a model asked for was silently replaced")
	}
	// Unpinned, the same failure falls back.
	res, err := r.Chat(context.Background(), Call{Model: "", Exclude: nil, Session: &core.Session{ID: 2}, Req: userMsg("hi")})
	if err != nil || res.Model != "p/cheap" {
		t.Fatalf("unpinned: %v %v", res.Model, err)
	}
}

// TestRefusedRequestFailsOverAndIsCounted (issue 25, finding 14): a 400
// that is not about the context's length fails over to the next model
// (never to another credential of the same model), counts against the
// model — the router's own choices avoid it on the ladder of
// auth.cooldowns, a success clears it — and the operator is told; a
// pinned model that refuses gets the user a sentence, not the provider's
// operator hint.
func TestRefusedRequestFailsOverAndIsCounted(t *testing.T) {
	ev := &events{}
	r, p, q, _, clk := newTestRouter(t, func(o *Options) {
		threeProfiles(o)
		o.Fallbacks = []string{"q/other"}
		o.Events = ev
	})
	refuses := true
	p.fn = func(_ provider.Credentials, req *provider.Request) (*provider.Response, error) {
		if req.Model == "cheap" && refuses {
			return nil, &core.Error{Kind: core.KindBadRequest, Msg: "provider p: HTTP 400: request refused; check the model id in models.catalog and the request", Err: errors.New("invalid_request_error: unsupported parameter: temperature")}
		}
		return &provider.Response{Text: "ok from " + req.Model}, nil
	}
	res, err := r.Chat(context.Background(), Call{Req: userMsg("hi")})
	if err != nil || res.Model != "q/other" {
		t.Fatalf("refused request: answered by %q, %v; want the fallback q/other", res.Model, err)
	}
	if got := fmt.Sprint(keys(p.Calls())); got != "[key-a]" {
		t.Fatalf("calls to the refusing model = %s; want one (no other credential)", got)
	}
	if got := ev.kinds(); len(got) != 1 || got[0] != core.EventModelRefused+"/p/cheap" {
		t.Fatalf("operator events = %v; want one model_refused for p/cheap", got)
	}
	if ev.got[0].Details["reason"] != "invalid_request_error: unsupported parameter: temperature" {
		t.Fatalf("event details = %v; want the provider's reason", ev.got[0].Details)
	}
	// The router's next choice avoids it: highest weight is now p/mid.
	res, err = r.Chat(context.Background(), Call{Req: userMsg("hi")})
	if err != nil || res.Model != "p/mid" {
		t.Fatalf("next call: %q %v; want p/mid while p/cheap is avoided", res.Model, err)
	}
	if n := len(p.Calls()); n != 2 || len(q.Calls()) != 1 {
		t.Fatalf("p calls = %d, q calls = %d; the avoided model was called again", n, len(q.Calls()))
	}
	if until, reason := r.Refused("p/cheap"); until.Sub(clk.Now()) != time.Minute || !strings.Contains(reason, "temperature") {
		t.Fatalf("Refused = %v %q; want avoided for the first cooldown step (1m)", until.Sub(clk.Now()), reason)
	}
	// A second refusal after the first cooldown: avoided 5 minutes.
	clk.Advance(time.Minute)
	if res, err := r.Chat(context.Background(), Call{Req: userMsg("hi")}); err != nil || res.Model != "q/other" {
		t.Fatalf("after the cooldown: %q %v", res.Model, err)
	}
	if until, _ := r.Refused("p/cheap"); until.Sub(clk.Now()) != 5*time.Minute {
		t.Fatalf("second refusal avoided for %v, want 5m", until.Sub(clk.Now()))
	}
	// A pinned model is still called; its refusal is told in words for
	// the user, without the operator's hint.
	_, err = r.Chat(context.Background(), Call{Session: &core.Session{ID: 1, ModelPin: "p/cheap"}, Req: userMsg("hi")})
	if core.ErrorKind(err) != core.KindBadRequest {
		t.Fatalf("pinned: err = %v", err)
	}
	msg := core.UserMessage(err)
	if strings.Contains(msg, "models.catalog") || !strings.Contains(msg, "refused") || !strings.Contains(msg, "/model auto") {
		t.Fatalf("user message = %q; want the refusal and /model auto, not the operator hint", msg)
	}
	// A model a request asked for (complete --model, a plugin, ctx.llm)
	// is no pin: its refusal does not send anyone to /model auto.
	_, err = r.Chat(context.Background(), Call{Model: "p/cheap", Req: userMsg("hi")})
	if msg := core.UserMessage(err); core.ErrorKind(err) != core.KindBadRequest || strings.Contains(msg, "pinned") || strings.Contains(msg, "/model") || !strings.Contains(msg, "the model this request asked for (p/cheap) refused it") {
		t.Fatalf("per-request model: %v; user message %q; want the refusal of the model asked for, without /model", err, msg)
	}
	// A success clears the count.
	refuses = false
	if res, err := r.Chat(context.Background(), Call{Session: &core.Session{ID: 1, ModelPin: "p/cheap"}, Req: userMsg("hi")}); err != nil || res.Model != "p/cheap" {
		t.Fatalf("pinned after the fix: %q %v", res.Model, err)
	}
	if until, _ := r.Refused("p/cheap"); !until.IsZero() {
		t.Fatalf("still avoided until %v after a success", until)
	}
}

// TestRefusingModelLosesTheLearnedChoice (issue 25, finding 14): a model
// that is the learned choice (here: pinned with /model, explicit signals,
// while the heavily weighted cheap model was rejected) keeps it after
// /model auto; when it refuses every request, each message is still
// answered (by another model), and the next ones go elsewhere.
func TestRefusingModelLosesTheLearnedChoice(t *testing.T) {
	r, p, q, _, clk := newTestRouter(t, nil)
	ctx := context.Background()
	// Router v3 starts from priors of the catalog weights, so one /model
	// choice of a lightly weighted model does not outweigh the operator's
	// weights: the learned choice is made with a few signals.
	for range 4 {
		for _, s := range []core.Signal{
			{Kind: core.SignalExplicit, Polarity: core.Positive, Model: "q/other", TaskType: TaskChat, At: clk.Now()},
			{Kind: core.SignalReaction, Polarity: core.Negative, Model: "p/cheap", TaskType: TaskChat, At: clk.Now()},
		} {
			if err := r.RecordSignal(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	if e := r.Explain(ctx, TaskChat); e.Model != "q/other" {
		t.Fatalf("the learned choice is %q; the test needs q/other", e.Model)
	}
	q.fn = func(provider.Credentials, *provider.Request) (*provider.Response, error) {
		return nil, &core.Error{Kind: core.KindBadRequest, Msg: "400"}
	}
	for i := range 5 {
		res, err := r.Chat(ctx, Call{Purpose: "chat", Req: userMsg("hello there")})
		if err != nil || res.Model == "q/other" {
			t.Fatalf("message %d: %q %v; want an answer from another model", i, res.Model, err)
		}
		clk.Advance(10 * time.Second)
	}
	if n := len(q.Calls()); n != 1 {
		t.Fatalf("the refusing model was called %d times for 5 messages; want 1", n)
	}
	if len(p.Calls()) != 5 {
		t.Fatalf("p calls = %d", len(p.Calls()))
	}
}

func TestContextTooLongMovesToLargerWindow(t *testing.T) {
	r, p, _, _, _ := newTestRouter(t, func(o *Options) {
		threeProfiles(o)
		o.Fallbacks = []string{"q/other"}
	})
	p.fn = func(_ provider.Credentials, req *provider.Request) (*provider.Response, error) {
		if req.Model == "cheap" {
			return nil, &core.Error{Kind: core.KindContextTooLong}
		}
		return &provider.Response{Text: "ok"}, nil
	}
	res, err := r.Chat(context.Background(), Call{Req: userMsg("hi")})
	if err != nil || res.Model != "q/other" {
		t.Fatalf("got %q %v", res.Model, err)
	}
	if len(p.Calls()) != 1 {
		t.Fatalf("context-length error retried on another credential: %v", keys(p.Calls()))
	}
}

// TestContextTooLongTriesALargerWindowOfTheCatalog (issue 25, finding
// 14): with no routing.fallbacks, a prompt the chosen model refuses as
// too long goes to the catalog's model with a larger window (the heaviest
// of them), not back to the user as "the conversation is too long"; a
// model the user pinned (/model) stays the only one asked.
func TestContextTooLongTriesALargerWindowOfTheCatalog(t *testing.T) {
	r, p, q, _, _ := newTestRouter(t, nil)
	p.fn = func(_ provider.Credentials, req *provider.Request) (*provider.Response, error) {
		if req.Model == "cheap" {
			return nil, &core.Error{Kind: core.KindContextTooLong, Msg: "prompt too long"}
		}
		return &provider.Response{Text: "ok from " + req.Model}, nil
	}
	res, err := r.Chat(context.Background(), Call{Purpose: "chat", Req: userMsg("hello there")})
	if err != nil || res.Model != "p/mid" {
		t.Fatalf("got %q %v; want p/mid, the heaviest model with a larger window than p/cheap's", res.Model, err)
	}
	if got := keys(p.Calls()); len(got) != 2 || len(q.Calls()) != 0 {
		t.Fatalf("calls p=%v q=%d; want p/cheap once, then p/mid", got, len(q.Calls()))
	}
	sess := &core.Session{ID: 1, ModelPin: "p/cheap"}
	if _, err := r.Chat(context.Background(), Call{Purpose: "chat", Session: sess, Req: userMsg("hello there")}); core.ErrorKind(err) != core.KindContextTooLong {
		t.Fatalf("pinned: err %v; want the pinned model's context-length error", err)
	}
}

// srvRouter is a router over one model, p/m, of the OpenAI-compatible
// server srv, with one credential per key (ids p:a, p:b, … for sk-a,
// sk-b, …) on clk's time; maxCloud is Options.MaxCloud (0: the default).
// rateLimited is a 429 asking for retryAfter (seconds).
func rateLimited(retryAfter string) providertest.Script {
	return providertest.Script{Status: 429, Header: map[string]string{"Retry-After": retryAfter}, Body: `{"error":{"message":"slow down","type":"rate_limit"}}`}
}

// limitedServer is a fake OpenAI server that answers every call with a
// 429 asking for retryAfter while limited holds (it does at first), and
// echoes once it does not.
func limitedServer(t *testing.T, retryAfter string) (*providertest.Server, *atomic.Bool) {
	t.Helper()
	srv := providertest.NewOpenAI(t)
	var limited atomic.Bool
	limited.Store(true)
	srv.SetReply(func(r providertest.Received) providertest.Script {
		if limited.Load() {
			return rateLimited(retryAfter)
		}
		return providertest.Echo(r)
	})
	return srv, &limited
}

func srvRouter(t *testing.T, clk *fakeClock, srv *providertest.Server, maxCloud int, keys ...string) *Router {
	t.Helper()
	return srvRouterOn(t, clk, srv, NewMemStore(), maxCloud, nil, keys...)
}

// srvRouterOn is srvRouter keeping its state in st (a second router on
// the same store is the first one restarted), with its options changed
// by mod (nil: none).
func srvRouterOn(t *testing.T, clk *fakeClock, srv *providertest.Server, st Store, maxCloud int, mod func(*Options), keys ...string) *Router {
	t.Helper()
	prov := provider.NewOpenAI(provider.Options{ID: "p", BaseURL: srv.BaseURL(), Now: clk.Now})
	var profiles []Profile
	for _, k := range keys {
		profiles = append(profiles, Profile{ID: "p:" + strings.TrimPrefix(k, "sk-"), Provider: "p", Key: core.Secret(k)})
	}
	o := Options{
		Providers: map[string]provider.Provider{"p": prov},
		Catalog:   []Model{{Ref: "p/m", Weight: 50}},
		Profiles:  map[string][]Profile{"p": profiles},
		Store:     st, Now: clk.Now, MaxCloud: maxCloud,
	}
	if mod != nil {
		mod(&o)
	}
	r, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
