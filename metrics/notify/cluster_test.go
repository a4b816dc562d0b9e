package notify_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/metrics/notify"
	"github.com/opentalon/opentalon/store"
	"github.com/opentalon/opentalon/store/pgtest"
)

// TestBudgetNoticeOncePerCluster: three replicas over one PostgreSQL
// database reach a budget's 80% on the same day; the operator hears it
// once. A channel down seen by all three is told once per window too.
func TestBudgetNoticeOncePerCluster(t *testing.T) {
	dsn, dir := pgtest.DSN(t), t.TempDir()
	h, url := newHook(t, "")
	var ns []*notify.Notifier
	for i := range 3 {
		db, err := store.Open(context.Background(), dir, store.Options{Postgres: &store.Postgres{DSN: dsn}, Holder: fmt.Sprint("replica-", i)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		ns = append(ns, start(t, notify.Options{Routes: []notify.Route{{Sink: notify.Webhook{URL: url}}}, Claim: db.ClaimNotice}))
	}
	budget := func(day string) core.OpsEvent {
		return core.OpsEvent{Kind: core.EventBudgetWarning, Subject: "routing.budget.daily_usd", Message: "80% of routing.budget.daily_usd is spent today",
			Once: day + " routing.budget.daily_usd|budget_warning|80"}
	}
	for _, n := range ns {
		n.Emit(budget("2026-11-26"))
		n.Emit(core.OpsEvent{Kind: core.EventChannelDown, Subject: "telegram", Message: "telegram is down"})
	}
	got := map[string]int{}
	for range 2 {
		p := h.wait(t)
		got[p.Kind]++
	}
	select {
	case p := <-h.seen:
		t.Fatalf("a second notice arrived: %+v; want each told once", p)
	case <-time.After(500 * time.Millisecond):
	}
	if got[core.EventBudgetWarning] != 1 || got[core.EventChannelDown] != 1 {
		t.Fatalf("notices by kind: %v; want one each", got)
	}
	// The next day's 80% is told again, by whichever replica sees it.
	ns[2].Emit(budget("2026-11-27"))
	if p := h.wait(t); p.Kind != core.EventBudgetWarning {
		t.Fatalf("next day: %+v", p)
	}
}

// TestRateLimitPerCluster: notifications.max_per_window holds for the
// cluster: three replicas each emitting events of one kind about
// different subjects send max_per_window of them in all.
func TestRateLimitPerCluster(t *testing.T) {
	dsn, dir := pgtest.DSN(t), t.TempDir()
	h, url := newHook(t, "")
	var ns []*notify.Notifier
	for i := range 3 {
		db, err := store.Open(context.Background(), dir, store.Options{Postgres: &store.Postgres{DSN: dsn}, Holder: fmt.Sprint("replica-", i)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		ns = append(ns, start(t, notify.Options{Routes: []notify.Route{{Sink: notify.Webhook{URL: url}}}, MaxPerWindow: 2, Claim: db.ClaimNotice}))
	}
	for i, n := range ns {
		for j := range 2 {
			n.Emit(core.OpsEvent{Kind: core.EventRequestFailed, Subject: fmt.Sprintf("channel-%d-%d", i, j), Message: "a request failed"})
		}
	}
	h.wait(t)
	h.wait(t)
	h.none(t, 500*time.Millisecond)
}

// TestSlowClaimHoldsUpNoOtherEvent: the cluster's claim is a database
// write; while one event's claim waits on a slow database, another
// event is decided and sent without waiting for it (Emit is called on a
// message's path: a failover, a failing hook).
func TestSlowClaimHoldsUpNoOtherEvent(t *testing.T) {
	h, url := newHook(t, "")
	inClaim, release := make(chan struct{}), make(chan struct{})
	claim := func(ctx context.Context, key string, _ time.Duration) (bool, error) {
		if strings.HasPrefix(key, "event|"+core.EventBudgetWarning) {
			close(inClaim)
			<-release
		}
		return true, nil
	}
	n := start(t, notify.Options{Routes: []notify.Route{{Sink: notify.Webhook{URL: url}}}, Claim: claim})
	slowDone := make(chan struct{})
	defer func() { <-slowDone }()
	defer close(release) // after a failure too: the slow Emit ends
	go func() {
		defer close(slowDone)
		n.Emit(core.OpsEvent{Kind: core.EventBudgetWarning, Subject: "routing.budget.daily_usd", Message: "80%"})
	}()
	<-inClaim
	fast := make(chan struct{})
	go func() {
		defer close(fast)
		n.Emit(core.OpsEvent{Kind: core.EventChannelDown, Subject: "telegram", Message: "telegram is down"})
	}()
	select {
	case <-fast:
	case <-time.After(10 * time.Second):
		t.Fatal("Emit of a channel-down waited for another event's claim")
	}
	if p := h.wait(t); p.Kind != core.EventChannelDown {
		t.Fatalf("sent %+v; want the channel-down while the budget's claim waits", p)
	}
}
