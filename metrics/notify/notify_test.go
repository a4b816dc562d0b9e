package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
	"github.com/opentalon/opentalon/metrics/notify"
)

// hook is a webhook receiver that checks signatures; it answers the
// first fail requests with 503.
type hook struct {
	mu     sync.Mutex
	got    []notify.Payload
	sigOK  []bool
	fail   int
	status int
	seen   chan notify.Payload
	secret string
}

func newHook(t *testing.T, secret string) (*hook, string) {
	h := &hook{seen: make(chan notify.Payload, 100), secret: secret}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.fail > 0 {
			h.fail--
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if h.status != 0 {
			w.WriteHeader(h.status)
			return
		}
		var p notify.Payload
		if err := json.Unmarshal(body, &p); err != nil || r.Header.Get("Content-Type") != "application/json" || r.Header.Get(notify.EventHeader) != p.Kind {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		h.got = append(h.got, p)
		h.sigOK = append(h.sigOK, r.Header.Get(notify.SignatureHeader) == notify.Sign([]byte(h.secret), body))
		h.seen <- p
	}))
	t.Cleanup(srv.Close)
	return h, srv.URL
}

func (h *hook) wait(t *testing.T) notify.Payload {
	t.Helper()
	select {
	case p := <-h.seen:
		return p
	case <-time.After(5 * time.Second):
		t.Fatal("webhook received nothing")
	}
	return notify.Payload{}
}

func (h *hook) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case p := <-h.seen:
		t.Fatalf("webhook received %+v; want nothing", p)
	case <-time.After(d):
	}
}

func start(t *testing.T, o notify.Options) *notify.Notifier {
	t.Helper()
	if o.Backoff == nil {
		o.Backoff = func(int) time.Duration { return time.Millisecond }
	}
	n := notify.New(o)
	n.Start(context.Background())
	t.Cleanup(func() { n.Close() })
	return n
}

