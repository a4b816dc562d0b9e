package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

// BenchmarkMessageStore replays the store's part of one plain text
// message, as the gateway makes it (cmd/opentalon's round-trip budget):
// the enqueue that claims, the session with its follow-up, the history
// with the memories flag, the reply with its deferred usage row and
// implicit signal, the finish with the sent part. Conversations rotate
// over 200 chats that each have answers already. Besides time and
// allocations it reports the process's CPU time per message (the
// enqueue's fsync and the log's checkpoint included) and the
// write-ahead log frames (pages) each of the three write transactions
// appends: the disk's share of the cost, and the checkpoint's, which
// copies them again.
func BenchmarkMessageStore(b *testing.B) {
	m := newMessageReplay(b)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	var frames [3]int64
	for i := range b.N {
		if i%100 == 99 {
			b.StopTimer()
			m.restartLog()
			b.StartTimer()
		}
		f := m.message(i)
		for j := range frames {
			frames[j] += f[j]
		}
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/n, "cpu-us/msg")
	b.ReportMetric(float64(frames[0])/n, "enqueue-frames/msg")
	b.ReportMetric(float64(frames[1])/n, "reply-frames/msg")
	b.ReportMetric(float64(frames[2])/n, "finish-frames/msg")
	b.ReportMetric(float64(frames[0]+frames[1]+frames[2])/n, "frames/msg")
}

// messageReplay is BenchmarkMessageStore's database and chats.
type messageReplay struct {
	b     *testing.B
	db    *DB
	shm   *os.File // the log's index, read by frames
	convs []core.ConversationKey
	seq   int
}

// replayChats is the number of chats a messageReplay rotates over.
const replayChats = 200

// newMessageReplay opens a database whose log is started over only by
// restartLog, and sends two messages to each chat.
func newMessageReplay(b *testing.B) *messageReplay {
	m := &messageReplay{b: b, db: openTest(b, Options{})}
	// The frames are read from the log's index; a checkpoint in the
	// background, or the writer's own, would start the log over beneath
	// the count.
	m.db.stopCheckpoints()
	var err error
	if m.shm, err = os.Open(m.db.path + "-shm"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.shm.Close() })
	if _, err = m.db.w.ExecContext(context.Background(), `PRAGMA wal_autocheckpoint = 0`); err != nil {
		b.Fatal(err)
	}
	for i := range replayChats {
		m.convs = append(m.convs, core.ConversationKey{Channel: "telegram", Chat: fmt.Sprint(1000 + i)})
	}
	for i := range 2 * replayChats {
		m.message(i)
	}
	m.restartLog()
	return m
}

// restartLog checkpoints the whole log and starts it over.
func (m *messageReplay) restartLog() {
	if _, err := m.db.w.ExecContext(context.Background(), `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		m.b.Fatal(err)
	}
}

// message sends the i-th message and returns the frames each write
// transaction appended to the log.
func (m *messageReplay) message(i int) [3]int64 {
	b, db, ctx := m.b, m.db, context.Background()
	conv := m.convs[i%len(m.convs)]
	m.seq++
	seq := m.seq
	f0 := m.frames()
	it := msgItem(conv, fmt.Sprint(seq), fmt.Sprintf("what is the capital of country %d?", seq))
	it.MaxPending = 20
	var got core.QueueItem
	claimed, dup, err := db.EnqueueClaim(ctx, it, db.now(), func(q core.QueueItem) { got = q })
	if err != nil || dup || !claimed {
		b.Fatalf("EnqueueClaim = %v, %v, %v", claimed, dup, err)
	}
	<-got.Durable
	f1 := m.frames()
	s, _, err := db.ActiveSessionFollowUp(ctx, conv)
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := db.HistoryAndMemories(ctx, s.ID, 50, "telegram:42"); err != nil {
		b.Fatal(err)
	}
	d := &core.Deferred{Owner: db}
	d.AddUsage(core.UsageRecord{At: db.now(), SessionID: s.ID, Conversation: conv.String(), UserID: "42", Model: "m", Purpose: "chat", InputTokens: 30, OutputTokens: 12})
	d.AddSignal(core.DeferredSignal{Signal: core.Signal{Kind: core.SignalFollowUp, Polarity: core.Positive, ReplyID: int64(seq), Model: "m", TaskType: "chat", UserID: "42", Weight: 1, At: db.now(), RequestID: got.ID},
		Task: "chat", Model: "m", Fold: func(a core.Affinity) core.Affinity { a.Pos++; a.Positives++; return a }})
	r := &core.Reply{RequestID: got.ID, SessionID: s.ID, Conversation: conv, Text: "echo: " + it.Message.Text, Parts: []string{"echo: " + it.Message.Text},
		Model: "m", TaskType: "chat", Usage: core.Usage{InputTokens: 30, OutputTokens: 12}}
	id, err := db.SaveReply(core.WithDeferred(ctx, d), r, []core.ChatMessage{{Role: core.RoleUser, Content: it.Message.Text}, {Role: core.RoleAssistant, Content: r.Text}})
	if err != nil {
		b.Fatal(err)
	}
	f2 := m.frames()
	if err := db.FinishSent(ctx, got.ID, got.Lease, core.PartSent{ReplyID: id, Part: 0, Channel: "telegram", PlatformID: fmt.Sprint(seq)}); err != nil {
		b.Fatal(err)
	}
	f3 := m.frames()
	return [3]int64{f1 - f0, f2 - f1, f3 - f2}
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// frames is the number of frames in the write-ahead log, read from the
// log's index (the -shm file's header: mxFrame). A log started over
// counts from 0 again: messageReplay starts it over only between
// messages.
func (m *messageReplay) frames() int64 {
	var h [20]byte
	if _, err := m.shm.ReadAt(h[:], 0); err != nil {
		m.b.Fatal(err)
	}
	return int64(binary.NativeEndian.Uint32(h[16:20]))
}
