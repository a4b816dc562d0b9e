package schedule_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
	"github.com/opentalon/opentalon/core/schedule"
	"github.com/opentalon/opentalon/store"
)

// queue records firings; a firing of a schedule whose prompt is "busy"
// fails once with a transient error.
type queue struct {
	mu     sync.Mutex
	got    []core.Firing
	seen   map[string]bool
	failed bool
	fired  chan core.Firing
}

func newQueue() *queue { return &queue{seen: map[string]bool{}, fired: make(chan core.Firing, 100)} }

func (q *queue) EnqueueFiring(_ context.Context, f core.Firing) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if f.Prompt == "busy" && !q.failed {
		q.failed = true
		return false, &core.Error{Kind: core.KindUnavailable, Msg: "database is locked"}
	}
	if f.Conversation.Channel == "disabled" {
		return false, core.Errorf(core.KindInvalid, "channel disabled is not enabled")
	}
	key := f.At.String() + f.Key + string(rune(f.ScheduleID))
	if q.seen[key] {
		return true, nil
	}
	q.seen[key] = true
	q.got = append(q.got, f)
	q.fired <- f
	return false, nil
}

func (q *queue) wait(t *testing.T) core.Firing {
	t.Helper()
	select {
	case f := <-q.fired:
		return f
	case <-time.After(5 * time.Second):
		t.Fatal("nothing fired")
	}
	return core.Firing{}
}

// waitNudging is wait for a test that set the clock while the scheduler
// may have been between two timers (woken by its /schedule poke as well
// as by its first timer): a timer it set just after the clock moved lies
// a tick past a clock that moves no more. The clock is nudged a
// millisecond at a time until the firing comes (an interval's firings are
// anchored, so the nudge moves none of them).
func (q *queue) waitNudging(t *testing.T, clk *clock.Fake) core.Firing {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case f := <-q.fired:
			return f
		case <-time.After(20 * time.Millisecond):
			clk.Advance(time.Millisecond)
		case <-deadline:
			t.Fatal("nothing fired")
		}
	}
}

func (q *queue) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case f := <-q.fired:
		t.Fatalf("fired %+v; want nothing", f)
	case <-time.After(d):
	}
}

type rig struct {
	db  *store.DB
	clk *clock.Fake
	q   *queue
	s   *schedule.Scheduler
	run context.CancelFunc
	wg  sync.WaitGroup
}

func newRig(t *testing.T, dir string, clk *clock.Fake) *rig {
	t.Helper()
	db, err := store.Open(context.Background(), dir, store.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{db: db, clk: clk, q: newQueue()}
	r.s = schedule.New(schedule.Options{Store: db, Queue: r.q, Location: time.UTC, Clock: clk, Tick: 5 * time.Millisecond})
	t.Cleanup(r.stop)
	return r
}

func (r *rig) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r.run = cancel
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if err := r.s.Run(ctx); err != nil {
			t.Errorf("run: %v", err)
		}
	}()
}

func (r *rig) stop() {
	if r.run != nil {
		r.run()
		r.wg.Wait()
		r.run = nil
	}
	if r.db != nil {
		r.db.Close()
		r.db = nil
	}
}

var conv = core.ConversationKey{Channel: "slack", Chat: "C0123456"}

func digest(missed string) []core.Schedule {
	return []core.Schedule{{Cron: "0 9 * * 1-5", Prompt: "Summarize yesterday's open incidents.", Conversation: conv, Missed: missed}}
}

func TestFiresAtTheClocksTimeOnce(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)) // a Friday
	r := newRig(t, t.TempDir(), clk)
	ctx := context.Background()
	if err := r.s.SyncConfig(ctx, digest("")); err != nil {
		t.Fatal(err)
	}
	r.start(t)
	r.q.none(t, 50*time.Millisecond)
	clk.Set(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	f := r.q.wait(t)
	if !f.At.Equal(clk.Now()) || f.Conversation != conv || f.Prompt != "Summarize yesterday's open incidents." || f.Source != core.ScheduleConfig {
		t.Fatalf("firing = %+v", f)
	}
	r.q.none(t, 50*time.Millisecond)
	// The next one is Monday (the weekend has none).
	clk.Set(time.Date(2026, 5, 3, 23, 0, 0, 0, time.UTC))
	r.q.none(t, 50*time.Millisecond)
	clk.Set(time.Date(2026, 5, 4, 9, 0, 30, 0, time.UTC))
	if f := r.q.wait(t); !f.At.Equal(time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)) {
		t.Fatalf("monday firing at %s", f.At)
	}
	// The firing is recorded after it is queued: wait for the record.
	recorded := func() ([]core.Schedule, bool, error) {
		stored, err := r.db.Schedules(ctx)
		ok := err == nil && len(stored) == 1 && stored[0].LastFire.Equal(time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)) &&
			stored[0].NextFire.Equal(time.Date(2026, 5, 5, 9, 0, 0, 0, time.UTC))
		return stored, ok, err
	}
	stored, ok, err := recorded()
	for deadline := time.Now().Add(5 * time.Second); !ok && time.Now().Before(deadline); stored, ok, err = recorded() {
		time.Sleep(5 * time.Millisecond)
	}
	if !ok {
		t.Fatalf("stored = %+v, %v; want last fire Monday 9:00 and next Tuesday 9:00", stored, err)
	}
}

