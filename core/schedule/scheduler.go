package schedule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
)

// Store keeps the schedules (store.DB).
type Store interface {
	// Schedules returns every schedule.
	Schedules(ctx context.Context) ([]core.Schedule, error)
	// AddSchedule stores a new schedule and returns it with its id.
	AddSchedule(ctx context.Context, s core.Schedule) (core.Schedule, error)
	// SyncSchedules makes source's schedules exactly want, matched by
	// Key; one whose Key and timing are unchanged keeps its firing state.
	// It and AddSchedule return the times as stored, which Schedule reads
	// back equal.
	SyncSchedules(ctx context.Context, source string, want []core.Schedule) ([]core.Schedule, error)
	// DeleteSchedule removes one (KindNotFound when unknown).
	DeleteSchedule(ctx context.Context, id int64) error
	// ScheduleFired records the last queued firing (zero = unchanged)
	// and the next firing time (zero with a last firing = unchanged).
	ScheduleFired(ctx context.Context, id int64, last, next time.Time) error
	// Schedule reads one schedule (KindNotFound when unknown).
	Schedule(ctx context.Context, id int64) (core.Schedule, error)
	// AdvanceSchedule moves a schedule's next firing from at to next
	// only when it is still at (a compare-and-set); moved says it did.
	AdvanceSchedule(ctx context.Context, id int64, at, next time.Time) (moved bool, err error)
	// SchedulesVersion is a counter every change to the schedules bumps,
	// on any replica.
	SchedulesVersion(ctx context.Context) (int64, error)
}

// LeaseName is the lease the scheduler that fires holds (Options.Hold).
const LeaseName = "scheduler"

// finishFiring bounds the queueing of a firing and the move of its
// schedule once the scheduler's context ended.
const finishFiring = 10 * time.Second

// Queue takes firings (gateway.Gateway).
type Queue interface {
	// EnqueueFiring commits a firing; a firing already queued (same
	// schedule and time) is reported with dup=true.
	EnqueueFiring(ctx context.Context, f core.Firing) (dup bool, err error)
}

// Options configure a Scheduler.
type Options struct {
	Store Store
	Queue Queue
	// Location is the zone of a schedule that names none (the config's
	// timezone; default the machine's).
	Location *time.Location
	// Clock is what the scheduler waits on (nil = the system clock).
	Clock clock.Clock
	// Now reads the time (nil = Clock.Now).
	Now func() time.Time
	// Tick bounds how long the scheduler goes without reading the clock
	// (default 1s), so a clock that jumps is noticed.
	Tick time.Duration
	// MaxPerConversation bounds the schedules made in chat per
	// conversation (default 20); MinInterval is their shortest interval
	// (default 1m).
	MaxPerConversation int
	MinInterval        time.Duration
	// Enabled reports whether a channel is enabled (gateway.HasChannel);
	// a plugin's schedule on another channel is refused. nil = every
	// channel is.
	Enabled func(channel string) bool
	// Hold, when set, runs work while this replica holds the lease name
	// and cancels it when the lease is lost (core/lease.Elector.Hold):
	// of the replicas sharing a database only the holder of LeaseName
	// fires; every replica keeps its schedules current (Schedules, the
	// chat commands). nil = this process is the only one and fires.
	Hold func(ctx context.Context, name string, work func(ctx context.Context) error) error
	// Grace is how late a firing may be found when a scheduler starts
	// firing and still count as due rather than missed (a leader taking
	// over from one that died: about the lease's TTL). Default 0.
	Grace  time.Duration
	Logger *slog.Logger
}

// Scheduler fires the schedules. Lifecycle: New (no side effects), Sync
// the config's and plugins' schedules, Run until ctx ends. Safe for
// concurrent use.
type Scheduler struct {
	o    Options
	log  *slog.Logger
	wake chan struct{}

	mu      sync.Mutex
	loaded  bool
	entries map[int64]*entry
	// version is the store's SchedulesVersion when last read; stale says
	// read them again at the next tick.
	version int64
	stale   bool
	// versionFails spaces out the log of a version read that fails every
	// tick (a database that is down), under mu.
	versionFails clock.Repeat
}

