package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/opentalon/opentalon/core"
)

// BenchmarkHistory reads the tail of a 60-message history, as the
// escalator (4 entries) and the orchestrator (50) do on every message.
func BenchmarkHistory(b *testing.B) {
	ctx := context.Background()
	db := openTest(b, Options{})
	s, err := db.ActiveSession(ctx, core.ConversationKey{Channel: "telegram", Chat: "1"})
	if err != nil {
		b.Fatal(err)
	}
	var msgs []core.ChatMessage
	for i := range 30 {
		msgs = append(msgs,
			core.ChatMessage{Role: core.RoleUser, Content: fmt.Sprintf("question %d", i)},
			core.ChatMessage{Role: core.RoleAssistant, Content: fmt.Sprintf("answer %d", i)})
	}
	if err := db.AppendMessages(ctx, s.ID, msgs); err != nil {
		b.Fatal(err)
	}
	for _, limit := range []int{4, 50} {
		b.Run(fmt.Sprint("limit-", limit), func(b *testing.B) {
			for b.Loop() {
				h, err := db.History(ctx, s.ID, limit)
				if err != nil || len(h) != limit || h[len(h)-1].Content != "answer 29" {
					b.Fatalf("History = %d entries, %v", len(h), err)
				}
			}
		})
	}
}