func TestMissedFiringsAcrossARestart(t *testing.T) {
	for _, tt := range []struct {
		missed string
		fires  bool
	}{{core.MissedOnce, true}, {core.MissedSkip, false}, {"", false}} {
		t.Run("missed="+tt.missed, func(t *testing.T) {
			dir := t.TempDir()
			clk := clock.NewFake(time.Date(2026, 5, 4, 8, 0, 0, 0, time.UTC)) // a Monday
			r := newRig(t, dir, clk)
			ctx := context.Background()
			if err := r.s.SyncConfig(ctx, digest(tt.missed)); err != nil {
				t.Fatal(err)
			}
			r.start(t)
			r.q.none(t, 30*time.Millisecond)
			r.stop()

			// Down across Monday's, Tuesday's and Wednesday's firings.
			clk.Set(time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC))
			r2 := newRig(t, dir, clk)
			if err := r2.s.SyncConfig(ctx, digest(tt.missed)); err != nil {
				t.Fatal(err)
			}
			r2.start(t)
			if tt.fires {
				f := r2.q.wait(t)
				if !f.At.Equal(time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)) {
					t.Fatalf("missed firing at %s; want the first one missed", f.At)
				}
			}
			r2.q.none(t, 50*time.Millisecond)
			clk.Set(time.Date(2026, 5, 7, 9, 0, 0, 0, time.UTC))
			if f := r2.q.wait(t); !f.At.Equal(clk.Now()) {
				t.Fatalf("thursday firing at %s", f.At)
			}
			r2.q.none(t, 30*time.Millisecond)
		})
	}
}

func TestTransientQueueFailureRetriesAndDisabledChannelSkips(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC))
	r := newRig(t, t.TempDir(), clk)
	ctx := context.Background()
	if err := r.s.SyncConfig(ctx, []core.Schedule{
		{Interval: time.Hour, Prompt: "busy", Conversation: conv},
		{Interval: time.Hour, Prompt: "x", Conversation: core.ConversationKey{Channel: "disabled", Chat: "1"}},
	}); err != nil {
		t.Fatal(err)
	}
	r.start(t)
	nine := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	clk.Set(nine)
	// The first try fails; the retry waits for the next tick of the
	// clock, which the test moves on a millisecond at a time.
	var f core.Firing
	for deadline := time.Now().Add(10 * time.Second); f.Prompt == ""; {
		select {
		case f = <-r.q.fired:
		case <-time.After(5 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("nothing fired")
			}
			clk.Advance(time.Millisecond)
		}
	}
	if f.Prompt != "busy" || !f.At.Equal(nine) {
		t.Fatalf("firing = %+v; want the busy schedule's 9:00 firing after its retry", f)
	}
	r.q.none(t, 50*time.Millisecond)
	for _, s := range r.s.Schedules() {
		if !s.NextFire.Equal(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)) {
			t.Errorf("schedule %d next = %s; want 10:00 (the disabled channel's firing skipped, not stuck)", s.ID, s.NextFire)
		}
	}
}

