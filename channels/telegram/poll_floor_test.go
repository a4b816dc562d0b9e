package telegram

import (
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/config"
)

// A server that answers getUpdates at once with nothing (here: a poll
// timeout under a second, which the Bot API answers as a short poll) is
// asked again only after minEmptyPoll: without the floor the loop made
// about 2,600 requests a second.
func TestEmptyPollsHaveAFloor(t *testing.T) {
	h := newHarness(t, func(_ *config.Telegram, o *Options) { o.PollTimeout = 500 * time.Millisecond })
	h.run(t, newFakeSink())
	h.srv.WaitFor(t, "20 getUpdates", 20*time.Second, func(_ []telegramtest.Sent, calls []telegramtest.Call) bool {
		n := 0
		for _, c := range calls {
			if c.Method == "getUpdates" {
				n++
			}
		}
		return n >= 20
	})
	floors := 0
	for _, d := range h.sleeps.all() {
		if d > minEmptyPoll/2 && d <= minEmptyPoll {
			floors++
		}
	}
	if floors < 19 {
		t.Fatalf("%d waits of about %s between 20 empty polls; want one after each", floors, minEmptyPoll)
	}
}