// entry is one schedule with its parsed timing. missed says its next
// firing time had passed when it came from the store: the gateway was
// down then, and the schedule's missed policy decides.
type entry struct {
	s      core.Schedule
	when   When
	missed bool
}

// New builds a Scheduler; it starts nothing.
func New(o Options) *Scheduler {
	o.Clock = clock.Or(o.Clock)
	if o.Now == nil {
		o.Now = o.Clock.Now
	}
	if o.Location == nil {
		o.Location = time.Local
	}
	if o.Tick <= 0 {
		o.Tick = time.Second
	}
	if o.MaxPerConversation <= 0 {
		o.MaxPerConversation = 20
	}
	if o.MinInterval <= 0 {
		o.MinInterval = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{o: o, log: o.Logger.With("component", "schedule"), wake: make(chan struct{}, 1), entries: map[int64]*entry{}}
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// load reads the stored schedules once.
func (s *Scheduler) load(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loaded {
		return nil
	}
	return s.readLocked(ctx, 0)
}

// readLocked reads every stored schedule into memory. A schedule already
// in memory with the same firing time keeps its missed mark; one new to
// memory is missed when its firing time is more than grace ago.
func (s *Scheduler) readLocked(ctx context.Context, grace time.Duration) error {
	version, err := s.o.Store.SchedulesVersion(ctx)
	if err != nil {
		return fmt.Errorf("load schedules: %w", err)
	}
	all, err := s.o.Store.Schedules(ctx)
	if err != nil {
		return fmt.Errorf("load schedules: %w", err)
	}
	now := s.o.Now()
	old := s.entries
	s.entries = map[int64]*entry{}
	for _, sc := range all {
		s.putLocked(ctx, sc, now.Add(-grace))
		if e, ok := s.entries[sc.ID]; ok {
			if o, ok := old[sc.ID]; ok && o.s.NextFire.Equal(e.s.NextFire) {
				e.missed = o.missed
			}
		}
	}
	s.loaded, s.version, s.stale = true, version, false
	return nil
}

// refresh reads the schedules again when another replica (or a firing)
// changed them since they were read; grace is readLocked's.
func (s *Scheduler) refresh(ctx context.Context, grace time.Duration) {
	version, err := s.o.Store.SchedulesVersion(ctx)
	if err != nil {
		if ctx.Err() == nil { // not the end of the run or of the lease
			s.mu.Lock()
			report, since, n := s.versionFails.Failed(s.o.Now())
			s.mu.Unlock()
			if report {
				s.log.Warn("read the schedules' version; trying again every tick", "failing_since", since, "failures_not_logged", n, "err", err)
			}
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if failed, since := s.versionFails.Recovered(); failed {
		s.log.Info("the schedules' version reads again", "failed_for", s.o.Now().Sub(since).Round(time.Second))
	}
	if !s.loaded || (version == s.version && !s.stale) {
		return
	}
	if err := s.readLocked(ctx, grace); err != nil {
		s.log.Warn("read the schedules again", "err", err)
	}
}

// putLocked adds or replaces one schedule in memory; a stored schedule
// whose next firing has passed is marked missed, one without a next
// firing gets one.
func (s *Scheduler) putLocked(ctx context.Context, sc core.Schedule, now time.Time) {
	w, err := WhenOf(sc, s.o.Location)
	if err != nil {
		s.log.Error("schedule not loaded", "schedule", sc.ID, "source", sc.Source, "err", err)
		delete(s.entries, sc.ID)
		return
	}
	e := &entry{s: sc, when: w}
	switch {
	case sc.NextFire.IsZero():
		e.s.NextFire = w.Next(now)
		if err := s.o.Store.ScheduleFired(ctx, sc.ID, time.Time{}, e.s.NextFire); err != nil {
			s.log.Warn("record the next firing of a schedule", "schedule", sc.ID, "err", err)
		}
	case !sc.NextFire.After(now):
		e.missed = true
	}
	s.entries[sc.ID] = e
}

// configKey identifies a config schedule across restarts by its timing
// and target, so editing its prompt keeps its firing state; n tells
// apart entries that share both.
func configKey(sc core.Schedule, n int) string {
	h := sha256.Sum256([]byte(strings.Join([]string{sc.Interval.String(), sc.Cron, sc.Timezone,
		sc.Conversation.Channel, sc.Conversation.Chat, sc.Conversation.Thread}, "\x00")))
	return fmt.Sprintf("%s#%d", hex.EncodeToString(h[:8]), n)
}

// SyncConfig makes the config's schedules (schedules:) those stored;
// each needs Interval or Cron and a target. A schedule whose timing and
// target are unchanged keeps its firing state.
func (s *Scheduler) SyncConfig(ctx context.Context, want []core.Schedule) error {
	seen := map[string]int{}
	for i := range want {
		want[i].Source = core.ScheduleConfig
		base := configKey(want[i], 0)
		want[i].Key = configKey(want[i], seen[base])
		seen[base]++
	}
	return s.sync(ctx, core.ScheduleConfig, want)
}

// SyncPlugin makes plugin's declared schedules those stored (Key = the
// plugin's id for each); a declaration that cannot run (see check) is
// logged and left out.
func (s *Scheduler) SyncPlugin(ctx context.Context, plugin string, want []core.Schedule) error {
	var ok []core.Schedule
	for _, sc := range want {
		sc.Source, sc.Plugin = core.OriginPlugin+plugin, plugin
		// Its timing reads as the config's and the chat's do ("every
		// 1h30m", not a Go duration's "1h30m0s").
		sc.Spec = describe(sc)
		if err := s.check(sc); err != nil {
			s.log.Error("plugin schedule refused", "plugin", plugin, "schedule", sc.Key, "err", err)
			continue
		}
		ok = append(ok, sc)
	}
	return s.sync(ctx, core.OriginPlugin+plugin, ok)
}

// check says why a schedule cannot run: its timing (a positive interval
// or five cron fields, a known time zone), a missed policy other than
// skip or once, a channel that is not enabled.
func (s *Scheduler) check(sc core.Schedule) error {
	if _, err := WhenOf(sc, s.o.Location); err != nil {
		return err
	}
	if sc.Missed != "" && sc.Missed != core.MissedSkip && sc.Missed != core.MissedOnce {
		return fmt.Errorf("missed is %q; use %s or %s", sc.Missed, core.MissedSkip, core.MissedOnce)
	}
	if ch := sc.Conversation.Channel; s.o.Enabled != nil && !s.o.Enabled(ch) {
		return fmt.Errorf("its channel %q is not enabled", ch)
	}
	return nil
}

func (s *Scheduler) sync(ctx context.Context, source string, want []core.Schedule) error {
	if err := s.load(ctx); err != nil {
		return err
	}
	now := s.o.Now()
	for i := range want {
		want[i].CreatedAt = now
		w, err := WhenOf(want[i], s.o.Location)
		if err != nil {
			return fmt.Errorf("schedule %s: %w", want[i].Key, err)
		}
		want[i].NextFire = w.Next(now)
	}
	got, err := s.o.Store.SyncSchedules(ctx, source, want)
	if err != nil {
		return err
	}
	s.mu.Lock()
	for id, e := range s.entries {
		if e.s.Source == source {
			delete(s.entries, id)
		}
	}
	for _, sc := range got {
		s.putLocked(ctx, sc, now)
	}
	s.mu.Unlock()
	s.poke()
	return nil
}

// Run fires the schedules until ctx ends. With Options.Hold it fires only
// while this replica holds LeaseName, and otherwise keeps the schedules
// in memory current.
func (s *Scheduler) Run(ctx context.Context) error {
	if err := s.load(ctx); err != nil {
		return err
	}
	if s.o.Hold == nil {
		return s.fireLoop(ctx, false)
	}
	var leading atomic.Bool
	held := make(chan error, 1)
	go func() {
		held <- s.o.Hold(ctx, LeaseName, func(ctx context.Context) error {
			leading.Store(true)
			defer leading.Store(false)
			s.log.Info("this replica fires the schedules")
			return s.fireLoop(ctx, true)
		})
	}()
	t := s.o.Clock.NewTicker(s.o.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			<-held
			return nil
		case <-t.C():
			if !leading.Load() {
				s.refresh(ctx, 0)
			}
		}
	}
}

// fireLoop fires what is due until ctx ends; a leader (taking over in a
// cluster) first reads the schedules afresh and reads them again whenever
// another replica changed them.
func (s *Scheduler) fireLoop(ctx context.Context, leader bool) error {
	if leader {
		s.mu.Lock()
		// Afresh: what a follower marked missed is decided again, with
		// the grace of a takeover.
		s.entries = map[int64]*entry{}
		err := s.readLocked(ctx, s.o.Grace)
		s.mu.Unlock()
		if err != nil {
			return err
		}
	}
	t := s.o.Clock.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		case <-s.wake:
		}
		if leader {
			s.refresh(ctx, 0)
		}
		s.fireDue(ctx)
		wait := s.o.Tick
		if next := s.nextDue(); !next.IsZero() {
			wait = min(wait, max(next.Sub(s.o.Now()), time.Millisecond))
		}
		if !t.Stop() {
			select {
			case <-t.C():
			default:
			}
		}
		t.Reset(wait)
	}
}

func (s *Scheduler) nextDue() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var next time.Time
	for _, e := range s.entries {
		if n := e.s.NextFire; !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	return next
}

// fireDue queues the firing of every schedule that is due.
func (s *Scheduler) fireDue(ctx context.Context) {
	now := s.o.Now()
	s.mu.Lock()
	var due []entry
	for _, e := range s.entries {
		if !e.s.NextFire.IsZero() && !e.s.NextFire.After(now) {
			due = append(due, *e)
		}
	}
	s.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].s.ID < due[j].s.ID })
	for _, e := range due {
		s.fire(ctx, e, now)
	}
}