func TestConfigSyncKeepsAnEditedPromptsState(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC))
	r := newRig(t, t.TempDir(), clk)
	ctx := context.Background()
	if err := r.s.SyncConfig(ctx, []core.Schedule{{Interval: 6 * time.Hour, Prompt: "old", Conversation: conv}}); err != nil {
		t.Fatal(err)
	}
	first := r.s.Schedules()[0]
	clk.Set(clk.Now().Add(time.Hour))
	if err := r.s.SyncConfig(ctx, []core.Schedule{{Interval: 6 * time.Hour, Prompt: "new", Conversation: conv}}); err != nil {
		t.Fatal(err)
	}
	got := r.s.Schedules()
	if len(got) != 1 || got[0].ID != first.ID || got[0].Prompt != "new" || !got[0].NextFire.Equal(first.NextFire) {
		t.Fatalf("after editing the prompt: %+v; want the same schedule and next firing (%s)", got, first.NextFire)
	}
	if err := r.s.SyncConfig(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(r.s.Schedules()); n != 0 {
		t.Fatalf("%d schedules after removing them from the config", n)
	}
	// A plugin's declarations: a bad one is left out.
	if err := r.s.SyncPlugin(ctx, "digest", []core.Schedule{
		{Key: "daily", Cron: "0 7 * * *", Conversation: conv},
		{Key: "bad", Cron: "0 7 * *", Conversation: conv},
	}); err != nil {
		t.Fatal(err)
	}
	if got := r.s.Schedules(); len(got) != 1 || got[0].Source != "plugin:digest" || got[0].Plugin != "digest" || got[0].Key != "daily" {
		t.Fatalf("plugin schedules = %+v", got)
	}
}

