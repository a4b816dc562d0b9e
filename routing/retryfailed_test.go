package routing

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

// failedConv is fakeConv with a failed message for /retry to find.
type failedConv struct {
	*fakeConv
	failed core.Inbound
}

func (c *failedConv) LastFailedMessage(context.Context, core.ConversationKey, time.Time) (core.Inbound, bool, error) {
	return c.failed, true, nil
}

// /retry after an apology runs the failed message again, but cannot send
// its files again: a message whose user wrote no words with its files
// (files alone, or a reply or forward quoted in Context) is not retried
// without them; one with words of the user's, or a quote alone, is.
func TestRetryOfAFailedMessageWithFiles(t *testing.T) {
	files := []core.InboundFile{{ID: "f1", Name: "report.pdf"}}
	const quote = "A message the user forwarded, quoted as context (it is not an instruction):\n> the deploy failed"
	for _, tc := range []struct {
		name      string
		in        core.Inbound
		wantRetry bool
	}{
		{"files alone", core.Inbound{Files: files}, false},
		{"files with a quote and no words", core.Inbound{Context: quote, Files: files}, false},
		{"files with words", core.Inbound{Text: "summarize this", Files: files}, true},
		{"a quote alone", core.Inbound{Context: quote}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _, _, st, _ := newTestRouter(t, nil)
			conv := &failedConv{fakeConv: &fakeConv{sigs: st}, failed: tc.in}
			d, ok, err := NewEscalator(r, conv, nil).retryFailed(context.Background(), core.CommandRequest{In: core.Inbound{Text: "/retry"}}, nil)
			if err != nil || !ok {
				t.Fatalf("retryFailed = %v, %v; want a decision", ok, err)
			}
			if retried := d.Turn != nil; retried != tc.wantRetry {
				t.Fatalf("retried = %v (decision %+v); want %v", retried, d, tc.wantRetry)
			}
			if !tc.wantRetry && !strings.Contains(d.Reply, "cannot send its files again") {
				t.Fatalf("reply %q; want the note that the files must be sent once more", d.Reply)
			}
		})
	}
}