// fire queues one due firing. It first reads the schedule back: one
// deleted or re-timed meanwhile, or a due time another scheduler fired
// and moved on, is not fired. Then it queues the firing, and only then
// moves the schedule's next firing time on, by a compare-and-set
// (AdvanceSchedule): a process killed before the queueing committed
// leaves the time due, and the scheduler that runs next fires it; one
// killed between the queueing and the move leaves it due too, and the
// queue's dedupe key (schedule:<id>:<time>) makes the next one's firing
// a duplicate, not a second firing. A firing the queue refuses for a
// passing reason is tried again at the next tick.
//
// A firing that passed the read is finished even when ctx ends meanwhile
// (the scheduler lease lost, a SIGTERM), so a queueing is not left
// without its move; the next leader's firing of the same time is a
// duplicate.
func (s *Scheduler) fire(ctx context.Context, e entry, now time.Time) {
	sc := e.s
	at := sc.NextFire
	log := s.log.With("schedule", sc.ID, "source", sc.Source, "conv", sc.Conversation.String())
	next := e.when.Next(now)
	cur, err := s.o.Store.Schedule(ctx, sc.ID)
	switch {
	case core.ErrorKind(err) == core.KindNotFound || err == nil && cur.NextFire.UnixMilli() != at.UnixMilli():
		// (Compared as the store keeps times, to the millisecond, as
		// AdvanceSchedule's compare-and-set does.)
		s.changed(log, sc.ID, at)
		return
	case err != nil:
		log.Warn("read a schedule before its firing; trying again", "at", at, "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishFiring)
	defer cancel()
	var last time.Time
	if e.missed && sc.Missed != core.MissedOnce {
		log.Info("a firing fell while the gateway was down; skipped (missed: skip)", "at", at)
	} else {
		dup, err := s.o.Queue.EnqueueFiring(ctx, core.FiringOf(sc, at))
		switch {
		case err != nil && core.ErrorKind(err) != core.KindInvalid:
			// The store is busy or failing: nothing moved; the firing is
			// tried again at the next tick.
			log.Warn("queue a firing; trying again", "at", at, "err", err)
			return
		case err != nil:
			log.Error("firing not queued", "at", at, "err", err)
		default:
			last = at
			log.Info("schedule fired", "at", at, "missed", e.missed, "duplicate", dup)
		}
	}
	moved, err := s.o.Store.AdvanceSchedule(ctx, sc.ID, at, next)
	if err != nil {
		// Still due: the next tick queues it again (a duplicate, if it
		// was queued) and moves it then.
		log.Warn("move a schedule to its next firing; trying again", "at", at, "next", next, "err", err)
		return
	}
	if !moved {
		// Another scheduler fired it (the queue's dedupe key made one of
		// the two a duplicate), or it was deleted or re-timed meanwhile.
		s.changed(log, sc.ID, at)
		return
	}
	if !last.IsZero() {
		if err := s.o.Store.ScheduleFired(ctx, sc.ID, last, time.Time{}); err != nil {
			log.Warn("record a firing", "err", err)
		}
	}
	s.mu.Lock()
	if cur, ok := s.entries[sc.ID]; ok && cur.s.NextFire.Equal(at) {
		cur.s.NextFire, cur.missed = next, false
		if !last.IsZero() {
			cur.s.LastFire = last
		}
	}
	s.mu.Unlock()
}

// changed marks the schedules to be read again: schedule id was deleted,
// re-timed or fired elsewhere before its firing at at.
func (s *Scheduler) changed(log *slog.Logger, id int64, at time.Time) {
	log.Info("schedule changed before its firing; reading the schedules again", "at", at)
	s.mu.Lock()
	s.stale = true
	if cur, ok := s.entries[id]; ok && cur.s.NextFire.Equal(at) {
		delete(s.entries, id)
	}
	s.mu.Unlock()
}

// Schedules returns the schedules in memory, by id.
func (s *Scheduler) Schedules() []core.Schedule {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]core.Schedule, 0, len(s.entries))
	for _, id := range slices.Sorted(maps.Keys(s.entries)) {
		out = append(out, s.entries[id].s)
	}
	return out
}

