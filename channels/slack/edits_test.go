package slack_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/opentalon/opentalon/channels/slack/slacktest"
	"github.com/opentalon/opentalon/core"
)

// editSink records what it is handed; every accepted message counts as
// still queued, so an edit of it is replaced.
type editSink struct {
	mu       sync.Mutex
	accepted []core.Inbound
	edited   []core.Inbound
}

func (s *editSink) Accept(_ context.Context, in core.Inbound) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accepted = append(s.accepted, in)
	return nil
}

func (s *editSink) Edit(_ context.Context, in core.Inbound) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.accepted {
		if a.MessageID == in.MessageID {
			s.edited = append(s.edited, in)
			return true, nil
		}
	}
	return false, nil
}

func (s *editSink) React(context.Context, core.Reaction) error { return nil }
func (s *editSink) Commands() []core.CommandInfo               { return nil }

func (s *editSink) seen() (accepted, edited []core.Inbound) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]core.Inbound(nil), s.accepted...), append([]core.Inbound(nil), s.edited...)
}

// TestEditedMessages: Slack sends an edit as a message_changed event and,
// when the edited message mentions the bot in a channel, as a second
// app_mention of the same ts carrying "edited". An edit replaces the text
// of the message still queued (as on Telegram and Discord) and is never
// a second message; a message edited to mention the bot is answered.
func TestEditedMessages(t *testing.T) {
	srv, sink, deliver := runEdits(t)

	mention := srv.Mention("alice", "C1", "teh question", "")
	dm := srv.DM("alice", "helo", "")
	plain := srv.ChannelMessage("bob", "C1", "no bot here", "")
	deliver(mention, dm, plain)
	changed, again := srv.Edit(mention, slacktest.BotMention+" the question")
	dmChanged, _ := srv.Edit(dm, "hello")
	plainChanged, plainMention := srv.Edit(plain, slacktest.BotMention+" now for you")
	if again.Type == "" || plainMention.Type == "" {
		t.Fatal("the fake sent no app_mention for an edited mention")
	}
	deliver(changed, again, dmChanged, plainChanged, plainMention)

	accepted, edited := sink.seen()
	var texts []string
	for _, in := range accepted {
		texts = append(texts, in.Text)
	}
	if len(accepted) != 3 || accepted[0].Text != "teh question" || accepted[1].Text != "helo" || accepted[2].Text != "now for you" {
		t.Fatalf("accepted %q; want the mention, the DM and the message edited to mention the bot, each once", texts)
	}
	if len(edited) != 2 || edited[0].MessageID != accepted[0].MessageID || edited[0].Text != "the question" ||
		edited[1].MessageID != accepted[1].MessageID || edited[1].Text != "hello" {
		t.Fatalf("edits %+v; want the mention's and the DM's new text", edited)
	}
}

// A mention in a channel's thread carries the thread's earlier messages
// in its Context; an edit while it is queued replaces its text alone.
func TestEditedMentionInAThread(t *testing.T) {
	srv, sink, deliver := runEdits(t)
	parent := srv.Seed("C3", "", slacktest.UserID("carol"), "the deploy failed at step 3")
	mention := srv.Mention("alice", "C3", "waht went wrong?", parent)
	deliver(mention)
	changed, again := srv.Edit(mention, slacktest.BotMention+" what went wrong?")
	deliver(changed, again)
	accepted, edited := sink.seen()
	if len(accepted) != 1 || !strings.Contains(accepted[0].Context, "the deploy failed at step 3") || accepted[0].Text != "waht went wrong?" {
		t.Fatalf("accepted %+v; want the mention once, the thread in its context", accepted)
	}
	if len(edited) != 1 || edited[0].Text != "what went wrong?" {
		t.Fatalf("edits %+v; want the mention's new text", edited)
	}
}

// runEdits runs a bot on a fake Slack into an editSink; deliver hands it
// envelopes (those of no type skipped) and waits until each is acked.
func runEdits(t *testing.T) (*slacktest.Server, *editSink, func(...slacktest.Envelope)) {
	srv := slacktest.New(t, botToken, appToken)
	b := newBot(t, srv, nil, nil)
	sink := &editSink{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, sink) }()
	t.Cleanup(func() { cancel(); <-done })
	srv.WaitConnected(t, 1, wait)
	deliver := func(envs ...slacktest.Envelope) {
		t.Helper()
		for _, e := range envs {
			if e.Type == "" {
				continue
			}
			srv.Deliver(e)
			srv.WaitFor(t, "the envelope acknowledged", wait, func() bool { return srv.Acked(e) })
		}
	}
	return srv, sink, deliver
}