func TestWebhookIsSignedRetriedAndDeduplicated(t *testing.T) {
	h, url := newHook(t, "whsec-SECRET")
	h.fail = 2
	clk := clock.NewFake(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	n := start(t, notify.Options{Routes: []notify.Route{{Sink: notify.Webhook{URL: url, Secret: "whsec-SECRET"}}}, Now: clk.Now, Window: 10 * time.Minute})
	ev := core.OpsEvent{Kind: core.EventChannelDown, Subject: "telegram", Message: "channel telegram has been down for 1m", Details: map[string]string{"channel": "telegram"}}
	n.Emit(ev)
	p := h.wait(t)
	if p.Kind != core.EventChannelDown || p.Subject != "telegram" || p.Details["channel"] != "telegram" || !p.At.Equal(clk.Now()) || !h.sigOK[0] {
		t.Fatalf("payload %+v, signature ok %v", p, h.sigOK)
	}
	// The same event again within the window: held back.
	clk.Advance(5 * time.Minute)
	n.Emit(ev)
	h.none(t, 100*time.Millisecond)
	// Past the window it goes again, saying one was held back.
	clk.Advance(6 * time.Minute)
	n.Emit(ev)
	if p := h.wait(t); p.Suppressed != 1 {
		t.Fatalf("second payload suppressed = %d; want 1", p.Suppressed)
	}
}

func TestRateLimitPerKindAndRouting(t *testing.T) {
	all, allURL := newHook(t, "")
	onlyBudget, budgetURL := newHook(t, "")
	clk := clock.NewFake(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	n := start(t, notify.Options{Now: clk.Now, MaxPerWindow: 2, Routes: []notify.Route{
		{Sink: notify.Webhook{URL: allURL}},
		{Sink: notify.Webhook{URL: budgetURL}, Events: []string{core.EventBudgetWarning}},
	}})
	for _, ch := range []string{"a", "b", "c", "d"} {
		n.Emit(core.OpsEvent{Kind: core.EventRequestFailed, Subject: ch, Message: "failed"})
	}
	n.Emit(core.OpsEvent{Kind: core.EventBudgetWarning, Subject: "routing.budget.daily_usd", Message: "80%"})
	got := map[string]bool{}
	for range 3 {
		p := all.wait(t)
		got[p.Kind+"/"+p.Subject] = true
	}
	all.none(t, 100*time.Millisecond)
	if !got["request_failed/a"] || !got["request_failed/b"] || !got["budget_warning/routing.budget.daily_usd"] {
		t.Fatalf("received %v; want two request_failed (the rate limit) and the budget warning", got)
	}
	if p := onlyBudget.wait(t); p.Kind != core.EventBudgetWarning {
		t.Fatalf("budget sink got %+v", p)
	}
	onlyBudget.none(t, 50*time.Millisecond)
	// A new window: the next one reports the two held back.
	clk.Advance(11 * time.Minute)
	n.Emit(core.OpsEvent{Kind: core.EventRequestFailed, Subject: "e"})
	if p := all.wait(t); p.Subject != "e" || p.Suppressed != 2 {
		t.Fatalf("payload %+v; want e with 2 held back", p)
	}
}

// A sink that lists lua_script_disabled, which is no longer emitted, gets
// its successor lua_hook_failed.
func TestOldLuaEventNameStillRoutes(t *testing.T) {
	h, url := newHook(t, "")
	n := start(t, notify.Options{Routes: []notify.Route{{Sink: notify.Webhook{URL: url}, Events: []string{core.EventLuaScriptDisabled}}}})
	n.Emit(core.OpsEvent{Kind: core.EventRequestFailed, Subject: "telegram"})
	n.Emit(core.OpsEvent{Kind: core.EventLuaHookFailed, Subject: "scam.lua"})
	if p := h.wait(t); p.Kind != core.EventLuaHookFailed || p.Subject != "scam.lua" {
		t.Fatalf("payload %+v; want the lua_hook_failed event only", p)
	}
	h.none(t, 100*time.Millisecond)
}

func TestPermanentFailureIsNotRetried(t *testing.T) {
	h, url := newHook(t, "")
	h.status = http.StatusNotFound
	var tries int
	var mu sync.Mutex
	counting := notify.Func{Label: "count", Fn: func(ctx context.Context, n notify.Notification) error {
		mu.Lock()
		tries++
		mu.Unlock()
		return notify.Webhook{URL: url}.Send(ctx, n)
	}}
	n := start(t, notify.Options{Routes: []notify.Route{{Sink: counting}}})
	n.Emit(core.OpsEvent{Kind: core.EventLuaHookFailed, Subject: "x.lua"})
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if tries != 1 {
		t.Fatalf("tries = %d; want 1 (a 404 is not retried)", tries)
	}
	err := notify.Webhook{URL: url + "?token=SECRET"}.Send(context.Background(), notify.Notification{})
	if err == nil || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("error %v; want one without the URL's query", err)
	}
}

func TestChatSinkText(t *testing.T) {
	var got string
	sent := make(chan struct{}, 1)
	conv := core.ConversationKey{Channel: "telegram", Chat: "42"}
	sink := notify.Chat{Conversation: conv, Post: func(_ context.Context, c core.ConversationKey, text string) error {
		if c != conv {
			return errors.New("wrong conversation")
		}
		got = text
		sent <- struct{}{}
		return nil
	}}
	n := start(t, notify.Options{Routes: []notify.Route{{Sink: sink}}})
	n.Emit(core.OpsEvent{Kind: core.EventProviderCooling, Subject: "openai", Message: "every credential of openai is cooling down until 09:05"})
	select {
	case <-sent:
	case <-time.After(5 * time.Second):
		t.Fatal("chat sink got nothing")
	}
	if got != "⚠️ OpenTalon provider_cooling (openai): every credential of openai is cooling down until 09:05" {
		t.Fatalf("chat text = %q", got)
	}
}

type recorder struct {
	mu  sync.Mutex
	got []core.OpsEvent
}

func (r *recorder) Emit(e core.OpsEvent) { r.mu.Lock(); r.got = append(r.got, e); r.mu.Unlock() }
func (r *recorder) all() []core.OpsEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]core.OpsEvent(nil), r.got...)
}

