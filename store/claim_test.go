package store

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

// TestUndecodableRowDoesNotStallClaim: a row whose payload cannot be
// read is marked failed (and logged with its id); the rest of the queue,
// its own conversation's next message included, is claimed as usual.
func TestUndecodableRowDoesNotStallClaim(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	db := openTest(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	a := core.ConversationKey{Channel: "telegram", Chat: "a"}
	b := core.ConversationKey{Channel: "telegram", Chat: "b"}
	badID, _, err := db.Enqueue(ctx, msgItem(a, "1", "soon broken"))
	if err != nil {
		t.Fatal(err)
	}
	noMsgID, _, _ := db.Enqueue(ctx, msgItem(a, "2", "soon empty"))
	db.Enqueue(ctx, msgItem(a, "3", "a after"))
	db.Enqueue(ctx, msgItem(b, "4", "b fine"))
	if _, err := db.w.DB.Exec(`UPDATE queue SET payload = '{not json' WHERE id = ?`, badID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.w.DB.Exec(`UPDATE queue SET payload = '{}' WHERE id = ?`, noMsgID); err != nil {
		t.Fatal(err)
	}

	var got []string
	for range 4 {
		items, next, err := db.Claim(ctx, 10, time.Now())
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		for _, it := range items {
			got = append(got, it.Message.Text)
			db.Finish(ctx, it.ID, core.StatusDone, "")
		}
		if len(items) == 0 && next.IsZero() {
			break
		}
	}
	if strings.Join(got, ",") != "b fine,a after" {
		t.Fatalf("claimed %q, want b fine then a after", got)
	}
	for _, id := range []int64{badID, noMsgID} {
		st, _, lastErr, _ := db.QueueStatus(ctx, id)
		if st != core.StatusFailed || !strings.Contains(lastErr, "cannot be read") {
			t.Errorf("row %d: status %s, last error %q; want failed, cannot be read", id, st, lastErr)
		}
	}
	if !strings.Contains(logs.String(), "request=1") || !strings.Contains(logs.String(), "request=2") {
		t.Errorf("the log does not name the unreadable rows:\n%s", logs.String())
	}
}
