package discord_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/discord"
	"github.com/opentalon/opentalon/channels/discord/discordtest"
	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
)

func TestInvalidTokenFailsStartNamingTheKey(t *testing.T) {
	t.Parallel()
	t.Run("close code 4004", func(t *testing.T) {
		t.Parallel()
		srv := discordtest.New(t, token)
		srv.CloseOnIdentify(discordtest.CloseAuthenticationFailed)
		bot, err := discord.New(options(t, srv, &syncBuffer{}))
		if err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-runBot(t, bot, &fakeSink{}):
			if core.ErrorKind(err) != core.KindAuth || !strings.Contains(err.Error(), "channels.discord.token") || !strings.Contains(err.Error(), "4004") {
				t.Fatalf("Run = %v (kind %v), want an auth error naming channels.discord.token and 4004", err, core.ErrorKind(err))
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not fail on close code 4004")
		}
		if err := bot.Healthy(); err == nil {
			t.Error("Healthy = nil after the token was refused")
		}
	})
	t.Run("401 from REST", func(t *testing.T) {
		t.Parallel()
		srv := discordtest.New(t, token)
		o := options(t, srv, &syncBuffer{})
		o.Config.Token = config.Secret("MTEx.fake.SECRET-discord-wrong")
		bot, err := discord.New(o)
		if err != nil {
			t.Fatal(err)
		}
		err = <-runBot(t, bot, &fakeSink{})
		if core.ErrorKind(err) != core.KindAuth || !strings.Contains(err.Error(), "channels.discord.token") || strings.Contains(err.Error(), "SECRET") {
			t.Fatalf("Run = %v, want an auth error naming channels.discord.token without the token", err)
		}
	})
	t.Run("no token, bad api_url", func(t *testing.T) {
		t.Parallel()
		cfg := config.Default().Channels.Discord
		if _, err := discord.New(discord.Options{Config: cfg}); core.ErrorKind(err) != core.KindInvalid || !strings.Contains(err.Error(), "channels.discord.token") {
			t.Errorf("New without a token = %v", err)
		}
		cfg.Token, cfg.APIURL = "t", "discord.com"
		if _, err := discord.New(discord.Options{Config: cfg}); core.ErrorKind(err) != core.KindInvalid || !strings.Contains(err.Error(), "channels.discord.api_url") {
			t.Errorf("New with api_url discord.com = %v", err)
		}
	})
}

func TestDisallowedMessageContentIntentSaysWhichAndKeepsWorking(t *testing.T) {
	t.Parallel()
	r := start(t, nil, func(s *discordtest.Server) { s.SetMessageContentAllowed(false) })
	r.waitLog(t, "Message Content Intent")
	r.mention(t, "still there?")
	if s := r.waitSent(t, 1)[0]; s.Content != "echo: still there?" {
		t.Errorf("reply = %q", s.Content)
	}
	ids := r.srv.Identifies()
	if len(ids) != 2 || ids[0].Intents&discordtest.IntentMessageContent == 0 || ids[1].Intents&discordtest.IntentMessageContent != 0 {
		t.Errorf("identifies = %+v, want one with the message content intent, then one without", ids)
	}
	if !strings.Contains(r.logs.String(), "Privileged Gateway Intents") {
		t.Errorf("the warning does not say where to enable the intent:\n%s", r.logs.String())
	}
	if err := r.bot.Healthy(); err != nil {
		t.Errorf("Healthy = %v", err)
	}
}

