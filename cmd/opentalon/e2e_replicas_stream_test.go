package main

import (
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store/pgtest"
)

// TestE2EReplicaKilledMidStreamIsFinishedByAnother: two replicas on one
// PostgreSQL; the one streaming an answer is killed (kill -9) mid-stream.
// The other takes the item over once its lease runs out and finishes the
// answer in the message the stream opened: the user sees one message,
// ending in the final text, not a second copy and not a draft left
// unfinished.
func TestE2EReplicaKilledMidStreamIsFinishedByAnother(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	dsn := pgtest.DSN(t)
	slow := words(200, 4) // 10 s at 50 ms a chunk: the kill comes first
	again := words(60, 4)
	llm := providertest.NewOpenAI(t)
	var answered atomic.Bool
	llm.SetReply(func(providertest.Received) providertest.Script {
		if !answered.Swap(true) {
			return providertest.Script{Chunks: slow, ChunkDelay: 50 * time.Millisecond}
		}
		return providertest.Script{Chunks: again, ChunkDelay: 20 * time.Millisecond}
	})
	bot := telegramtest.New(t, tgToken)
	var procs []*binProc
	for range 2 {
		p := startBinary(t, nil, "--config", writeConfig(t, replicaConfig(t.TempDir(), llm.BaseURL(), bot.URL, dsn)), "--log-level", "debug", "run")
		waitLog(t, p, "opentalon running")
		procs = append(procs, p)
	}
	alice := telegramtest.User(47, "alice")
	bot.AddUpdate(bot.Private(alice, "stream then die"))
	bot.WaitFor(t, "the streamed message and an edit", 30*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
		return len(sent) == 1 && len(bot.Edits()) >= 1
	})
	// The writer is the replica that logged taking alice's message.
	took := func(p *binProc) bool {
		for _, l := range strings.Split(p.stderr.String(), "\n") {
			if strings.Contains(l, `msg="processing request"`) && strings.Contains(l, "conv=telegram:47 ") {
				return true
			}
		}
		return false
	}
	writer, other := procs[0], procs[1]
	if !took(writer) {
		writer, other = other, writer
	}
	if !took(writer) {
		t.Fatalf("no replica logged taking the message")
	}
	if err := writer.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	writer.exitCode(30 * time.Second)
	opened := bot.Sent()[0]
	if strings.HasSuffix(opened.Text, slow[len(slow)-1]) {
		t.Fatalf("the whole answer was out before the kill; the test needs a kill mid-stream")
	}
	want := strings.Join(again, "")
	bot.WaitFor(t, "the opened message edited to the final text by the other replica", 60*time.Second, func([]telegramtest.Sent, []telegramtest.Call) bool {
		text, _ := bot.Text(47, opened.MessageID)
		return text == want
	})
	waitLog(t, other, "request done")
	if n := len(bot.Sent()); n != 1 {
		t.Errorf("%d messages sent; want only the one the stream opened, finished by the other replica", n)
	}
	if err := other.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := other.exitCode(60 * time.Second); code != 0 {
		t.Errorf("exit code %d after SIGTERM:\n%s", code, tail(other.stderr.String(), 40))
	}
}
