package telegramtest

import (
	"context"
	"testing"

	tgbot "github.com/go-telegram/bot"
)

func TestForgetKeepsSentButNotCalls(t *testing.T) {
	s := New(t, "1:test-token")
	api, err := tgbot.New(s.Token, tgbot.WithServerURL(s.URL), tgbot.WithSkipGetMe())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	send := func(text string) {
		t.Helper()
		if _, err := api.SendMessage(ctx, &tgbot.SendMessageParams{ChatID: 7, Text: text}); err != nil {
			t.Fatalf("sendMessage %q: %v", text, err)
		}
	}
	send("kept")
	s.Forget()
	send("after forget")
	if calls := s.Calls("sendMessage"); len(calls) != 1 || calls[0].Params["text"] != "kept" {
		t.Errorf("Calls = %+v, want only the call before Forget", calls)
	}
	sent := s.Sent()
	if len(sent) != 2 || sent[1].Text != "after forget" || s.SentCount() != 2 {
		t.Errorf("Sent = %+v, want both messages (Forget keeps what was sent)", sent)
	}
}
