package main

// `opentalon queue`: the request queue read from the command line, beside
// a running gateway (what runs, under which lease; what was answered and
// sent) and on a database holding every state an item can be in.

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store"
)

// queueJSON runs `queue ARGS --json` and decodes what it printed.
func queueJSON[T any](t *testing.T, path string, args ...string) T {
	t.Helper()
	res := runMain(t, nil, "", append([]string{"--config", path, "queue"}, append(args, "--json")...)...)
	var v T
	if res.code != 0 {
		t.Fatalf("queue %v --json: exit %d\n%s", args, res.code, res.stderr)
	}
	if err := json.Unmarshal([]byte(res.stdout), &v); err != nil {
		t.Fatalf("queue %v --json printed no valid JSON (%v):\n%s", args, err, res.stdout)
	}
	return v
}

func TestE2EQueueBesideRunningGateway(t *testing.T) {
	llm := providertest.NewOpenAI(t)
	started, release := make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	llm.SetReply(func(r providertest.Received) providertest.Script {
		if r.LastUser() == "hold" {
			select {
			case started <- struct{}{}:
			default:
			}
			<-release
		}
		return providertest.Echo(r)
	})
	data := t.TempDir()
	path := writeConfig(t, testConfig(data, llm.BaseURL(), ""))
	h := startApp(t, loadConfigFile(t, path))
	// As `run` does: the data directory is locked while the gateway runs,
	// so a command that took the lock would fail here.
	lock, err := lockDataDir(data)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.release()

	h.send("hello")
	h.expect("echo: hello")
	h.send("hold")
	<-started

	// What runs: the held message, its holder and its lease.
	res := runMain(t, nil, "", "--config", path, "queue")
	if res.code != 0 || !strings.Contains(res.stdout, "queue: 0 queued, 1 running, 0 failed (0 in the last 24h), 1 done") ||
		!regexp.MustCompile(`(?m)^\d+\s+console:\S+\s+message\s+\S+\s+running\s+0\s+0\s+\S+\s+-\s+\S+, lease \S+ left\s+-$`).MatchString(res.stdout) {
		t.Fatalf("queue beside the gateway: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	list := queueJSON[queueListJSON](t, path)
	if len(list.Items) != 1 || list.Items[0].Text != "hold" || list.Items[0].Holder == "" || list.Items[0].LeaseUntil == "" ||
		list.Items[0].LeaseExpired || list.Counts["done"] != 1 || list.Matched != 1 {
		t.Fatalf("queue --json beside the gateway = %+v; want the held message running under a lease", list)
	}

	// What was answered: the reply and the part sent.
	done := queueJSON[queueListJSON](t, path, "--status", "done")
	if len(done.Items) != 1 || done.Items[0].Text != "hello" {
		t.Fatalf("queue --status done = %+v; want the answered message", done)
	}
	id := fmt.Sprint(done.Items[0].ID)
	res = runMain(t, nil, "", "--config", path, "queue", "show", id)
	for _, want := range []string{`text          "hello"`, "status        done", "reply         #", "1 part(s)", "  part 1", "sent (platform id "} {
		if res.code != 0 || !strings.Contains(res.stdout, want) {
			t.Fatalf("queue show %s: exit %d, want %q in\n%s%s", id, res.code, want, res.stdout, res.stderr)
		}
	}
	shown := queueJSON[queueItemJSON](t, path, "show", id)
	if shown.Reply == nil || shown.Reply.Parts != 1 || len(shown.Reply.Deliveries) != 1 || !shown.Reply.Deliveries[0].Sent {
		t.Fatalf("queue show %s --json = %+v; want the reply with its part sent", id, shown)
	}

	free()
	h.expect("echo: hold")
}

func TestE2EQueueStates(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	path := writeConfig(t, testConfig(data, "http://127.0.0.1:1", ""))
	db, err := openStore(ctx, loadConfigFile(t, path), store.Options{Holder: "replica-x", LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	alice := core.ConversationKey{Channel: "telegram", Chat: "42"}
	bob := core.ConversationKey{Channel: "telegram", Chat: "43"}
	long := strings.Repeat("why is the sky blue? ", 40)
	enqueue := func(it core.QueueItem) int64 {
		t.Helper()
		id, dup, err := db.Enqueue(ctx, it)
		if err != nil || dup {
			t.Fatalf("enqueue %s: %v (dup %v)", it.DedupeKey, err, dup)
		}
		return id
	}
	message := func(c core.ConversationKey, id, user, name, text string) core.QueueItem {
		in := &core.Inbound{Conversation: c, MessageID: id, UserID: user, UserName: name, Text: text,
			Meta:  map[string]string{"token": "secret-in-meta"},
			Files: []core.InboundFile{{ID: "https://files.example/secret-file-url", Kind: core.MediaImage, Name: "sky.jpg", MIME: "image/jpeg", Size: 2048}}}
		return core.QueueItem{Kind: core.EventMessage, Conversation: c, DedupeKey: c.String() + ":m:" + id, Message: in}
	}
	// Alice's message failed; Bob's waits for a retry; one row's event
	// cannot be read.
	aliceID := enqueue(message(alice, "1", "42", "Alice", long))
	items, _, err := db.Claim(ctx, 10, time.Now())
	if err != nil || len(items) != 1 {
		t.Fatalf("claim: %v, %v", items, err)
	}
	if err := db.Finish(ctx, items[0].ID, items[0].Lease, core.StatusFailed, "provider said 500\nand then some"); err != nil {
		t.Fatal(err)
	}
	later := message(bob, "1", "43", "", "hi")
	later.NotBefore = time.Now().Add(2 * time.Hour)
	bobID := enqueue(later)
	badID := enqueue(core.QueueItem{Kind: core.EventMessage, Conversation: bob, DedupeKey: "telegram:43:m:2"})
	// A schedule's firing and a reaction, in a conversation of their own.
	team := core.ConversationKey{Channel: "telegram", Chat: "44"}
	firing := &core.Firing{ScheduleID: 7, At: time.Now(), Source: "user", Conversation: team, Plugin: "weather", Action: "forecast",
		Args: map[string]string{"api_key": "secret-arg-value", "city": "Oslo"}, Creator: "telegram:42"}
	firingID := enqueue(core.QueueItem{Kind: core.EventScheduled, Conversation: team, DedupeKey: "schedule:7:1", Firing: firing})
	reactionID := enqueue(core.QueueItem{Kind: core.EventReaction, Conversation: team, DedupeKey: "telegram:44:r:1",
		Reaction: &core.Reaction{Conversation: team, EventID: "r1", MessageID: "900", UserID: "42", Emoji: "👍", Added: true, Polarity: core.Positive}})
	before, err := db.QueueEntries(ctx, store.QueueQuery{})
	if err != nil {
		t.Fatal(err)
	}

	res := runMain(t, nil, "", "--config", path, "queue")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`queue: 4 queued, 0 running, 1 failed \(1 in the last 24h\), 0 done`),
		regexp.MustCompile(fmt.Sprintf(`(?m)^%d\s+telegram:44\s+schedule\s+telegram:42\s+queued`, firingID)),
		regexp.MustCompile(fmt.Sprintf(`(?m)^%d\s+telegram:44\s+reaction\s+42\s+queued`, reactionID)),
		regexp.MustCompile(fmt.Sprintf(`(?m)^%d\s+telegram:42\s+message\s+Alice \(42\)\s+failed\s+1\s+0\s+.*provider said 500 ⏎ and then some$`, aliceID)),
		regexp.MustCompile(fmt.Sprintf(`(?m)^%d\s+telegram:43\s+message\s+43\s+queued\s+0\s+0\s+\S+\s+in \S+\s+-\s+-$`, bobID)),
		regexp.MustCompile(fmt.Sprintf(`(?m)^%d\s+telegram:43\s+message\s+\?\s+queued`, badID)),
		regexp.MustCompile(fmt.Sprintf(`(?m)^#%d: the stored message event cannot be read`, badID)),
	} {
		if res.code != 0 || !want.MatchString(res.stdout) {
			t.Fatalf("queue: exit %d; want %s in\n%s%s", res.code, want, res.stdout, res.stderr)
		}
	}
	// Waiting items oldest first, then the failures.
	if i, j := strings.Index(res.stdout, fmt.Sprintf("\n%d ", bobID)), strings.Index(res.stdout, fmt.Sprintf("\n%d ", aliceID)); i < 0 || j < i {
		t.Fatalf("queue lists the failure before what waits:\n%s", res.stdout)
	}

	res = runMain(t, nil, "", "--config", path, "queue", "show", fmt.Sprint(aliceID))
	for _, want := range []string{"user          Alice (42)", "more characters; --json prints the whole text", "file 1        sky.jpg (image, image/jpeg, 2.0 KiB)",
		"reply         none stored", "last error    provider said 500 ⏎ and then some", "attempts      1 ended (a retry, a failure or the last one), 0 interrupted"} {
		if res.code != 0 || !strings.Contains(res.stdout, want) {
			t.Fatalf("queue show %d: exit %d; want %q in\n%s%s", aliceID, res.code, want, res.stdout, res.stderr)
		}
	}
	shown := queueJSON[queueItemJSON](t, path, "show", fmt.Sprint(aliceID))
	if shown.Text != long || shown.UserName != "Alice" || len(shown.Files) != 1 || shown.Reply != nil || shown.LastError != "provider said 500\nand then some" {
		t.Fatalf("queue show --json = %+v; want the whole text, the file and no reply", shown)
	}
	res = runMain(t, nil, "", "--config", path, "queue", "show", fmt.Sprint(badID))
	if res.code != 0 || !strings.Contains(res.stdout, "event         the stored message event cannot be read") {
		t.Fatalf("queue show of the unreadable row: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	res = runMain(t, nil, "", "--config", path, "queue", "show", fmt.Sprint(firingID))
	if res.code != 0 || !strings.Contains(res.stdout, "schedule      #7 (user), firing of ") || !strings.Contains(res.stdout, "action        weather.forecast (arguments: api_key, city)") {
		t.Fatalf("queue show of a firing: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	res = runMain(t, nil, "", "--config", path, "queue", "show", fmt.Sprint(reactionID))
	if res.code != 0 || !strings.Contains(res.stdout, "reaction      added 👍 on message 900") {
		t.Fatalf("queue show of a reaction: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	// The filters, and what --limit leaves out.
	conv := queueJSON[queueListJSON](t, path, "--status", "all", "--conversation", "telegram:42")
	if len(conv.Items) != 1 || conv.Items[0].ID != aliceID || conv.Counts["failed"] != 1 || conv.Counts["queued"] != 0 {
		t.Fatalf("queue --conversation telegram:42 = %+v; want Alice's item alone", conv)
	}
	res = runMain(t, nil, "", "--config", path, "queue", "--status", "queued", "--limit", "1")
	if res.code != 0 || !strings.Contains(res.stdout, "showing 1 of 4; --limit 1 shows more") || !strings.Contains(res.stdout, fmt.Sprintf("\n%d ", bobID)) {
		t.Fatalf("queue --status queued --limit 1: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	// No secret of the payload is printed, in any form.
	for _, args := range [][]string{{"queue", "--status", "all"}, {"queue", "--status", "all", "--json"}, {"queue", "show", fmt.Sprint(aliceID), "--json"},
		{"queue", "show", fmt.Sprint(firingID)}, {"queue", "show", fmt.Sprint(firingID), "--json"}} {
		res := runMain(t, nil, "", append([]string{"--config", path}, args...)...)
		if res.code != 0 || !strings.Contains(res.stdout, "telegram:4") {
			t.Fatalf("%v: exit %d\n%s%s", args, res.code, res.stdout, res.stderr)
		}
		if out := res.stdout + res.stderr; strings.Contains(out, "secret-in-meta") || strings.Contains(out, "secret-file-url") || strings.Contains(out, "secret-arg-value") {
			t.Fatalf("%v printed what the platform handed over for the answer:\n%s", args, res.stdout)
		}
	}

	// A wrong command line says what to write (exit 2); an id that is not
	// there says where ids come from (exit 1).
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"queue", "--status", "stuck"}, 2, `--status "stuck" is not one of queued, running, failed, done, all`},
		{[]string{"queue", "--limit", "0"}, 2, "--limit 0: give a positive number"},
		{[]string{"queue", "--conversation", "alice"}, 2, `--conversation "alice" is not a conversation: write channel:chat[:thread]`},
		{[]string{"queue", "--frob"}, 2, "flag provided but not defined: -frob; usage: opentalon queue [--json]"},
		{[]string{"queue", "list"}, 2, `unknown subcommand "list"`},
		{[]string{"queue", "show"}, 2, "queue show: missing the ID"},
		{[]string{"queue", "show", "abc"}, 2, `"abc" is not a queue item id: give the number in the ID column of opentalon queue`},
		{[]string{"queue", "show", "1", "--status", "failed"}, 2, "queue show takes only --json, not --status"},
		{[]string{"queue", "show", "99999"}, 1, "no queue item 99999"},
	} {
		res := runMain(t, nil, "", append([]string{"--config", path}, tc.args...)...)
		if res.code != tc.code || !strings.Contains(res.stderr, tc.want) || res.stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.args, res.code, res.stdout, res.stderr, tc.code, tc.want)
		}
	}

	// Read only: every row as it was.
	after, err := db.QueueEntries(ctx, store.QueueQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", stripPointers(before)) != fmt.Sprintf("%+v", stripPointers(after)) {
		t.Fatalf("the queue changed under a read-only command:\nbefore %+v\nafter  %+v", before, after)
	}
}

// stripPointers drops the decoded events (pointers print as addresses).
func stripPointers(es []store.QueueEntry) []store.QueueEntry {
	out := make([]store.QueueEntry, len(es))
	for i, e := range es {
		e.Message, e.Reaction, e.Firing = nil, nil, nil
		out[i] = e
	}
	return out
}
