package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core/clock"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// TestE2EIdleConversationStartsAfreshAndSaysSo: on the console, a message
// after state.session_ttl of silence is answered in a new conversation,
// and the answer says so and for how long it had been quiet; the message
// after it gets no note.
func TestE2EIdleConversationStartsAfreshAndSaysSo(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	llm.SetReply(func(r providertest.Received) providertest.Script {
		return providertest.Script{Text: fmt.Sprintf("answer to %s (%d messages)", r.LastUser(), len(r.Messages))}
	})
	clk := clock.NewFake(time.Now())
	y := strings.Replace(testConfig(t.TempDir(), llm.BaseURL(), ""), "state:\n", "state:\n  session_ttl: 1h\n", 1)
	h := startAppWith(t, parseConfig(t, y), AppOptions{Now: clk.Now})
	h.send("my name is Ann")
	h.expect("answer to my name is Ann (1 messages)")
	clk.Advance(3 * time.Hour)
	h.send("hello again")
	if out := h.readUntil("new conversation"); !strings.Contains(out, "answer to hello again (1 messages)") ||
		!strings.Contains(out, "Nothing had been said here for 3 hours, so this is a new conversation") {
		t.Fatalf("the first answer after 3 h idle = %q; want a fresh conversation, and a note saying so", out)
	}
	h.send("and now")
	h.expect("answer to and now (3 messages)")
	h.shutdown()
}

// TestE2EPasteTooLongForTheModel: a 200 KB paste the provider refuses as
// too long (Anthropic's "prompt is too long", as an OpenAI-compatible
// proxy passes it on) gets an apology that names the message, not /new,
// and the conversation goes on.
func TestE2EPasteTooLongForTheModel(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	llm.SetReply(func(r providertest.Received) providertest.Script {
		n := 0
		for _, m := range r.Messages {
			n += len(m.Content)
		}
		if n > 100_000 {
			return providertest.Script{Status: 400, Body: `{"error":{"type":"invalid_request_error","message":"prompt is too long: 52000 tokens > 25000 maximum"}}`}
		}
		return providertest.Script{Text: "answer to " + r.LastUser()}
	})
	h := startApp(t, parseConfig(t, testConfig(t.TempDir(), llm.BaseURL(), "")))
	h.send("hi")
	h.expect("answer to hi")
	h.send(strings.Repeat("paste ", 200_000/6))
	got := h.readUntil("Sorry")
	if !strings.Contains(got, "your message (about 195 KB) is too long for the model to read at once") || strings.Contains(got, "/new") {
		t.Fatalf("a paste too long for the model told the user %q; want their message named, not /new", got)
	}
	h.send("short")
	h.expect("answer to short")
	h.shutdown()
}