func TestMalformedDispatchesAreLoggedAndSkipped(t *testing.T) {
	t.Parallel()
	r := start(t, nil, nil)
	r.srv.SendRaw(t, []byte("this is not JSON"))
	r.srv.SendRaw(t, []byte(`{"op":0,"t":"MESSAGE_CREATE","s":null,"d":{"id":`))
	r.srv.Dispatch(t, "MESSAGE_CREATE", "garbage")
	r.srv.Dispatch(t, "MESSAGE_CREATE", map[string]any{"content": "no id, no author"})
	r.srv.Dispatch(t, "MESSAGE_CREATE", map[string]any{"id": "1", "channel_id": r.channel, "author": "nobody", "mentions": 5})
	r.srv.Dispatch(t, "MESSAGE_CREATE", map[string]any{"id": "2", "channel_id": r.channel, "guild_id": r.guild, "content": "no author"})
	r.srv.Dispatch(t, "MESSAGE_REACTION_ADD", []int{1, 2})
	r.srv.Dispatch(t, "MESSAGE_REACTION_ADD", map[string]any{"emoji": map[string]any{"name": "👎"}})
	r.srv.Dispatch(t, "INTERACTION_CREATE", map[string]any{"type": 2, "data": map[string]any{"name": "model"}})
	r.srv.Dispatch(t, "INTERACTION_CREATE", map[string]any{"type": 2, "data": "x"})
	r.srv.Dispatch(t, "SOMETHING_NEW", map[string]any{"x": 1})
	r.srv.Dispatch(t, "MESSAGE_CREATE", nil)
	r.mention(t, "after the garbage")
	if s := r.waitSent(t, 1)[0]; s.Content != "echo: after the garbage" {
		t.Errorf("reply = %q", s.Content)
	}
	if n := strings.Count(r.logs.String(), "skipping a malformed Discord event"); n < 6 {
		t.Errorf("%d malformed events logged, want every one:\n%s", n, r.logs.String())
	}
	if err := r.bot.Healthy(); err != nil {
		t.Errorf("Healthy = %v", err)
	}
	if got := len(r.agent.seen()); got != 1 {
		t.Errorf("the agent saw %d turns", got)
	}
}

func TestReconnectResumesTheSession(t *testing.T) {
	t.Parallel()
	r := start(t, nil, nil)
	r.mention(t, "before")
	r.waitSent(t, 1)
	r.srv.Disconnect(discordtest.CloseUnknownError)
	r.srv.WaitFor(t, "a resume", func() bool { return r.srv.Resumes() == 1 && r.srv.Connected() })
	r.mention(t, "after")
	r.waitSent(t, 2)
	if n := len(r.srv.Identifies()); n != 1 {
		t.Errorf("%d identifies, want the session resumed, not a new one", n)
	}
}

func TestResumeFailingFallsBackToAFreshIdentify(t *testing.T) {
	t.Parallel()
	r := start(t, nil, nil)
	r.srv.WaitFor(t, "connected", r.srv.Connected)
	r.srv.FailResumes(true)
	r.srv.Disconnect(discordtest.CloseUnknownError)
	r.srv.WaitFor(t, "a fresh identify", func() bool { return len(r.srv.Identifies()) == 2 && r.srv.Connected() })
	if n := r.srv.Resumes(); n < 2 {
		t.Errorf("%d resumes tried before identifying afresh, want 2", n)
	}
	r.mention(t, "new session")
	if s := r.waitSent(t, 1)[0]; s.Content != "echo: new session" {
		t.Errorf("reply = %q", s.Content)
	}
}

func TestUnacknowledgedHeartbeatsRecycleTheConnection(t *testing.T) {
	t.Parallel()
	r := start(t, func(_ *config.Discord, o *discord.Options) { o.HeartbeatInterval = 100 * time.Millisecond },
		func(s *discordtest.Server) { s.SetHeartbeatInterval(100 * time.Millisecond) })
	r.srv.WaitFor(t, "heartbeats", func() bool { return r.srv.Heartbeats() >= 3 })
	r.srv.Zombie()
	// A message sent into the zombie connection is replayed on resume.
	r.mention(t, "through the zombie")
	r.srv.WaitFor(t, "the connection recycled and resumed", func() bool { return r.srv.Resumes() >= 1 })
	if s := r.waitSent(t, 1)[0]; s.Content != "echo: through the zombie" {
		t.Errorf("reply = %q", s.Content)
	}
	if !strings.Contains(r.logs.String(), "no heartbeat ACK") {
		t.Errorf("the recycling is not logged:\n%s", r.logs.String())
	}
	if n := len(r.srv.Identifies()); n != 1 {
		t.Errorf("%d identifies, want the session resumed", n)
	}
}

