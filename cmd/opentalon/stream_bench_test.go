package main

// Streaming benchmarks (issue 15), through the whole App against the
// fake platforms, with a fake LLM that writes 50 tokens a second:
//
//   go test -run '^$' -bench 'StreamFirstText' -benchtime 5x ./cmd/opentalon
//   go test -run '^$' -bench 'StreamEditsPerMinute' -benchtime 1x ./cmd/opentalon
//
// first-text-ms is from the LLM's first token to the first visible text
// (the first message the stream sends); the target is under 1000.
// edits/min is the updates of the streamed messages per minute while a
// 2,000-token answer is written (Telegram allows about 60 a minute in a
// private chat, Slack's chat.update about 50, Discord about 60 per
// channel).

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/discord/discordtest"
	"github.com/opentalon/opentalon/channels/slack/slacktest"
	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// tokenRate is the fake LLM's speed: 50 tokens a second.
const tokenRate = 20 * time.Millisecond

// firstToken is a fake LLM that streams chunks at tokenRate and records
// when it sent each request's first token.
type firstToken struct {
	mu sync.Mutex
	at []time.Time
}

func (f *firstToken) llm(tb testing.TB, chunks []string) *providertest.Server {
	llm := providertest.NewOpenAI(tb)
	llm.SetReply(func(providertest.Received) providertest.Script {
		f.mu.Lock()
		f.at = append(f.at, time.Now()) // the first chunk goes out at once
		f.mu.Unlock()
		return providertest.Script{Chunks: chunks, ChunkDelay: tokenRate}
	})
	return llm
}

func (f *firstToken) last() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.at[len(f.at)-1]
}

func BenchmarkStreamFirstText(b *testing.B) {
	ft := &firstToken{}
	llm := ft.llm(b, words(100, 4)) // 2 s of answer
	bot := telegramtest.New(b, tgToken)
	startApp(b, loadConfigFile(b, writeConfig(b, telegramConfig(b.TempDir(), llm.BaseURL(), bot.URL))))
	var total time.Duration
	worst := time.Duration(0)
	for i := 0; i < b.N; i++ {
		// A new chat each time: the per-chat pacing does not carry over.
		bot.AddUpdate(bot.Private(telegramtest.User(int64(7000+i), ""), "hello"))
		sent := bot.WaitSent(b, i+1, 30*time.Second)
		d := sent[i].At.Sub(ft.last())
		total += d
		worst = max(worst, d)
		// Let the answer finish before the next one.
		bot.WaitFor(b, "the final edit", 30*time.Second, func([]telegramtest.Sent, []telegramtest.Call) bool {
			text, _ := bot.Text(sent[i].ChatID, sent[i].MessageID)
			return strings.HasSuffix(text, "w99")
		})
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "first-text-ms")
	b.ReportMetric(float64(worst.Milliseconds()), "worst-first-text-ms")
	b.ReportMetric(0, "ns/op")
}

// answer2000 is a 2,000-token answer (about 10,000 characters).
var answer2000 = words(2000, 5)