func TestMonitorReportsAChannelDownOncePerOutage(t *testing.T) {
	var mu sync.Mutex
	up := true
	rec := &recorder{}
	m := &notify.Monitor{DownAfter: 60 * time.Millisecond, Every: 5 * time.Millisecond, Events: rec, Statuses: func() []notify.ChannelStatus {
		mu.Lock()
		defer mu.Unlock()
		return []notify.ChannelStatus{{Name: "telegram", Up: up, Err: "getUpdates: connection refused"}, {Name: "console", Up: true}}
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.Run(ctx)
	set := func(v bool) { mu.Lock(); up = v; mu.Unlock() }
	set(false)
	time.Sleep(30 * time.Millisecond)
	if n := len(rec.all()); n != 0 {
		t.Fatalf("%d events before down_after", n)
	}
	time.Sleep(150 * time.Millisecond)
	evs := rec.all()
	if len(evs) != 1 || evs[0].Kind != core.EventChannelDown || evs[0].Subject != "telegram" || !strings.Contains(evs[0].Message, "connection refused") {
		t.Fatalf("events = %+v; want one channel_down for telegram", evs)
	}
	// Back up, then down again: a new outage is reported again.
	set(true)
	time.Sleep(30 * time.Millisecond)
	set(false)
	time.Sleep(150 * time.Millisecond)
	if n := len(rec.all()); n != 2 {
		t.Fatalf("%d events; want a second one for the second outage", n)
	}
}

func TestPluginWatch(t *testing.T) {
	rec := &recorder{}
	clk := clock.NewFake(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	w := &notify.PluginWatch{Events: rec, Now: clk.Now}
	w.OnEvent("calc", "registered")
	w.OnEvent("calc", "deregistered")
	clk.Advance(20 * time.Minute)
	w.OnEvent("calc", "deregistered")
	w.OnEvent("calc", "deregistered")
	if n := len(rec.all()); n != 0 {
		t.Fatalf("events %+v; want none for stops spread over 20 minutes", rec.all())
	}
	w.OnEvent("calc", "deregistered")
	w.OnEvent("notes", "gave_up")
	evs := rec.all()
	if len(evs) != 2 || evs[0].Subject != "calc" || !strings.Contains(evs[0].Message, "3 times") || evs[1].Subject != "notes" || evs[1].Kind != core.EventPluginRestartLoop {
		t.Fatalf("events = %+v", evs)
	}
}

// TestWebhookURLSecretsStayOutOfErrors: a token in the webhook URL's path
// (Slack's and Discord's incoming webhooks), query or user info appears
// neither in the sink's name (logged) nor in its errors.
func TestWebhookURLSecretsStayOutOfErrors(t *testing.T) {
	h, base := newHook(t, "")
	h.status = http.StatusNotFound
	refused := "http://127.0.0.1:1"
	for _, u := range []string{
		base + "/api/webhooks/123/PATHSECRET",
		base + "/hook?token=QUERYSECRET",
		strings.Replace(base, "http://", "http://user:USERSECRET@", 1) + "/x",
		refused + "/api/webhooks/123/PATHSECRET",
	} {
		w := notify.Webhook{URL: u}
		err := w.Send(context.Background(), notify.Notification{})
		for _, s := range []string{w.Name(), errString(err)} {
			if strings.Contains(s, "SECRET") {
				t.Errorf("%q shows the URL's secret", s)
			}
		}
		if err == nil || !strings.Contains(w.Name(), "127.0.0.1") {
			t.Errorf("sink %q, error %v; want the host named and an error", w.Name(), err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