func TestReadyzDownWhileNotConnected(t *testing.T) {
	t.Parallel()
	r := start(t, nil, nil)
	// The fake takes the connection as its own only once READY is out,
	// which the bot may read first: a Disconnect before it closes nothing.
	r.srv.WaitFor(t, "healthy", func() bool { return r.bot.Healthy() == nil && r.srv.Connected() })
	r.srv.RefuseConnections(true)
	r.srv.Disconnect(discordtest.CloseUnknownError)
	r.srv.WaitFor(t, "unhealthy while disconnected", func() bool { return r.bot.Healthy() != nil })
	for _, st := range r.gw.ChannelStates() {
		if st.Err != nil {
			t.Errorf("the channel's Run failed (%v): reconnecting is the channel's own job", st.Err)
		}
	}
	r.srv.RefuseConnections(false)
	r.srv.WaitFor(t, "healthy again", func() bool { return r.bot.Healthy() == nil })
	r.mention(t, "back")
	r.waitSent(t, 1)
}

// Issue 25 (lower): a send whose answer was lost after Discord made the
// message (a timeout, a 502) is tried again with the same nonce,
// enforced, so it is not posted twice.
func TestSendAfterALostAnswerPostsOnce(t *testing.T) {
	t.Parallel()
	r := start(t, nil, nil)
	r.srv.WaitFor(t, "connected", r.srv.Connected)
	r.srv.LoseResponses("POST", "/channels/"+r.channel+"/messages", 2)
	to := core.Outbound{Conversation: core.ConversationKey{Channel: "discord", Chat: r.channel}}
	id, err := r.bot.Send(context.Background(), to, "exactly once")
	if err != nil {
		t.Fatal(err)
	}
	var same []discordtest.Sent
	for _, s := range r.srv.Sent() {
		if s.Content == "exactly once" {
			same = append(same, s)
		}
	}
	if len(same) != 1 || same[0].ID != id {
		t.Fatalf("posted %d times (%+v), Send returned %s; want one message, its id returned", len(same), same, id)
	}
	// A file alike.
	r.srv.LoseResponses("POST", "/channels/"+r.channel+"/messages", 1)
	if _, err := r.bot.Upload(context.Background(), to, core.Attachment{Name: "a.txt", MIME: "text/plain", Data: []byte("hi")}); err != nil {
		t.Fatal(err)
	}
	if n := len(r.srv.Uploads()); n != 1 {
		t.Fatalf("the file was posted %d times; want once", n)
	}
	// Two sends of the same text are two messages: each has its own nonce.
	if _, err := r.bot.Send(context.Background(), to, "exactly once"); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range r.srv.Sent() {
		if s.Content == "exactly once" {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d messages after a second send; want 2", n)
	}
}

func TestSendRetriesThenReportsGivingUp(t *testing.T) {
	t.Parallel()
	r := start(t, nil, nil)
	r.srv.Fail("POST", "/messages", 500, 2)
	r.mention(t, "flaky")
	if s := r.waitSent(t, 1)[0]; s.Content != "echo: flaky" {
		t.Errorf("reply = %q", s.Content)
	}
	if !strings.Contains(r.logs.String(), "retrying") {
		t.Errorf("the retries are not logged:\n%s", r.logs.String())
	}
	r.srv.Fail("POST", "/channels/"+r.channel+"/messages", 503, 100)
	to := core.Outbound{Conversation: core.ConversationKey{Channel: "discord", Chat: r.channel}}
	_, err := r.bot.Send(context.Background(), to, "never arrives")
	if err == nil || !strings.Contains(err.Error(), "gave up after 4 attempts") || core.ErrorKind(err) != core.KindUnavailable {
		t.Errorf("Send = %v, want it to give up after 4 attempts", err)
	}
	_, err = r.bot.Send(context.Background(), core.Outbound{Conversation: core.ConversationKey{Channel: "discord", Chat: "404404"}}, "to nowhere")
	if core.ErrorKind(err) != core.KindBadRequest {
		t.Errorf("Send to an unknown channel = %v, want a bad request, not retried", err)
	}
}

// Issue 25, finding 7: a user whose username is an allowed user's id is
// not that user (ids and usernames were checked against one list).
func TestAllowUsersKeepsIDsAndNamesApart(t *testing.T) {
	t.Parallel()
	srv := discordtest.New(t, token)
	o := options(t, srv, &syncBuffer{})
	alice := srv.User("alice")
	impostor := srv.User(alice.ID) // a username spelled like alice's id
	o.Config.AllowUsers = []string{alice.ID}
	bot, err := discord.New(o)
	if err != nil {
		t.Fatal(err)
	}
	sink := &fakeSink{}
	runBot(t, bot, sink)
	srv.Message(t, discordtest.Msg{Channel: srv.DM(impostor), Author: impostor, Content: "I am alice"})
	want := srv.Message(t, discordtest.Msg{Channel: srv.DM(alice), Author: alice, Content: "it is me"})
	srv.WaitFor(t, "alice's message accepted", func() bool { return len(sink.inbound()) >= 1 })
	time.Sleep(50 * time.Millisecond)
	if got := sink.inbound(); len(got) != 1 || got[0].MessageID != want {
		t.Fatalf("accepted %+v; want only alice's message, not the impostor's", got)
	}
}

func TestAllowGuildsAndUsers(t *testing.T) {
	t.Parallel()
	srv := discordtest.New(t, token)
	logs := &syncBuffer{}
	o := options(t, srv, logs)
	home := srv.Guild()
	o.Config.AllowGuilds = []string{home}
	o.Config.AllowUsers = []string{"alice"}
	bot, err := discord.New(o)
	if err != nil {
		t.Fatal(err)
	}
	sink := &fakeSink{}
	runBot(t, bot, sink)
	alice, bob := srv.User("alice"), srv.User("bob")
	away := srv.Guild()
	homeCh, awayCh := srv.TextChannel(home), srv.TextChannel(away)
	m := func(ch, guild string, u discordtest.User, text string) string {
		return srv.Message(t, discordtest.Msg{Channel: ch, Guild: guild, Author: u, Content: discordtest.Mention(srv.Bot) + " " + text, Mentions: []discordtest.User{srv.Bot}})
	}
	m(awayCh, away, alice, "another guild")
	m(homeCh, home, bob, "bob is not allowed")
	srv.Message(t, discordtest.Msg{Channel: srv.DM(bob), Author: bob, Content: "bob in private"})
	want := []string{m(homeCh, home, alice, "home"), srv.Message(t, discordtest.Msg{Channel: srv.DM(alice), Author: alice, Content: "alice in private"})}
	srv.WaitFor(t, "two messages accepted", func() bool { return len(sink.inbound()) >= 2 })
	time.Sleep(50 * time.Millisecond)
	got := sink.inbound()
	if len(got) != 2 || got[0].MessageID != want[0] || got[1].MessageID != want[1] {
		t.Errorf("accepted %+v, want only alice in the home guild and in private", got)
	}
	// An application command from outside the lists is answered at once,
	// to its user only.
	id := srv.Interaction(t, alice, away, awayCh, "status", nil)
	srv.WaitFor(t, "the refusal", func() bool { return len(srv.Callbacks()) == 1 })
	if cb := srv.Callbacks()[0]; cb.Interaction != id || cb.Type != 4 || cb.Flags&64 == 0 {
		t.Errorf("callback = %+v, want an ephemeral message", cb)
	}
}

func TestGatewayBotMissingOrDownAtStart(t *testing.T) {
	t.Parallel()
	t.Run("404: connect anyway", func(t *testing.T) {
		t.Parallel()
		srv := discordtest.New(t, token)
		srv.Fail("GET", "/gateway/bot", 404, 1)
		bot, err := discord.New(options(t, srv, &syncBuffer{}))
		if err != nil {
			t.Fatal(err)
		}
		runBot(t, bot, &fakeSink{})
		srv.WaitFor(t, "connected", srv.Connected)
	})
	t.Run("503: Run fails, to be restarted", func(t *testing.T) {
		t.Parallel()
		srv := discordtest.New(t, token)
		srv.Fail("GET", "/gateway/bot", 503, 10)
		bot, err := discord.New(options(t, srv, &syncBuffer{}))
		if err != nil {
			t.Fatal(err)
		}
		err = <-runBot(t, bot, &fakeSink{})
		if k := core.ErrorKind(err); err == nil || k == core.KindAuth || k == core.KindInvalid || !strings.Contains(err.Error(), "discovery") {
			t.Errorf("Run = %v (kind %v), want a restartable discovery error", err, k)
		}
		if bot.Healthy() == nil {
			t.Error("Healthy = nil while discovery fails")
		}
	})
}

// A gateway that drops every connection soon after it opens is resumed
// after growing waits, as one that refuses connections is, not at once
// in a loop (same family as issue 25's Telegram poll without a floor).
func TestConnectionsLostAtOnceBackOff(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var waits []time.Duration
	r := start(t, func(_ *config.Discord, o *discord.Options) {
		o.Sleep = func(ctx context.Context, d time.Duration) error {
			mu.Lock()
			waits = append(waits, d)
			mu.Unlock()
			return quickSleep(ctx, d)
		}
	}, nil)
	for range 4 {
		r.srv.WaitFor(t, "connected", r.srv.Connected)
		r.srv.Disconnect(discordtest.CloseUnknownError)
	}
	r.srv.WaitFor(t, "connected again", r.srv.Connected)
	mu.Lock()
	defer mu.Unlock()
	var backoff []time.Duration
	for _, d := range waits {
		if d >= time.Second {
			backoff = append(backoff, d)
		}
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
	if !slices.Equal(backoff, want) {
		t.Fatalf("waits %v; want %v before the four resumes", backoff, want)
	}
}

// outageSink fails Accept as a database out of reach does (KindUnavailable)
// the first fail times, then accepts.
type outageSink struct {
	fakeSink
	mu    sync.Mutex
	fail  int
	tries int
}

// down counts a try and says whether the database is still out of reach.
func (s *outageSink) down() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries++
	if s.tries <= s.fail {
		return &core.Error{Kind: core.KindUnavailable, Msg: "the database is out of reach (test)"}
	}
	return nil
}

func (s *outageSink) Accept(ctx context.Context, in core.Inbound) error {
	if err := s.down(); err != nil {
		return err
	}
	return s.fakeSink.Accept(ctx, in)
}

// TestMessageWaitsOutADatabaseOutage: Discord sends a message once; while
// the database is out of reach for longer than the store's few quick
// retries (a PostgreSQL restart), the message waits for it and is
// accepted once it answers, in order with the one after it; it was
// dropped after five tries (about three seconds).
func TestMessageWaitsOutADatabaseOutage(t *testing.T) {
	t.Parallel()
	srv := discordtest.New(t, token)
	bot, err := discord.New(options(t, srv, &syncBuffer{}))
	if err != nil {
		t.Fatal(err)
	}
	sink := &outageSink{fail: 12}
	runBot(t, bot, sink)
	alice := srv.User("alice")
	dm := srv.DM(alice)
	srv.Message(t, discordtest.Msg{Channel: dm, Author: alice, Content: "during the outage"})
	srv.Message(t, discordtest.Msg{Channel: dm, Author: alice, Content: "after it"})
	srv.WaitFor(t, "both messages accepted", func() bool { return len(sink.inbound()) == 2 })
	if in := sink.inbound(); in[0].Text != "during the outage" || in[1].Text != "after it" {
		t.Errorf("accepted %q then %q; want the outage's message first", in[0].Text, in[1].Text)
	}
}

// TestMessageWaitingAtShutdownIsReported: a message still waiting for the
// database when the channel stops is lost (Discord sends it once): the
// log says so at ERROR, naming the event, instead of nothing.
func TestMessageWaitingAtShutdownIsReported(t *testing.T) {
	t.Parallel()
	logs := stopWhileWaiting(t, &outageSink{fail: 1 << 30}, func(logs *syncBuffer, srv *discordtest.Server) {
		srv.WaitFor(t, "the message waiting", func() bool { return strings.Contains(logs.String(), "wait until it answers") })
	})
	if !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "dropped when the channel stopped") {
		t.Errorf("no ERROR for the message lost at shutdown:\n%s", logs)
	}
}

