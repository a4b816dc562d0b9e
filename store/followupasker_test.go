package store

import (
	"context"
	"testing"

	"github.com/opentalon/opentalon/core"
)

// TestFollowUpAskerOfAPayloadThatDoesNotDecode: a queue item whose
// payload does not decode leaves the follow-up's asker unknown, on both
// reads and both engines, and is no error: every later message of the
// conversation would otherwise fail.
func TestFollowUpAskerOfAPayloadThatDoesNotDecode(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(testing.TB) *DB
	}{
		{"sqlite", func(t testing.TB) *DB { return openTest(t, Options{}) }},
		{"postgres", func(t testing.TB) *DB { return openPG(t, Options{}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := tc.open(t)
			ctx := context.Background()
			c := core.ConversationKey{Channel: "telegram", Chat: "-100"}
			s, err := db.ActiveSession(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			in := core.Inbound{Conversation: c, MessageID: "1", Text: "q", UserID: "u1"}
			q, _, err := db.Enqueue(ctx, core.QueueItem{Kind: core.EventMessage, Conversation: c, DedupeKey: "telegram:-100:m:1", Message: &in})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.SaveReply(ctx, &core.Reply{RequestID: q, SessionID: s.ID, Conversation: c, Text: "a", Parts: []string{"a"}, Model: "fake/big", TaskType: "chat"},
				[]core.ChatMessage{{Role: core.RoleUser, Content: "q"}, {Role: core.RoleAssistant, Content: "a"}}); err != nil {
				t.Fatal(err)
			}
			if f, err := db.FollowUp(ctx, s.ID); err != nil || f.Asker == nil || f.Asker.UserID != "u1" {
				t.Fatalf("follow-up before the payload is broken = %+v, %v; want u1 as the asker", f, err)
			}
			for _, broken := range []string{`{"message":`, `"a string"`, `{}`} {
				if _, err := db.w.DB.ExecContext(ctx, db.d.rebind(`UPDATE queue SET payload = ? WHERE id = ?`), broken, q); err != nil {
					t.Fatal(err)
				}
				f, err := db.FollowUp(ctx, s.ID)
				if err != nil || f.Last == nil || f.Asker != nil {
					t.Fatalf("FollowUp with payload %q = %+v, %v; want the answer, no asker, no error", broken, f, err)
				}
				_, af, err := db.ActiveSessionFollowUp(ctx, c)
				if err != nil || af != nil && (af.Last == nil || af.Asker != nil) {
					t.Fatalf("ActiveSessionFollowUp with payload %q = %+v, %v; want the answer, no asker, no error", broken, af, err)
				}
			}
		})
	}
}