func BenchmarkStreamEditsPerMinute(b *testing.B) {
	want := strings.Join(answer2000, "")
	b.Run("telegram", func(b *testing.B) {
		ft := &firstToken{}
		llm := ft.llm(b, answer2000)
		bot := telegramtest.New(b, tgToken)
		startApp(b, loadConfigFile(b, writeConfig(b, telegramConfig(b.TempDir(), llm.BaseURL(), bot.URL))))
		var edits, msgs int
		var took time.Duration
		for i := 0; i < b.N; i++ {
			e0, s0 := len(bot.Edits()), len(bot.Sent())
			bot.AddUpdate(bot.Private(telegramtest.User(int64(8000+i), ""), "write a lot"))
			bot.WaitFor(b, "the whole answer", 2*time.Minute, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
				var got strings.Builder
				for _, s := range sent[s0:] {
					t, _ := bot.Text(s.ChatID, s.MessageID)
					got.WriteString(t)
				}
				return len(sent) > s0 && squash(got.String()) == squash(want)
			})
			took += time.Since(ft.last())
			edits += len(bot.Edits()) - e0
			msgs += len(bot.Sent()) - s0
		}
		reportStream(b, edits, msgs, took)
	})
	b.Run("slack", func(b *testing.B) { benchSlack(b, want, "    mode: socket\n") })
	b.Run("slack-native", func(b *testing.B) { benchSlack(b, want, "    mode: socket\n    streaming: native\n") })
	b.Run("discord", func(b *testing.B) {
		ft := &firstToken{}
		llm := ft.llm(b, answer2000)
		dc := discordtest.New(b, dcToken)
		guild := dc.Guild()
		startApp(b, loadConfigFile(b, writeConfig(b, discordConfig(b.TempDir(), llm.BaseURL(), dc.URL, ""))))
		alice := dc.User("alice")
		var edits, msgs int
		var took time.Duration
		for i := 0; i < b.N; i++ {
			ch := dc.TextChannel(guild)
			e0, s0 := len(dc.Edits()), len(dc.Sent())
			dc.Message(b, discordtest.Msg{Channel: ch, Guild: guild, Author: alice,
				Content: discordtest.Mention(dc.Bot) + " write a lot", Mentions: []discordtest.User{dc.Bot}})
			deadline := time.Now().Add(2 * time.Minute)
			for {
				var got strings.Builder
				sent := dc.Sent()
				for _, s := range sent[s0:] {
					c, _ := dc.Content(s.ID)
					got.WriteString(c)
				}
				if len(sent) > s0 && squash(got.String()) == squash(want) {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("the answer did not arrive whole in 2 minutes")
				}
				time.Sleep(20 * time.Millisecond)
			}
			took += time.Since(ft.last())
			edits += len(dc.Edits()) - e0
			msgs += len(dc.Sent()) - s0
		}
		reportStream(b, edits, msgs, took)
	})
}

func benchSlack(b *testing.B, want, extra string) {
	ft := &firstToken{}
	llm := ft.llm(b, answer2000)
	srv := slacktest.New(b, slackBotToken, slackAppToken)
	startApp(b, loadConfigFile(b, writeConfig(b, slackConfig(b.TempDir(), llm.BaseURL(), srv.URL, extra))))
	srv.WaitConnected(b, 1, 20*time.Second)
	var edits, msgs int
	var took time.Duration
	for i := 0; i < b.N; i++ {
		e0, s0, st0 := len(srv.Updates()), len(srv.Posts()), len(srv.Streams())
		env := srv.Deliver(srv.Mention("alice", "C9", "write a lot", ""))
		srv.WaitFor(b, "the whole answer", 2*time.Minute, func() bool {
			var got strings.Builder
			n := 0
			for _, p := range srv.Posts()[s0:] {
				t, _ := srv.Text(p.Channel, p.TS)
				got.WriteString(t)
				n++
			}
			for _, c := range srv.Streams()[st0:] {
				if c.Method == "chat.startStream" && c.ThreadTS == env.TS {
					t, _ := srv.Text(c.Channel, c.TS)
					got.WriteString(t)
					n++
				}
			}
			return n > 0 && squash(got.String()) == squash(want)
		})
		took += time.Since(ft.last())
		edits += len(srv.Updates()) - e0
		for _, c := range srv.Streams()[st0:] {
			switch c.Method {
			case "chat.appendStream":
				edits++
			case "chat.startStream":
				msgs++
			}
		}
		msgs += len(srv.Posts()) - s0
	}
	reportStream(b, edits, msgs, took)
}

func reportStream(b *testing.B, edits, msgs int, took time.Duration) {
	b.ReportMetric(float64(edits)/took.Minutes(), "edits/min")
	b.ReportMetric(float64(msgs)/float64(b.N), "messages/answer")
	b.ReportMetric(took.Seconds()/float64(b.N), "s/answer")
	b.ReportMetric(0, "ns/op")
}

// squash drops the white space a split into messages may move.
func squash(s string) string { return strings.Join(strings.Fields(s), "") }
