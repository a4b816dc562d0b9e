package main

// Scheduled tasks on replicas of one bot (issue 23): of the replicas one
// fires, and a kill -9 of it neither repeats nor skips a due time.

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store/pgtest"
)

// schedulerHeld is the log line of the replica that fires the schedules.
const schedulerHeld = "this replica fires the schedules"

// TestE2EReplicaSchedulesFireOnceThroughAKill: two replicas with the
// same schedule (every 6 s, to a Telegram group). The one firing is
// killed with SIGKILL after a few firings; the other takes the scheduler
// lease over. Every due time from the first to the last is queued
// exactly once — none twice, none skipped across the takeover — and each
// is posted to the group.
func TestE2EReplicaSchedulesFireOnceThroughAKill(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts two processes and kills one")
	}
	const (
		// Longer than a takeover (the 2 s lease running out, and a
		// campaign) even on a loaded machine: due times that fall while
		// no replica leads are fired as one when one takes over (the
		// schedule's next firing is counted from then).
		every  = 6 * time.Second
		group  = "-100777"
		before = 2 // firings before the kill
		after  = 2 // and after the takeover
	)
	dsn := pgtest.DSN(t)
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	bin := releaseBinary(t)
	cfg := func() string {
		y := telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL)
		y = insertUnder(y, "state", fmt.Sprintf("  driver: postgres\n  postgres: { dsn: %q }\n", dsn))
		y = insertUnder(y, "queue", "  lease_ttl: 2s\n")
		y = insertUnder(y, "cluster", "  lease_ttl: 2s\n")
		return writeConfig(t, y+fmt.Sprintf("timezone: UTC\nschedules:\n  - interval: %s\n    prompt: \"Post the hourly digest.\"\n    channel: telegram\n    chat: %q\n", every, group))
	}
	procs := make([]*binProc, 2)
	for i := range procs {
		p := startBinaryAt(t, bin, childEnv(), nil, "--config", cfg(), "--log-level", "debug", "run")
		procs[i] = p
		t.Cleanup(func() {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			p.exitCode(60 * time.Second)
		})
	}
	leader := func() int {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			for i, p := range procs {
				if p != nil && strings.Contains(p.stderr.String(), schedulerHeld) {
					return i
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no replica fires the schedules; logs:\n%s\n---\n%s", tail(procs[0].stderr.String(), 30), tail(procs[1].stderr.String(), 30))
			}
		}
	}
	posts := func() int {
		n := 0
		for _, s := range bot.Sent() {
			if strconv.FormatInt(s.ChatID, 10) == group {
				n++
			}
		}
		return n
	}
	first := leader()
	// Killed once its firings are answered and recorded done, between two
	// firings: a post sent just before a kill may be sent again (the
	// crash loop's documented window), which is not what this test is
	// about.
	bot.WaitFor(t, "the first firings posted", 60*time.Second, func([]telegramtest.Sent, []telegramtest.Call) bool { return posts() >= before })
	// (Either replica answers a firing: the queue's claim decides.)
	for deadline := time.Now().Add(30 * time.Second); strings.Count(procs[0].stderr.String()+procs[1].stderr.String(), "request done") < before; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the first %d firings are not recorded done", before)
		}
	}
	if err := procs[first].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	procs[first].exitCode(30 * time.Second)
	procs[first] = nil
	second := leader()
	t.Logf("replica %d fired and was killed; replica %d fires now", first, second)
	atKill := posts()
	bot.WaitFor(t, "firings after the takeover posted", 60*time.Second, func([]telegramtest.Sent, []telegramtest.Call) bool { return posts() >= atKill+after })
	if err := procs[second].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := procs[second].exitCode(60 * time.Second); code != 0 {
		t.Fatalf("replica %d exit code %d; its log:\n%s", second, code, tail(procs[second].stderr.String(), 40))
	}
	procs[second] = nil

	// What was queued: one row per firing, keyed schedule:<id>:<ms>.
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(context.Background(), `SELECT dedupe_key, status FROM queue WHERE dedupe_key LIKE 'schedule:%'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ats []int64
	for rows.Next() {
		var key, status string
		if err := rows.Scan(&key, &status); err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(key, ":")
		ms, err := strconv.ParseInt(parts[len(parts)-1], 10, 64)
		if err != nil {
			t.Fatalf("firing key %q: %v", key, err)
		}
		ats = append(ats, ms)
		if status != "done" {
			t.Errorf("firing %s is %s; want done", time.UnixMilli(ms).UTC().Format("15:04:05.000"), status)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Slice(ats, func(i, j int) bool { return ats[i] < ats[j] })
	if len(ats) < before+after {
		t.Fatalf("%d firings queued; want at least %d", len(ats), before+after)
	}
	for i := 1; i < len(ats); i++ {
		if gap := time.Duration(ats[i]-ats[i-1]) * time.Millisecond; gap != every {
			t.Errorf("firings at %s and %s are %s apart; want every due time once (%s apart)",
				time.UnixMilli(ats[i-1]).UTC().Format("15:04:05.000"), time.UnixMilli(ats[i]).UTC().Format("15:04:05.000"), gap, every)
		}
	}
	// Each posted once.
	sent := 0
	for _, s := range bot.Sent() {
		if strconv.FormatInt(s.ChatID, 10) == group {
			sent++
		}
	}
	if sent != len(ats) {
		t.Errorf("%d posts for %d firings; want one each", sent, len(ats))
	}
	t.Logf("%d firings %s apart, %d posts", len(ats), every, sent)
}