// stopWhileWaiting runs a bot on sink, has alice send it a message, stops
// the channel once waiting says the message waits for the database, and
// returns the channel's log.
func stopWhileWaiting(t *testing.T, sink core.Sink, waiting func(*syncBuffer, *discordtest.Server)) string {
	t.Helper()
	srv := discordtest.New(t, token)
	logs := &syncBuffer{}
	bot, err := discord.New(options(t, srv, logs))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- bot.Run(ctx, sink) }()
	t.Cleanup(func() { bot.Close() })
	alice := srv.User("alice")
	srv.Message(t, discordtest.Msg{Channel: srv.DM(alice), Author: alice, Content: "during the outage"})
	waiting(logs, srv)
	cancel()
	<-done
	return logs.String()
}

// React fails as Accept does while the database is down.
func (s *outageSink) React(ctx context.Context, r core.Reaction) error {
	if err := s.down(); err != nil {
		return err
	}
	return s.fakeSink.React(ctx, r)
}

// TestReactionWaitsOutADatabaseOutage: a 👎 on the bot's answer during a
// database outage longer than the store's quick retries waits for the
// database, as a message does; it was dropped after five tries.
func TestReactionWaitsOutADatabaseOutage(t *testing.T) {
	t.Parallel()
	srv := discordtest.New(t, token)
	bot, err := discord.New(options(t, srv, &syncBuffer{}))
	if err != nil {
		t.Fatal(err)
	}
	sink := &outageSink{}
	runBot(t, bot, sink)
	alice := srv.User("alice")
	dm := srv.DM(alice)
	srv.Message(t, discordtest.Msg{Channel: dm, Author: alice, Content: "a question"})
	srv.WaitFor(t, "the question", func() bool { return len(sink.inbound()) == 1 })
	answer, err := bot.Send(context.Background(), core.Outbound{Conversation: sink.inbound()[0].Conversation}, "an answer")
	if err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	sink.fail, sink.tries = 12, 0
	sink.mu.Unlock()
	srv.React(t, alice, "", dm, answer, "👎", true)
	srv.WaitFor(t, "the reaction accepted after the outage", func() bool {
		sink.fakeSink.mu.Lock()
		defer sink.fakeSink.mu.Unlock()
		return len(sink.fakeSink.reacts) == 1
	})
}

// cutSink is out of reach for its first try; its next tries hang (a
// dial to a database that does not answer) until the channel stops.
type cutSink struct {
	outageSink
	hanging chan struct{}
	once    sync.Once
}

func (s *cutSink) Accept(ctx context.Context, in core.Inbound) error {
	if err := s.down(); err != nil {
		return err
	}
	s.once.Do(func() { close(s.hanging) })
	<-ctx.Done()
	return fmt.Errorf("dial the database: %w", ctx.Err())
}

// TestMessageCutShortAtShutdownIsReported: a message waiting out a
// database outage whose try is under way (a dial to a server that does
// not answer) when the channel stops is lost as one between tries is:
// the log says so at ERROR. The cut try's error (the context's) hid the
// outage, and nothing was logged.
func TestMessageCutShortAtShutdownIsReported(t *testing.T) {
	t.Parallel()
	sink := &cutSink{outageSink: outageSink{fail: 1}, hanging: make(chan struct{})}
	logs := stopWhileWaiting(t, sink, func(*syncBuffer, *discordtest.Server) { <-sink.hanging })
	if !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "dropped when the channel stopped") {
		t.Errorf("no ERROR for the message lost at shutdown:\n%s", logs)
	}
}
