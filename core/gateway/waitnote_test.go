package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/core"
)

// marks is a core.WaitMarker that records its calls and fails with err.
type marks struct {
	calls []string
	err   error
}

func (m *marks) MarkWaiting(_ context.Context, id, lease int64, waiting bool) error {
	m.calls = append(m.calls, fmt.Sprintf("%d/%d %v", id, lease, waiting))
	return m.err
}

// TestWaitNote: the item is marked waiting at the first wait and cleared
// at the end of the last (overlapping waits write once each way), under
// its claim's token; nothing is written once the work has ended; a
// failed write is logged, and the work goes on.
func TestWaitNote(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	m := &marks{}
	note, end := waitNote(context.Background(), m, core.QueueItem{ID: 7, Lease: 3}, log)
	note(true)
	note(true)
	note(false)
	if got := strings.Join(m.calls, ", "); got != "7/3 true" {
		t.Fatalf("after two waits and the end of one: %s; want 7/3 true", got)
	}
	note(false)
	if got := strings.Join(m.calls, ", "); got != "7/3 true, 7/3 false" {
		t.Fatalf("after the end of both: %s; want the mark cleared once", got)
	}
	end()
	note(true)
	note(false)
	if len(m.calls) != 2 {
		t.Fatalf("notes after the work ended wrote %v", m.calls[2:])
	}

	m = &marks{err: errors.New("database is locked")}
	note, end = waitNote(context.Background(), m, core.QueueItem{ID: 8, Lease: 1}, log)
	defer end()
	note(true)
	note(false)
	if len(m.calls) != 2 || !strings.Contains(logs.String(), "database is locked") {
		t.Fatalf("failed writes: calls %v, log %q; want both tried and the failure logged", m.calls, logs.String())
	}
}
