package main

// Slack's Events API on replicas of one bot (issue 23): one balancer in
// front of two replicas, so either may get an event, and Slack's retry of
// it may reach the other one, even while the first is still handled.

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/slack/slacktest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store/pgtest"
)

// slackEventsServed is the log line of the Events API endpoint.
var slackEventsServed = regexp.MustCompile(`msg="Slack Events API endpoint listening".*? listen=(127\.0\.0\.1:\d+)`)

// TestE2EReplicasSlackEventsAnswerOnce: two replicas in Events API mode
// on one PostgreSQL. A mention delivered to A while Slack's retry of it
// (X-Slack-Retry-Num) reaches B at the same moment, plus the message
// event Slack sends with it, on B; a follow-up in the bot's thread
// without a mention on B; a 👎 on its answer delivered to B while its
// retry reaches A. Each is answered once: one answer per message, one
// re-answer for the 👎, one LLM call each.
func TestE2EReplicasSlackEventsAnswerOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts two processes")
	}
	const secret = "sign-SECRET"
	dsn := pgtest.DSN(t)
	llm := providertest.NewOpenAI(t)
	llm.SetReply(modelReply)
	srv := slacktest.New(t, slackBotToken, slackAppToken)
	bin := releaseBinary(t)
	urls := make([]string, 2)
	procs := make([]*binProc, 2)
	for i := range urls {
		y := slackConfig(t.TempDir(), llm.BaseURL(), srv.URL, fmt.Sprintf("    mode: events\n    signing_secret: %q\n    events: { listen: \"127.0.0.1:0\", path: /slack/events }\n    streaming: off\n", secret))
		y = strings.Replace(y, "    fake/small: { alias: small, weight: 80, context_window: 8000 }\n",
			"    fake/small: { alias: small, weight: 80, context_window: 8000 }\n    fake/big: { alias: big, weight: 20, context_window: 8000 }\n", 1)
		y = insertUnder(y, "routing", "  escalate_on_reaction: true\n")
		y = insertUnder(y, "state", fmt.Sprintf("  driver: postgres\n  postgres: { dsn: %q }\n", dsn))
		p := startBinaryAt(t, bin, childEnv(), nil, "--config", writeConfig(t, y), "--log-level", "debug", "run")
		procs[i] = p
		t.Cleanup(func() {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			p.exitCode(60 * time.Second)
			if t.Failed() {
				t.Logf("replica %d's log:\n%s", i, tail(p.stderr.String(), 60))
			}
		})
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if m := slackEventsServed.FindStringSubmatch(p.stderr.String()); m != nil {
				urls[i] = "http://" + m[1] + "/slack/events"
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %d never served the Events API; its log:\n%s", i, tail(p.stderr.String(), 40))
			}
		}
	}
	good := slacktest.Signed{Secret: secret}
	retry := slacktest.Signed{Secret: secret, RetryNum: 1}
	// both delivers env to replica i and, at the same time, its retry to
	// the other.
	both := func(env slacktest.Envelope, i int) {
		t.Helper()
		var wg sync.WaitGroup
		codes := make([]int, 2)
		for k, sig := range []slacktest.Signed{good, retry} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[k], _ = slacktest.PostEvent(t, urls[(i+k)%2], env, sig)
			}()
		}
		wg.Wait()
		if codes[0] != 200 || codes[1] != 200 {
			t.Fatalf("the delivery and its retry were answered %v; want 200 each", codes)
		}
	}
	posts := func(want string) int {
		n := 0
		for _, p := range srv.Posts() {
			if strings.Contains(p.Text, want) {
				n++
			}
		}
		return n
	}

	// 1. A mention, its retry and its message twin.
	mention := srv.Mention("alice", "C1", "what is a monad?", "")
	both(mention, 0)
	if code, body := slacktest.PostEvent(t, urls[1], srv.MessageTwin(mention), good); code != 200 {
		t.Fatalf("the message twin: %d %q", code, body)
	}
	first := srv.WaitPosts(t, 1, 30*time.Second)[0]
	if !strings.Contains(first.Text, "answer from small") || first.ThreadTS != mention.TS {
		t.Fatalf("the mention was answered with %+v; want the primary's answer in its thread", first)
	}

	// 2. A follow-up in the bot's thread, on B, without a mention.
	follow := srv.ChannelMessage("alice", "C1", "and a functor?", mention.TS)
	both(follow, 1)
	second := srv.WaitPosts(t, 2, 30*time.Second)[1]
	// Recorded done (with the answer's ts, which the 👎 names): a user
	// does not react in the instant between the post and its record.
	for deadline := time.Now().Add(30 * time.Second); strings.Count(procs[0].stderr.String()+procs[1].stderr.String(), "request done") < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the two answers are not recorded done")
		}
	}

	// 3. A 👎 on the latest answer, on B, its retry on A.
	both(srv.Reaction("alice", "C1", second.TS, "-1", true), 1)
	srv.WaitFor(t, "the re-answer after 👎", 30*time.Second, func() bool { return posts("answer from big") >= 1 })

	// Nothing more comes: the last answer is recorded done on both
	// replicas' database before the count (a second answer would be
	// claimed from the same queue).
	waitDone := func() {
		for deadline := time.Now().Add(30 * time.Second); llm.InFlight() > 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the LLM is still asked")
			}
		}
	}
	waitDone()
	if got := len(srv.Posts()); got != 3 || posts("answer from small") != 2 || posts("answer from big") != 1 {
		var b strings.Builder
		for _, p := range srv.Posts() {
			fmt.Fprintf(&b, "  %s thread %s: %q\n", p.TS, p.ThreadTS, p.Text)
		}
		t.Errorf("%d posts; want the mention's and the follow-up's answers and one re-answer:\n%s", got, b.String())
	}
	if n := llm.Count(); n != 3 {
		t.Errorf("%d LLM calls; want 3", n)
	}
}
