package slack_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/slack/slacktest"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
	"github.com/opentalon/opentalon/store/pgtest"
)

// sealKey is the replicas' seal key in these tests.
var sealKey = bytes.Repeat([]byte{3}, store.SealKeySize)

// replicaSetup opens one PostgreSQL for every replica.
func replicaSetup(t *testing.T, dsn string, wrap func(*store.DB) core.Store) setup {
	dir := t.TempDir()
	return setup{
		openDB: func() (*store.DB, error) {
			return store.Open(context.Background(), dir, store.Options{Postgres: &store.Postgres{DSN: dsn}, LeaseTTL: 5 * time.Second, SealKey: sealKey})
		},
		wrap: wrap,
	}
}

// idle is a replica whose workers are all busy elsewhere: it takes
// events from Slack and commits them, and never claims one.
type idle struct{ *store.DB }

func (idle) Claim(context.Context, int, time.Time) ([]core.QueueItem, time.Time, error) {
	return nil, time.Time{}, nil
}

// TestReplicasThreadFollowUp: three replicas on one PostgreSQL, each with
// its own Socket Mode connection; Slack hands each envelope to one of
// them. Replica B saw a thread of people and found it was not the bot's;
// then the bot was called into that thread through replica A. A
// follow-up without a mention that reaches B is still answered, in the
// thread: whether the thread is the bot's comes from the replies in the
// database, not from B's memory.
func TestReplicasThreadFollowUp(t *testing.T) {
	dsn := pgtest.DSN(t)
	a := newRig(t, replicaSetup(t, dsn, nil))
	b := newRigOn(t, a.srv, replicaSetup(t, dsn, nil))
	a.srv.WaitConnected(t, 2, wait)
	c := newRigOn(t, a.srv, replicaSetup(t, dsn, nil))
	a.srv.WaitConnected(t, 3, wait)
	a.srv.WaitFor(t, "three open connections", wait, func() bool { return a.srv.Live() == 3 })
	srv := a.srv

	top := srv.Seed("C1", "", "UBOB", "people planning lunch")
	srv.DeliverOn(srv.ChannelMessage("carol", "C1", "pizza?", top), 1)
	calm()
	if ps := srv.Posts(); len(ps) != 0 {
		t.Fatalf("chatter in a thread of people was answered: %s", describePosts(ps))
	}
	srv.DeliverOn(srv.Mention("alice", "C1", "what is near the office?", top), 0)
	first := srv.WaitPosts(t, 1, wait)[0]
	if first.ThreadTS != top {
		t.Fatalf("the mention was answered outside its thread: %+v", first)
	}
	srv.DeliverOn(srv.ChannelMessage("carol", "C1", "and something vegetarian?", top), 1)
	posts := srv.WaitPosts(t, 2, wait)
	if p := posts[1]; p.ThreadTS != top || !strings.HasSuffix(p.Text, "and something vegetarian?") {
		t.Fatalf("the follow-up on another replica was answered with %+v", p)
	}
	calm()
	if ps := srv.Posts(); len(ps) != 2 {
		t.Fatalf("posts %s; want the two answers once each", describePosts(ps))
	}
	asked := len(a.agent.texts()) + len(b.agent.texts()) + len(c.agent.texts())
	if asked != 2 {
		t.Fatalf("the LLM was asked %d times across the replicas; want 2", asked)
	}
}

// TestReplicasSlashCommandAnsweredInPlace: a slash command reaches
// replica A, which commits it and keeps its response_url sealed in the
// database; replica B runs it (A never claims) and answers on that
// response_url, ephemeral, not with chat.postEphemeral.
func TestReplicasSlashCommandAnsweredInPlace(t *testing.T) {
	dsn := pgtest.DSN(t)
	a := newRig(t, replicaSetup(t, dsn, func(db *store.DB) core.Store { return idle{db} }))
	newRigOn(t, a.srv, replicaSetup(t, dsn, nil))
	a.srv.WaitConnected(t, 2, wait)
	a.srv.WaitFor(t, "two open connections", wait, func() bool { return a.srv.Live() == 2 })
	srv := a.srv

	env := srv.DeliverOn(srv.Slash("alice", "C1", "/model", ""), 0)
	srv.WaitFor(t, "the ephemeral answer", wait, func() bool { return len(srv.Ephemerals()) == 1 })
	eph := srv.Ephemerals()[0]
	if !strings.HasPrefix(eph.Text, "Model:") || eph.ResponseURL == "" || eph.ResponseType != "ephemeral" {
		t.Fatalf("answer = %+v; want core's answer on the command's response_url", eph)
	}
	srv.WaitFor(t, "the slash command acknowledged", wait, func() bool { return srv.Acked(env) })
	if n := len(srv.Calls("chat.postEphemeral")); n != 0 {
		t.Fatalf("chat.postEphemeral called %d times; the response_url was at hand", n)
	}
	// Used: the sealed copy is gone from the database.
	eventually(t, "the used response_url deleted", func() bool {
		_, ok, err := a.db.OpenSealed(context.Background(), "slack:response:cmd:"+env.EventID)
		return err == nil && !ok
	})
}

// TestReplicasEventsAPIRetryDeduped: the Events API behind a load
// balancer. Slack's retry of an event (X-Slack-Retry-Num) that reaches
// another replica than the first delivery is acknowledged and makes no
// second answer: the queue's dedupe key (channel and message id) in the
// database drops it, not the replica's memory of event ids.
func TestReplicasEventsAPIRetryDeduped(t *testing.T) {
	dsn := pgtest.DSN(t)
	srv := slacktest.New(t, botToken, appToken)
	var urls []string
	var rigs []*rig
	for i := 0; i < 2; i++ {
		s := replicaSetup(t, dsn, nil)
		s.config = eventsMode
		r := newRigOn(t, srv, s)
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		addr, err := r.bot.EventsAddr(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		urls = append(urls, "http://"+addr.String()+"/slack/events")
		rigs = append(rigs, r)
	}
	good := slacktest.Signed{Secret: signingSecret}
	env := srv.Mention("alice", "C1", "a question asked once", "")
	if code, body := slacktest.PostEvent(t, urls[0], env, good); code != 200 {
		t.Fatalf("first delivery: %d %q", code, body)
	}
	retry := good
	retry.RetryNum = 1
	if code, body := slacktest.PostEvent(t, urls[1], env, retry); code != 200 {
		t.Fatalf("the retry on the other replica: %d %q; want 200", code, body)
	}
	retry.RetryNum = 2
	if code, body := slacktest.PostEvent(t, urls[0], env, retry); code != 200 {
		t.Fatalf("the second retry: %d %q; want 200", code, body)
	}
	srv.WaitPosts(t, 1, wait)
	eventually(t, "the answer done", func() bool { return rigs[0].doneRows(t) == 1 })
	calm()
	if ps := srv.Posts(); len(ps) != 1 || rigs[1].rows(t) != 1 {
		t.Fatalf("posts %s, queue rows %d; want one answer of one row", describePosts(ps), rigs[1].rows(t))
	}
}
