package routing

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

// senderConv is fakeConv that says who sent each request, as the queue
// keeps it, and which message failed last.
type senderConv struct {
	*fakeConv
	senders map[int64]core.Inbound
	failed  *core.Inbound
}

func (c *senderConv) RequestSender(_ context.Context, id int64) (core.Inbound, bool, error) {
	in, ok := c.senders[id]
	return in, ok, nil
}

func (c *senderConv) LastFailedMessage(context.Context, core.ConversationKey, time.Time) (core.Inbound, bool, error) {
	if c.failed == nil {
		return core.Inbound{}, false, nil
	}
	return *c.failed, true, nil
}

// TestInAGroupOnlyTheAskerRedoesTheAnswer: in a group, /retry from a
// member other than the one whose message was answered is refused with
// a note naming who may, and judges nothing; their 👎 counts as a verdict
// (the gateway records it) but does not have the answer replaced. The
// asker's own /retry and 👎 re-answer as before, and so does anyone's in
// a private chat, a schedule's answer, or an answer whose sender the
// store no longer knows.
func TestInAGroupOnlyTheAskerRedoesTheAnswer(t *testing.T) {
	group := core.ConversationKey{Channel: "telegram", Chat: "-100"}
	alice := core.Inbound{Conversation: group, UserID: "1", UserName: "@alice", Text: "what is a monad"}
	for _, tc := range []struct {
		name   string
		asked  *core.Inbound // the sender of the answered request; nil: unknown
		by     string        // who sends /retry and 👎
		retrys bool          // want a re-answer
	}{
		{"another member in a group", &alice, "2", false},
		{"the asker in a group", &alice, "1", true},
		{"a private chat", &core.Inbound{Conversation: group, UserID: "1", Private: true}, "2", true},
		{"a schedule's answer", &core.Inbound{Conversation: group, UserID: "1", Origin: core.OriginSchedule}, "2", true},
		{"an answer whose sender is gone", nil, "2", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _, _, st, _ := newTestRouter(t, func(o *Options) { o.EscalateOnReaction = true })
			conv := &senderConv{fakeConv: &fakeConv{sigs: st,
				last: &core.Reply{ID: 10, RequestID: 5, Model: "p/cheap", TaskType: TaskChat},
				hist: []core.ChatMessage{{Role: core.RoleUser, Content: "what is a monad", Name: "@alice"}, {Role: core.RoleAssistant, Content: "a burrito"}},
			}, senders: map[int64]core.Inbound{}}
			if tc.asked != nil {
				conv.senders[5] = *tc.asked
			}
			e := NewEscalator(r, conv, nil)
			ctx := context.Background()
			req := core.CommandRequest{RequestID: 6, Session: core.Session{ID: 3, Conversation: group},
				In: core.Inbound{Conversation: group, UserID: tc.by, UserName: "@bob", Text: "/retry", Private: tc.asked != nil && tc.asked.Private}}
			d, err := e.Intercept(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if got := d.Turn != nil; got != tc.retrys {
				t.Fatalf("/retry decision = %+v; want a re-answer %v", d, tc.retrys)
			}
			if !tc.retrys {
				if d.Reply != "Only @alice can retry this answer: it answers their message. Ask your own question, or reply to it, to get an answer of your own." {
					t.Fatalf("/retry by another member answered %q", d.Reply)
				}
				if n := len(st.Signals()); n != 0 {
					t.Fatalf("/retry by another member recorded %d signals; want none", n)
				}
			}

			re := core.Reaction{Conversation: group, MessageID: "m", UserID: tc.by, Emoji: "👎", Added: true, Polarity: core.Negative}
			d, err = NewEscalator(r, conv, nil).InterceptReaction(ctx, re, conv.last, core.Session{ID: 4, Conversation: group})
			if err != nil {
				t.Fatal(err)
			}
			if got := d.Turn != nil; got != tc.retrys {
				t.Fatalf("👎 decision = %+v; want a re-answer %v", d, tc.retrys)
			}
		})
	}

	// /retry after an apology: another member's failed message is theirs
	// to try again.
	r, _, _, st, _ := newTestRouter(t, nil)
	conv := &senderConv{fakeConv: &fakeConv{sigs: st}, failed: &alice}
	req := core.CommandRequest{RequestID: 6, Session: core.Session{ID: 3, Conversation: group}, In: core.Inbound{Conversation: group, UserID: "2", Text: "/retry"}}
	d, err := NewEscalator(r, conv, nil).Intercept(context.Background(), req)
	if err != nil || d.Turn != nil || !strings.HasPrefix(d.Reply, "Only @alice can retry") {
		t.Fatalf("/retry of another member's failed message = %+v, %v; want it refused", d, err)
	}
	req.In.UserID = "1"
	if d, err := NewEscalator(r, conv, nil).Intercept(context.Background(), req); err != nil || d.Turn == nil {
		t.Fatalf("/retry of one's own failed message = %+v, %v; want it answered again", d, err)
	}
}

