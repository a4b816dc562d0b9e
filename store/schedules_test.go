package store

import (
	"context"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
)

func TestSchedulesAddFireDelete(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC))
	db := openTest(t, Options{Now: clk.Now})
	ctx := context.Background()
	conv := core.ConversationKey{Channel: "slack", Chat: "C1:odd", Thread: "171.2"}
	next := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	s, err := db.AddSchedule(ctx, core.Schedule{Source: core.ScheduleChat, Cron: "0 9 * * 1-5", Spec: "every weekday at 9:00", Prompt: "summarize",
		Conversation: conv, Creator: "U1", Timezone: "Europe/Berlin", NextFire: next})
	if err != nil || s.ID == 0 || s.Missed != core.MissedSkip || !s.CreatedAt.Equal(clk.Now()) {
		t.Fatalf("add = %+v, %v", s, err)
	}
	if _, err := db.AddSchedule(ctx, core.Schedule{Source: "chat", Conversation: core.ConversationKey{Channel: "slack"}}); core.ErrorKind(err) != core.KindInvalid {
		t.Fatalf("schedule without chat: %v; want KindInvalid", err)
	}
	fired := next
	next2 := next.Add(24 * time.Hour)
	if err := db.ScheduleFired(ctx, s.ID, fired, next2); err != nil {
		t.Fatal(err)
	}
	// A zero last firing keeps the stored one (a skipped firing).
	if err := db.ScheduleFired(ctx, s.ID, time.Time{}, next2.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, err := db.Schedule(ctx, s.ID)
	if err != nil || !got.LastFire.Equal(fired) || !got.NextFire.Equal(next2.Add(time.Hour)) || got.Conversation != conv || got.Cron != s.Cron || got.Spec != s.Spec {
		t.Fatalf("schedule = %+v, %v", got, err)
	}
	if err := db.DeleteSchedule(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteSchedule(ctx, s.ID); core.ErrorKind(err) != core.KindNotFound {
		t.Fatalf("second delete: %v; want KindNotFound", err)
	}
	if _, err := db.Schedule(ctx, s.ID); core.ErrorKind(err) != core.KindNotFound {
		t.Fatalf("deleted schedule: %v; want KindNotFound", err)
	}
}

func TestSyncSchedulesKeepsFiringState(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	conv := core.ConversationKey{Channel: "telegram", Chat: "-100"}
	t0 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	want := []core.Schedule{
		{Key: "a", Interval: time.Hour, Prompt: "a", Conversation: conv, NextFire: t0},
		{Key: "b", Cron: "0 9 * * *", Plugin: "calc", Action: "evaluate", Args: map[string]string{"expression": "1+1"}, Conversation: conv, NextFire: t0},
		{Key: "c", Interval: time.Minute, Prompt: "c", Conversation: conv, NextFire: t0},
	}
	first, err := db.SyncSchedules(ctx, "plugin:x", want)
	if err != nil || len(first) != 3 {
		t.Fatalf("sync = %+v, %v", first, err)
	}
	if err := db.ScheduleFired(ctx, first[0].ID, t0, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := db.ScheduleFired(ctx, first[1].ID, t0, t0.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	// Another source's schedule is not touched.
	other, err := db.AddSchedule(ctx, core.Schedule{Source: "chat", Interval: time.Hour, Prompt: "o", Conversation: conv})
	if err != nil {
		t.Fatal(err)
	}
	// a: same timing, new prompt; b: re-timed; c: gone; d: new.
	t1 := t0.Add(time.Minute)
	second, err := db.SyncSchedules(ctx, "plugin:x", []core.Schedule{
		{Key: "a", Interval: time.Hour, Prompt: "a2", Conversation: conv, NextFire: t1},
		{Key: "b", Cron: "30 9 * * *", Plugin: "calc", Action: "evaluate", Conversation: conv, NextFire: t1},
		{Key: "d", Interval: time.Hour, Prompt: "d", Conversation: conv, NextFire: t1},
	})
	if err != nil || len(second) != 3 {
		t.Fatalf("second sync = %+v, %v", second, err)
	}
	all, err := db.Schedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]core.Schedule{}
	for _, s := range all {
		byKey[s.Source+"/"+s.Key] = s
	}
	a := byKey["plugin:x/a"]
	if a.ID != first[0].ID || a.Prompt != "a2" || !a.LastFire.Equal(t0) || !a.NextFire.Equal(t0.Add(time.Hour)) {
		t.Errorf("a = %+v; want the same row, the new prompt and its firing state kept", a)
	}
	b := byKey["plugin:x/b"]
	if b.Cron != "30 9 * * *" || !b.NextFire.Equal(t1) || !b.LastFire.IsZero() || len(b.Args) != 0 {
		t.Errorf("b = %+v; want the new timing with the caller's next firing", b)
	}
	if _, ok := byKey["plugin:x/c"]; ok {
		t.Error("c is still stored; want it deleted")
	}
	if d := byKey["plugin:x/d"]; d.ID == 0 || d.Prompt != "d" {
		t.Errorf("d = %+v; want it added", d)
	}
	if o := byKey["chat/"]; o.ID != other.ID {
		t.Errorf("the chat schedule = %+v; want it untouched", o)
	}
	if len(all) != 4 {
		t.Errorf("%d schedules; want 4", len(all))
	}
	if _, err := db.SyncSchedules(ctx, "config", []core.Schedule{{Interval: time.Hour, Conversation: conv}}); core.ErrorKind(err) != core.KindInvalid {
		t.Errorf("sync without a key: %v; want KindInvalid", err)
	}
}

func TestFiringRoundTripsThroughTheQueue(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	conv := core.ConversationKey{Channel: "telegram", Chat: "1"}
	at := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	f := core.Firing{ScheduleID: 3, At: at, Conversation: conv, Plugin: "calc", Action: "evaluate", Args: map[string]string{"e": "1"}, Model: "m", Creator: "u"}
	id, dup, err := db.Enqueue(ctx, core.QueueItem{Kind: core.EventScheduled, Conversation: conv, DedupeKey: "schedule:3:1", Firing: &f})
	if err != nil || dup {
		t.Fatal(err, dup)
	}
	items, _, err := db.Claim(ctx, 5, time.Now())
	if err != nil || len(items) != 1 || items[0].ID != id || items[0].Kind != core.EventScheduled {
		t.Fatalf("claim = %+v, %v", items, err)
	}
	got := items[0].Firing
	if got == nil || got.ScheduleID != 3 || !got.At.Equal(at) || got.Args["e"] != "1" || got.Action != "evaluate" || got.Conversation != conv {
		t.Fatalf("claimed firing = %+v", got)
	}
	// A schedule row without its firing is failed, not claimed forever.
	if _, err := db.w.ExecContext(ctx, `INSERT INTO queue (dedupe_key, kind, conversation, payload, created_at, updated_at) VALUES ('schedule:9:9', 'schedule', 'telegram:2', '{}', 0, 0)`); err != nil {
		t.Fatal(err)
	}
	if items, _, err := db.Claim(ctx, 5, time.Now()); err != nil || len(items) != 0 {
		t.Fatalf("claim of a bad row = %+v, %v; want nothing", items, err)
	}
}