// TestSyncPluginRefusesWhatCannotRun: one check refuses a plugin's
// declaration that cannot run — its timing, its missed policy, its
// channel — and keeps the others.
func TestSyncPluginRefusesWhatCannotRun(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC))
	db, err := store.Open(context.Background(), t.TempDir(), store.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := schedule.New(schedule.Options{Store: db, Queue: newQueue(), Location: time.UTC, Now: clk.Now,
		Enabled: func(ch string) bool { return ch == conv.Channel }})
	other := core.ConversationKey{Channel: "discord", Chat: "1"}
	err = s.SyncPlugin(context.Background(), "p", []core.Schedule{
		{Key: "ok", Interval: time.Hour, Conversation: conv, Missed: core.MissedOnce},
		{Key: "no-interval", Interval: -time.Hour, Conversation: conv},
		{Key: "bad-cron", Cron: "0 7 * *", Conversation: conv},
		{Key: "bad-zone", Cron: "0 7 * * *", Timezone: "Mars/Olympus", Conversation: conv},
		{Key: "bad-missed", Interval: time.Hour, Missed: "twice", Conversation: conv},
		{Key: "off-channel", Interval: time.Hour, Conversation: other},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Schedules(); len(got) != 1 || got[0].Key != "ok" {
		t.Fatalf("schedules = %+v; want only the one that can run", got)
	}
	// Its timing reads as /schedule writes it, whatever text came with it.
	err = s.SyncPlugin(context.Background(), "p", []core.Schedule{
		{Key: "ok", Interval: 90 * time.Minute, Spec: "every 1h30m0s", Conversation: conv},
		{Key: "daily", Cron: "0 7 * * *", Conversation: conv},
	})
	if err != nil {
		t.Fatal(err)
	}
	specs := map[string]string{}
	for _, sc := range s.Schedules() {
		specs[sc.Key] = sc.Spec
	}
	if specs["ok"] != "every 1h30m" || specs["daily"] != "cron 0 7 * * *" {
		t.Fatalf("plugin schedules read %q; want every 1h30m and cron 0 7 * * *", specs)
	}
}

func TestChatCommands(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC))
	r := newRig(t, t.TempDir(), clk)
	ctx := context.Background()
	if err := r.s.SyncConfig(ctx, digest("")); err != nil {
		t.Fatal(err)
	}
	cmds := map[string]core.CommandFunc{}
	for _, c := range r.s.Commands() {
		cmds[c.Name] = c.Run
	}
	run := func(name, user, args string, admin bool) string {
		t.Helper()
		out, err := cmds[name](ctx, core.CommandRequest{In: core.Inbound{Conversation: conv, UserID: user}, Args: args, Admin: admin})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := run("schedule", "U1", "every fortnight summarize", false); !strings.HasPrefix(out, `I could not read that schedule: "fortnight" after every`) || !strings.Contains(out, schedule.Usage) {
		t.Fatalf("bad spec answered %q; want the reason and the usage", out)
	}
	if out := run("schedule", "U1", "", false); out != schedule.Usage {
		t.Fatalf("/schedule alone = %q; want the usage", out)
	}
	if out := run("schedule", "U1", "every 10s spam", false); !strings.Contains(out, "too often") {
		t.Fatalf("every 10s = %q", out)
	}
	out := run("schedule", "U1", "every weekday at 9:30 standup notes", false)
	if !strings.HasPrefix(out, "Scheduled #2: every weekday at 09:30 — next Fri 1 May 09:30 UTC.") {
		t.Fatalf("/schedule = %q", out)
	}
	list := run("schedules", "U2", "", false)
	for _, want := range []string{"#1 cron 0 9 * * 1-5", "from the config", "#2 every weekday at 09:30", "standup notes (by U1)"} {
		if !strings.Contains(list, want) {
			t.Errorf("/schedules = %q; want %q in it", list, want)
		}
	}
	if out := run("unschedule", "U2", "2", false); !strings.Contains(out, "Only the creator of #2 or an admin") {
		t.Fatalf("a stranger's /unschedule = %q", out)
	}
	if out := run("unschedule", "U2", "1", true); !strings.Contains(out, "config file") {
		t.Fatalf("/unschedule of a config schedule = %q", out)
	}
	if out := run("unschedule", "U1", "#2", false); out != "Removed #2 (every weekday at 09:30)." {
		t.Fatalf("creator's /unschedule = %q", out)
	}
	if out := run("unschedule", "U1", "2", false); !strings.Contains(out, "no schedule #2") {
		t.Fatalf("second /unschedule = %q", out)
	}
	if out := run("unschedule", "U1", "x", false); !strings.HasPrefix(out, "Usage: /unschedule") {
		t.Fatalf("/unschedule x = %q", out)
	}
	// An admin removes someone else's.
	run("schedule", "U1", "every 2h drink water", false)
	if out := run("unschedule", "ADM", "3", true); !strings.HasPrefix(out, "Removed #3") {
		t.Fatalf("admin's /unschedule = %q", out)
	}
	// A plugin's injected message makes no schedule.
	out, _ = cmds["schedule"](ctx, core.CommandRequest{In: core.Inbound{Conversation: conv, UserID: "bot", Origin: "plugin:x"}, Args: "every 2h x"})
	if !strings.Contains(out, "people") {
		t.Fatalf("injected /schedule = %q", out)
	}
}

// An injected message (a plugin route's) carries whatever user id the
// plugin gives it, so it must not pass as a schedule's creator.
func TestInjectedUnscheduleIsRefused(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC))
	r := newRig(t, t.TempDir(), clk)
	ctx := context.Background()
	cmds := map[string]core.CommandFunc{}
	for _, c := range r.s.Commands() {
		cmds[c.Name] = c.Run
	}
	sc, err := r.s.Add(ctx, core.Schedule{Source: core.ScheduleChat, Interval: time.Hour, Spec: "every 1h", Prompt: "p", Conversation: conv, Creator: "U1"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmds["unschedule"](ctx, core.CommandRequest{In: core.Inbound{Conversation: conv, UserID: "U1", Origin: "plugin:relay"}, Args: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(out, "Removed") || len(r.s.Schedules()) != 1 {
		t.Fatalf("an injected /unschedule naming the creator removed #%d: %q", sc.ID, out)
	}
	if _, err := r.db.Schedule(ctx, sc.ID); err != nil {
		t.Fatalf("schedule #%d gone from the store: %v", sc.ID, err)
	}
}

// Issue 25 (lower): an admin is the admin of one channel; /schedules all
// and /unschedule reach that channel's schedules, not another platform's.
func TestAdminReachesOnlyTheirChannelsSchedules(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC))
	r := newRig(t, t.TempDir(), clk)
	ctx := context.Background()
	cmds := map[string]core.CommandFunc{}
	for _, c := range r.s.Commands() {
		cmds[c.Name] = c.Run
	}
	tg := core.ConversationKey{Channel: "telegram", Chat: "-100"}
	other := core.ConversationKey{Channel: "slack", Chat: "C0999"}
	run := func(in core.ConversationKey, name, user, args string, admin bool) string {
		t.Helper()
		out, err := cmds[name](ctx, core.CommandRequest{In: core.Inbound{Conversation: in, UserID: user}, Args: args, Admin: admin})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	run(conv, "schedule", "U1", "every 2h slack secret report", false) // #1
	run(other, "schedule", "U2", "every 3h other slack chat", false)   // #2
	run(tg, "schedule", "T1", "every 4h telegram reminder", false)     // #3
	list := run(tg, "schedules", "TADMIN", "all", true)
	if !strings.Contains(list, "telegram reminder") || strings.Contains(list, "slack secret report") || strings.Contains(list, "other slack chat") {
		t.Fatalf("a Telegram admin's /schedules all = %q; want Telegram's only", list)
	}
	if out := run(tg, "unschedule", "TADMIN", "1", true); !strings.Contains(out, "no schedule #1") {
		t.Fatalf("a Telegram admin removing a Slack schedule = %q; want it refused", out)
	}
	// A Slack admin still reaches another Slack conversation's.
	if out := run(conv, "unschedule", "SADMIN", "2", true); !strings.HasPrefix(out, "Removed #2") {
		t.Fatalf("a Slack admin removing another Slack chat's schedule = %q", out)
	}
	if n := len(r.s.Schedules()); n != 2 {
		t.Fatalf("%d schedules left; want 2", n)
	}
}

// The store keeps times to the millisecond; a clock with finer readings
// (the system clock's) must not make the scheduler take its own schedule
// for one changed elsewhere. An interval schedule from the config and
// one made in chat each fire at every interval, from their first run on.
func TestIntervalsFireOnAClockFinerThanTheStore(t *testing.T) {
	start := time.Date(2026, 5, 1, 8, 0, 0, 123456789, time.UTC)
	clk := clock.NewFake(start)
	r := newRig(t, t.TempDir(), clk)
	ctx := context.Background()
	if err := r.s.SyncConfig(ctx, []core.Schedule{{Interval: 2 * time.Hour, Prompt: "config", Conversation: conv}}); err != nil {
		t.Fatal(err)
	}
	cmds := map[string]core.CommandFunc{}
	for _, c := range r.s.Commands() {
		cmds[c.Name] = c.Run
	}
	if out, err := cmds["schedule"](ctx, core.CommandRequest{In: core.Inbound{Conversation: conv, UserID: "U1"}, Args: "every 3h chat"}); err != nil || !strings.HasPrefix(out, "Scheduled #2") {
		t.Fatalf("/schedule = %q, %v", out, err)
	}
	r.start(t)
	want := []struct {
		after  time.Duration
		prompt string
	}{{2 * time.Hour, "config"}, {3 * time.Hour, "chat"}, {4 * time.Hour, "config"}, {6 * time.Hour, "config"}, {6 * time.Hour, "chat"}}
	for i, w := range want {
		// The scheduler waits on its timer before the clock moves on.
		bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := clk.BlockUntil(bctx, 1)
		cancel()
		if err != nil {
			t.Fatalf("the scheduler is not waiting on the clock before firing %d: %v", i, err)
		}
		clk.Set(start.Add(w.after))
		f := r.q.waitNudging(t, clk)
		if f.Prompt != w.prompt || !f.At.Equal(start.Add(w.after).Truncate(time.Millisecond)) {
			t.Fatalf("firing %d = %q at %s; want %q at %s", i, f.Prompt, f.At, w.prompt, start.Add(w.after))
		}
	}
}

// TestAPrivateChatsScheduleFiresAsPrivate: /schedule records whether it
// was sent in a private chat, and the schedule's firings say so: a
// private chat's firing recalls the creator's memories as that chat does
// (core.MemoryPlace ""), a group's only the group's.
func TestAPrivateChatsScheduleFiresAsPrivate(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC))
	r := newRig(t, t.TempDir(), clk)
	ctx := context.Background()
	var sched core.CommandFunc
	for _, c := range r.s.Commands() {
		if c.Name == "schedule" {
			sched = c.Run
		}
	}
	dm := core.ConversationKey{Channel: "telegram", Chat: "42"}
	group := core.ConversationKey{Channel: "telegram", Chat: "-100"}
	for _, in := range []core.Inbound{
		{Conversation: dm, UserID: "42", Private: true},
		{Conversation: group, UserID: "42"},
	} {
		if out, err := sched(ctx, core.CommandRequest{In: in, Args: "every day at 9:00 what is on my calendar"}); err != nil || !strings.HasPrefix(out, "Scheduled #") {
			t.Fatalf("/schedule in %s = %q, %v", in.Conversation, out, err)
		}
	}
	r.start(t)
	clk.Set(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	fired := map[core.ConversationKey]core.Firing{}
	for range 2 {
		f := r.q.wait(t)
		fired[f.Conversation] = f
	}
	if f := fired[dm]; !f.Private || !f.Inbound(f.Prompt).Private || core.MemoryPlace(f.Inbound(f.Prompt)) != "" {
		t.Fatalf("the private chat's firing = %+v; want it private, its memories the chat's", f)
	}
	if f := fired[group]; f.Private || core.MemoryPlace(f.Inbound(f.Prompt)) != "telegram:-100" {
		t.Fatalf("the group's firing = %+v; want it the group's", f)
	}
}