// Add stores a new schedule made in chat and returns it with its id and
// next firing.
func (s *Scheduler) Add(ctx context.Context, sc core.Schedule) (core.Schedule, error) {
	if err := s.load(ctx); err != nil {
		return sc, err
	}
	now := s.o.Now()
	sc.CreatedAt = now
	w, err := WhenOf(sc, s.o.Location)
	if err != nil {
		return sc, core.Errorf(core.KindInvalid, "%s", err.Error())
	}
	if sc.NextFire = w.Next(now); sc.NextFire.IsZero() {
		return sc, core.Errorf(core.KindInvalid, "%s never fires", sc.Spec)
	}
	sc, err = s.o.Store.AddSchedule(ctx, sc)
	if err != nil {
		return sc, err
	}
	// Its timing from the schedule as stored: the store keeps times to
	// the millisecond, and a firing's next time must equal the one it
	// keeps (fire compares them).
	if w, err = WhenOf(sc, s.o.Location); err != nil {
		return sc, core.Errorf(core.KindInvalid, "%s", err.Error())
	}
	s.mu.Lock()
	s.entries[sc.ID] = &entry{s: sc, when: w}
	s.mu.Unlock()
	s.poke()
	return sc, nil
}

// Remove deletes a schedule.
func (s *Scheduler) Remove(ctx context.Context, id int64) error {
	if err := s.o.Store.DeleteSchedule(ctx, id); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.entries, id)
	s.mu.Unlock()
	return nil
}

// Location is the zone of a schedule that names none.
func (s *Scheduler) Location() *time.Location { return s.o.Location }
