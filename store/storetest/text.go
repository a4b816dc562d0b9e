package storetest

import (
	"strings"
	"testing"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

// testTextIsStorable: text from outside (a document's or a tool's, a
// platform's user name, a schedule's prompt, a provider's error) may hold
// a NUL byte or broken UTF-8, which PostgreSQL's TEXT refuses; each is
// stored cleaned, on every engine alike, and read back so.
func testTextIsStorable(t *testing.T, e Engine) {
	db := e.open(t, store.Options{})
	const bad, want = "said \x00no\xff", "said no\uFFFD"
	c := conv("text")
	sess, err := db.NewSession(ctx, c)
	check(t, "new session", err)

	t.Run("History", func(t *testing.T) {
		check(t, "append", db.AppendMessages(ctx, sess.ID, []core.ChatMessage{
			{Role: core.RoleUser, Content: bad},
			{Role: core.RoleTool, Content: bad, ToolCallID: "call\x00"},
		}))
		h, err := db.History(ctx, sess.ID, 10)
		check(t, "history", err)
		if len(h) != 2 || h[0].Content != want || h[1].Content != want || h[1].ToolCallID != "call" {
			t.Fatalf("history = %+v; want both contents %q and the call id %q", h, want, "call")
		}
	})
	t.Run("Escalation", func(t *testing.T) {
		check(t, "save", db.SaveEscalation(ctx, sess.ID, core.EscalationState{Question: bad}))
		st, err := db.Escalation(ctx, sess.ID)
		check(t, "read", err)
		if st.Question != want {
			t.Fatalf("question = %q; want %q", st.Question, want)
		}
	})
	t.Run("PairingName", func(t *testing.T) {
		_, err := db.RequestPairing(ctx, core.Pairing{Channel: "fake", UserID: "u-text", UserName: bad, Conversation: c, Code: "TEXT01"})
		check(t, "request", err)
		p, err := db.Pairing(ctx, "fake", "u-text")
		check(t, "read", err)
		if p == nil || p.UserName != want {
			t.Fatalf("pairing = %+v; want the name %q", p, want)
		}
	})
	t.Run("SchedulePrompt", func(t *testing.T) {
		s, err := db.AddSchedule(ctx, core.Schedule{Source: "chat", Conversation: c, Spec: "every day " + bad, Prompt: bad})
		check(t, "add", err)
		got, err := db.Schedule(ctx, s.ID)
		check(t, "read", err)
		if got.Prompt != want || got.Spec != "every day "+want {
			t.Fatalf("schedule = %q, %q; want %q, %q", got.Spec, got.Prompt, "every day "+want, want)
		}
	})
	t.Run("ProfileError", func(t *testing.T) {
		check(t, "save", db.SaveProfileState(ctx, core.ProfileState{Provider: "p", ID: "p-text", LastError: bad}))
		states, err := db.ProfileStates(ctx)
		check(t, "read", err)
		for _, s := range states {
			if s.ID == "p-text" {
				if s.LastError != want {
					t.Fatalf("last error = %q; want %q", s.LastError, want)
				}
				return
			}
		}
		t.Fatal("the profile's state was not stored")
	})
	t.Run("MediaText", func(t *testing.T) {
		f, err := db.StoreMedia(ctx, "fake:file-text", "application/pdf", strings.NewReader("%PDF-"), 1<<20)
		check(t, "store", err)
		check(t, "set text", db.SetMediaText(ctx, f.SHA256, bad))
		got, ok, err := db.MediaBySource(ctx, "fake:file-text")
		check(t, "read", err)
		if !ok || !got.HasText || got.Text != want {
			t.Fatalf("media text = %q (%v, %v); want %q", got.Text, ok, got.HasText, want)
		}
	})
}
