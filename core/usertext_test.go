package core_test

import (
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

func TestUserMessagesNameTheCause(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{&core.Error{Kind: core.KindTimeout, RetryAfter: 5 * time.Minute}, "did not answer in time. Please try again in 5m0s."},
		{&core.Error{Kind: core.KindRateLimited, RetryAfter: time.Minute}, "rate limiting me. Please try again in 1m0s."},
		{&core.Error{Kind: core.KindUnavailable}, "not answering right now. Please try again later."},
	} {
		if got := core.UserMessage(tt.err); !strings.Contains(got, tt.want) {
			t.Errorf("UserMessage(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
	if got := core.DelayMessage(&core.Error{Kind: core.KindTimeout, RetryAfter: time.Minute}); !strings.Contains(got, "answering too slowly") {
		t.Errorf("DelayMessage = %q", got)
	}
}