// TestInAGroupOnlyTheAskersFollowUpJudgesTheAnswer: in a group, the next
// message is a verdict on the previous answer (a rejection re-answers
// it, anything else accepts it) only when its sender asked the question
// that answer answers; another member's message is a new message,
// answered on its own, and judges nothing. A private chat, and an
// answer whose sender the store no longer knows, are judged as before.
// The asker comes from the follow-up read with the session (the
// gateway's path) or, for a store without it, from RequestSender.
func TestInAGroupOnlyTheAskersFollowUpJudgesTheAnswer(t *testing.T) {
	group := core.ConversationKey{Channel: "telegram", Chat: "-100"}
	alice := core.Inbound{Conversation: group, UserID: "1", UserName: "@alice", Text: "what is a monad"}
	private := core.Inbound{Conversation: group, UserID: "1", Private: true}
	for _, tc := range []struct {
		name   string
		asked  *core.Inbound // the sender of the answered request; nil: unknown
		by     string        // who sends the next message
		text   string
		taken  bool          // want a re-answer
		signal core.Polarity // want this signal on the answer (Neutral: none)
	}{
		{"another member rejects", &alice, "2", "that's wrong", false, core.Neutral},
		{"another member says try again", &alice, "2", "no, try again", false, core.Neutral},
		{"another member moves on", &alice, "2", "what's the capital of Peru?", false, core.Neutral},
		{"another member thanks", &alice, "2", "thanks, that works!", false, core.Neutral},
		{"the asker says try again", &alice, "1", "try again", true, core.Negative},
		{"the asker moves on", &alice, "1", "what's the capital of Peru?", false, core.Positive},
		{"a private chat", &private, "2", "that's wrong", true, core.Negative},
		{"a private chat moves on", &private, "2", "what's the capital of Peru?", false, core.Positive},
		{"an answer whose sender is gone", nil, "2", "that's wrong", true, core.Negative},
	} {
		for _, withSession := range []bool{false, true} {
			name := tc.name
			if withSession {
				name += " (read with the session)"
			}
			t.Run(name, func(t *testing.T) {
				r, _, _, st, _ := newTestRouter(t, nil)
				last := &core.Reply{ID: 10, RequestID: 5, Model: "p/cheap", TaskType: TaskChat}
				fc := &fakeConv{sigs: st, last: last,
					hist: []core.ChatMessage{{Role: core.RoleUser, Content: "what is a monad", Name: "@alice"}, {Role: core.RoleAssistant, Content: "a burrito"}},
					esc:  map[int64]core.EscalationState{3: {Question: "what is a monad", Models: []string{"p/big"}}},
				}
				var conv Conversations = fc
				req := core.CommandRequest{RequestID: 6, Session: core.Session{ID: 3, Conversation: group},
					In: core.Inbound{Conversation: group, UserID: tc.by, UserName: "@bob", Text: tc.text, Private: tc.asked != nil && tc.asked.Private}}
				if withSession {
					req.FollowUp = &core.FollowUp{Last: last, Question: "what is a monad", Escalation: fc.esc[3], Asker: tc.asked}
				} else {
					sc := &senderConv{fakeConv: fc, senders: map[int64]core.Inbound{}}
					if tc.asked != nil {
						sc.senders[5] = *tc.asked
					}
					conv = sc
				}
				d, err := NewEscalator(r, conv, nil).Intercept(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				if d.Taken() != tc.taken || d.Reply != "" {
					t.Fatalf("%q from user %s: decision %+v; want a re-answer %v and no reply of its own", tc.text, tc.by, d, tc.taken)
				}
				sigs := st.Signals()
				if tc.signal == core.Neutral {
					if len(sigs) != 0 {
						t.Fatalf("%q from another member recorded %+v; want no verdict on the asker's answer", tc.text, sigs)
					}
					if chain := fc.esc[3]; chain.Question != "" || len(chain.Models) != 0 {
						t.Fatalf("another member's new message left the escalation chain %+v; want it ended", chain)
					}
					return
				}
				if len(sigs) != 1 || sigs[0].Polarity != tc.signal || sigs[0].ReplyID != 10 || sigs[0].UserID != tc.by {
					t.Fatalf("%q from user %s recorded %+v; want one signal of polarity %v on reply 10", tc.text, tc.by, sigs, tc.signal)
				}
			})
		}
	}
}
