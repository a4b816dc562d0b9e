package telegram

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/config"
)

// recordingLease is a held lease that records the data written to it.
type recordingLease struct {
	mu     sync.Mutex
	writes []string
}

func (l *recordingLease) Data(context.Context) ([]byte, error) { return nil, nil }

func (l *recordingLease) SetData(_ context.Context, b []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, string(b))
	return nil
}

func (l *recordingLease) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.writes...)
}

// TestOffsetKeptAtMostOnceASecond: under the lease, the poller writes
// its offset after a batch when a second has passed since the last
// write (not after every batch: each is a durable commit of the shared
// database), and once more when the polling ends, so the next holder
// resumes past every update this one committed.
func TestOffsetKeptAtMostOnceASecond(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC).UnixNano())
	lease := &recordingLease{}
	h := newHarness(t, func(_ *config.Telegram, o *Options) {
		o.Now = func() time.Time { return time.Unix(0, clock.Load()) }
		o.Hold = func(ctx context.Context, _ string, work func(context.Context, Lease) error) error {
			return work(ctx, lease)
		}
	})
	sink := newFakeSink()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.bot.Run(ctx, sink) }()
	defer func() {
		cancel()
		<-done
	}()

	// deliver adds one update and returns once its offset was confirmed
	// to Telegram: the batch's write, if any, came before that poll.
	deliver := func(text string) int64 {
		t.Helper()
		id := h.srv.AddUpdate(h.srv.Private(alice, text))
		h.srv.WaitFor(t, "offset past "+text, 5*time.Second, func([]telegramtest.Sent, []telegramtest.Call) bool { return h.srv.Confirmed() > id })
		return id
	}
	first := deliver("m0")
	if got := lease.all(); len(got) != 1 || got[0] != strconv.FormatInt(first+1, 10) {
		t.Fatalf("lease writes after the first batch = %v; want [%d]", got, first+1)
	}
	for i := 1; i <= 5; i++ {
		deliver("m" + strconv.Itoa(i))
	}
	if got := lease.all(); len(got) != 1 {
		t.Fatalf("lease writes after six batches within a second = %v; want the first one only", got)
	}
	clock.Add(int64(time.Second))
	seventh := deliver("m6")
	if got := lease.all(); len(got) != 2 || got[1] != strconv.FormatInt(seventh+1, 10) {
		t.Fatalf("lease writes a second later = %v; want a second write, %d", got, seventh+1)
	}
	last := deliver("m7")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	done <- nil // for the deferred wait
	if got := lease.all(); len(got) != 3 || got[2] != strconv.FormatInt(last+1, 10) {
		t.Fatalf("lease writes after the polling ended = %v; want a last write, %d", got, last+1)
	}
	if n := len(sink.accepted); n != 8 {
		t.Errorf("%d messages accepted; want 8", n)
	}
}
