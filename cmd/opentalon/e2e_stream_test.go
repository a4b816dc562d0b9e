package main

// Streaming replies through the whole App (issue 15): a fake LLM that
// streams at a set speed, the fake Telegram Bot API, the real gateway and
// store.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/discord/discordtest"
	"github.com/opentalon/opentalon/channels/slack/slacktest"
	"github.com/opentalon/opentalon/channels/telegram"
	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/channels/textfmt"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// words is n words of a streamed answer, as stream chunks ("w0", " w1",
// …) padded to size bytes each.
func words(n, size int) []string {
	out := make([]string, n)
	for i := range out {
		w := fmt.Sprintf(" w%d", i)
		if i == 0 {
			w = "w0"
		}
		if len(w) < size {
			w += strings.Repeat("x", size-len(w))
		}
		out[i] = w
	}
	return out
}

// streamingLLM answers every request with chunks, one every delay.
func streamingLLM(t *testing.T, chunks []string, delay time.Duration) *providertest.Server {
	llm := providertest.NewOpenAI(t)
	llm.SetReply(func(providertest.Received) providertest.Script {
		return providertest.Script{Chunks: chunks, ChunkDelay: delay}
	})
	return llm
}

// postHook appends a mark to every answer; safe says whether it lets
// answers be streamed.
type postHook struct {
	mark string
	safe bool
}

func (h postHook) Pre(_ context.Context, in core.HookInput) (core.PreResult, error) {
	return core.PreResult{Text: in.Text, Metadata: in.Metadata}, nil
}

func (h postHook) Post(_ context.Context, _ core.HookInput, answer string) (string, error) {
	return answer + h.mark, nil
}

func (h postHook) StreamSafe(core.HookInput) bool { return h.safe }

// storedReply is the reply stored for the answer the bot sent as msg.
func storedReply(t *testing.T, h *harness, chat int64, msg int) *core.Reply {
	t.Helper()
	return deliveredReply(t, h, "telegram", fmt.Sprintf("%d:%d", chat, msg))
}

// TestE2EStreamEditsOneMessageAtTelegramsRate: a long answer streamed over
// about three seconds arrives as one message, edited while it grows, no
// two updates of it within Telegram's second; the post-hook runs on the
// final text and the last edit shows the hooked text, equal to the
// stored reply.
func TestE2EStreamEditsOneMessageAtTelegramsRate(t *testing.T) {
	t.Parallel()
	chunks := words(60, 4)
	llm := streamingLLM(t, chunks, 50*time.Millisecond)
	bot := telegramtest.New(t, tgToken)
	h := startAppWith(t, loadConfigFile(t, writeConfig(t, telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL))),
		AppOptions{Hooks: postHook{mark: " [checked]", safe: true}})
	alice := telegramtest.User(42, "alice")
	bot.AddUpdate(bot.Private(alice, "tell me a long story"))

	want := strings.Join(chunks, "") + " [checked]"
	bot.WaitFor(t, "the hooked final text", 20*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
		if len(sent) == 0 {
			return false
		}
		text, _ := bot.Text(42, sent[0].MessageID)
		return strings.HasSuffix(text, "[checked]")
	})
	sent := bot.Sent()
	if len(sent) != 1 {
		t.Fatalf("%d messages sent; want the answer as one message, edited", len(sent))
	}
	edits := bot.Edits()
	if len(edits) < 2 {
		t.Fatalf("%d edits; want the message edited while the answer grew", len(edits))
	}
	times := []time.Time{sent[0].At}
	for _, e := range edits {
		if e.MessageID != sent[0].MessageID {
			t.Fatalf("edit of message %d; the answer is message %d", e.MessageID, sent[0].MessageID)
		}
		times = append(times, e.At)
	}
	// The spacing the stream keeps is checked exactly on a fake clock
	// (core/gateway's TestStreamShowsTheAnswerAtMostOncePerInterval). The
	// fake platform stamps arrivals, which carry the scheduling delays of
	// a loaded machine (one update late, the next on time: 887 ms apart
	// in one run), so here a gap only rules out updates at the LLM's pace
	// (50 ms a chunk).
	for i := 1; i < len(times); i++ {
		if gap := times[i].Sub(times[i-1]); gap < 500*time.Millisecond {
			t.Errorf("update %d came %s after the one before; Telegram takes about one a second per chat", i, gap)
		}
	}
	if strings.Contains(sent[0].Text, "[checked]") {
		t.Errorf("the first chunk %q already has the post-hook's mark; hooks run on the final text", sent[0].Text)
	}
	r := storedReply(t, h, 42, sent[0].MessageID)
	if r.Text != want {
		t.Fatalf("stored reply %q; want the hooked answer %q", r.Text, want)
	}
	final, _ := bot.Text(42, sent[0].MessageID)
	if parts := textfmt.SplitHTML(textfmt.ToTelegramHTML(r.Text), telegram.MaxMessage); len(parts) != 1 || final != parts[0] {
		t.Fatalf("the message reads %q; want the stored reply %q formatted", final, r.Text)
	}
}

// TestE2EStreamContinuesInASecondMessage: an answer longer than one
// Telegram message is streamed into a first message until it is full,
// then into a second; their final texts are the stored reply's parts.
func TestE2EStreamContinuesInASecondMessage(t *testing.T) {
	t.Parallel()
	chunks := words(60, 100) // 6,000 characters
	llm := streamingLLM(t, chunks, 40*time.Millisecond)
	bot := telegramtest.New(t, tgToken)
	h := startApp(t, loadConfigFile(t, writeConfig(t, telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL))))
	alice := telegramtest.User(43, "alice")
	bot.AddUpdate(bot.Private(alice, "a very long answer please"))

	var r *core.Reply
	bot.WaitFor(t, "the answer delivered in two messages", 30*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
		if len(sent) < 2 {
			return false
		}
		rr, err := h.app.db.ReplyByPlatformID(context.Background(), "telegram", fmt.Sprintf("43:%d", sent[0].MessageID))
		if err != nil || rr == nil || rr.Streaming || len(rr.Sent) < 2 || rr.Sent[len(rr.Sent)-1] == "" || rr.Draft[len(rr.Draft)-1] {
			return false
		}
		r = rr
		return true
	})
	sent := bot.Sent()
	if len(sent) != 2 || len(r.Parts) != 2 {
		t.Fatalf("%d messages sent, %d parts stored; want the answer in two messages", len(sent), len(r.Parts))
	}
	if r.Text != strings.Join(chunks, "") {
		t.Fatalf("stored reply is %d bytes; want the whole answer (%d)", len(r.Text), len(strings.Join(chunks, "")))
	}
	for i, s := range sent {
		if got, _ := bot.Text(43, s.MessageID); got != r.Parts[i] {
			t.Errorf("message %d reads %d characters; want part %d of the stored reply (%d)", i+1, len(got), i+1, len(r.Parts[i]))
		}
		if r.Sent[i] != fmt.Sprintf("43:%d", s.MessageID) {
			t.Errorf("part %d recorded as %q; the message is %d", i+1, r.Sent[i], s.MessageID)
		}
	}
	if sent[1].At.Before(sent[0].At.Add(time.Second)) {
		t.Errorf("the second message came %s after the first; the first fills before the second starts", sent[1].At.Sub(sent[0].At))
	}
}

// TestE2EStreamNotStreamSafeHookSendsOnce: with a post-hook that is not
// stream-safe (a redaction hook), a slowly streamed answer is sent once,
// complete and hooked: no message before it, no edit.
func TestE2EStreamNotStreamSafeHookSendsOnce(t *testing.T) {
	t.Parallel()
	chunks := words(40, 4)
	llm := streamingLLM(t, chunks, 50*time.Millisecond)
	bot := telegramtest.New(t, tgToken)
	startAppWith(t, loadConfigFile(t, writeConfig(t, telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL))),
		AppOptions{Hooks: postHook{mark: " [redacted]", safe: false}})
	alice := telegramtest.User(44, "alice")
	bot.AddUpdate(bot.Private(alice, "a secret story"))
	sent := bot.WaitSent(t, 1, 20*time.Second)
	if !strings.HasSuffix(sent[0].Text, "[redacted]") || !strings.HasPrefix(sent[0].Text, "w0") {
		t.Fatalf("first message %q; want the whole answer as the hook left it", sent[0].Text)
	}
	time.Sleep(300 * time.Millisecond)
	if n, e := len(bot.Sent()), len(bot.Edits()); n != 1 || e != 0 {
		t.Fatalf("%d messages, %d edits; want one message and no edit", n, e)
	}
	if d := bot.Drafts(); len(d) != 0 {
		t.Fatalf("%d drafts shown; want none", len(d))
	}
}

// TestE2EStreamLuaScriptNotStreamSafe: a Lua post-hook that sets
// stream_safe = false, loaded from plugins.lua.scripts_dir (so it runs
// among the ordered hooks of every source), keeps answers from being
// streamed: the hooked answer is sent once, with no edit and no draft.
func TestE2EStreamLuaScriptNotStreamSafe(t *testing.T) {
	t.Parallel()
	chunks := words(40, 4)
	llm := streamingLLM(t, chunks, 50*time.Millisecond)
	bot := telegramtest.New(t, tgToken)
	scripts := t.TempDir()
	script := "stream_safe = false\nfunction post_hook(ctx)\n  ctx.message = ctx.message .. \" [checked]\"\n  return ctx\nend\n"
	if err := os.WriteFile(filepath.Join(scripts, "10_redact.lua"), []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL) + fmt.Sprintf("plugins:\n  lua:\n    scripts_dir: %q\n", scripts)
	startApp(t, loadConfigFile(t, writeConfig(t, cfg)))
	bot.AddUpdate(bot.Private(telegramtest.User(47, "alice"), "a secret story"))
	sent := bot.WaitSent(t, 1, 20*time.Second)
	if want := strings.Join(chunks, "") + " [checked]"; sent[0].Text != want {
		t.Fatalf("first message %q; want the whole answer as the script left it, %q", sent[0].Text, want)
	}
	time.Sleep(300 * time.Millisecond)
	if n, e, d := len(bot.Sent()), len(bot.Edits()), len(bot.Drafts()); n != 1 || e != 0 || d != 0 {
		t.Fatalf("%d messages, %d edits, %d drafts; want one message, no edit, no draft", n, e, d)
	}
}

// TestE2EStreamNativeDraftsInPrivateChat: channels.telegram.streaming:
// native shows the answer with sendMessageDraft in a private chat, then
// sends it as one message; a bot whose drafts Telegram refuses edits a
// message instead.
func TestE2EStreamNativeDraftsInPrivateChat(t *testing.T) {
	t.Parallel()
	chunks := words(30, 4)
	llm := streamingLLM(t, chunks, 50*time.Millisecond)
	bot := telegramtest.New(t, tgToken)
	cfg := strings.Replace(telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL), "    api_url:", "    streaming: native\n    api_url:", 1)
	startApp(t, loadConfigFile(t, writeConfig(t, cfg)))
	alice := telegramtest.User(45, "alice")
	bot.AddUpdate(bot.Private(alice, "stream natively"))
	sent := bot.WaitSent(t, 1, 20*time.Second)
	drafts := bot.Drafts()
	if len(drafts) < 1 {
		t.Fatalf("no sendMessageDraft; want the answer shown as a draft while written")
	}
	if sent[0].Text != strings.Join(chunks, "") || len(bot.Edits()) != 0 {
		t.Fatalf("sent %q with %d edits; want the whole answer sent once after the drafts", sent[0].Text, len(bot.Edits()))
	}
	for i := 1; i < len(drafts); i++ {
		if !strings.HasPrefix(drafts[i].Text, drafts[i-1].Text) {
			t.Fatalf("draft %d %q does not continue %q: a draft only grows", i, drafts[i].Text, drafts[i-1].Text)
		}
	}

	bot.RefuseDrafts()
	bot.AddUpdate(bot.Private(alice, "and again"))
	bot.WaitFor(t, "the fallback's final edit", 20*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
		if len(sent) < 2 {
			return false
		}
		text, _ := bot.Text(45, sent[1].MessageID)
		return text == strings.Join(chunks, "")
	})
	if n := len(bot.Sent()); n != 2 || len(bot.Edits()) == 0 {
		t.Fatalf("%d messages, %d edits after drafts were refused; want one more message, edited", n, len(bot.Edits()))
	}
}

// TestE2EStreamKillThenRestartEditsTheSameMessage: the binary is killed
// while an answer streams; after the restart the answer is finished by
// editing the message the stream opened to the stored final text, and no
// second copy is sent.
func TestE2EStreamKillThenRestartEditsTheSameMessage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	slow := words(200, 4) // 10 s at 50 ms a chunk: the kill comes first
	// The answer after the restart streams too (2.4 s), shorter at first
	// than what the message showed at the kill.
	again := words(60, 4)
	llm := providertest.NewOpenAI(t)
	var answered atomic.Bool
	llm.SetReply(func(providertest.Received) providertest.Script {
		if !answered.Swap(true) {
			return providertest.Script{Chunks: slow, ChunkDelay: 50 * time.Millisecond}
		}
		return providertest.Script{Chunks: again, ChunkDelay: 40 * time.Millisecond}
	})
	bot := telegramtest.New(t, tgToken)
	cfg := writeConfig(t, strings.Replace(telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL), `listen: "127.0.0.1:0"`, `listen: ""`, 1))
	p := startBinary(t, nil, "--config", cfg, "--log-level", "warn", "run")
	alice := telegramtest.User(46, "alice")
	bot.AddUpdate(bot.Private(alice, "stream then die"))
	// The stream opened its message and edited it once: its id is stored.
	bot.WaitFor(t, "the streamed message and an edit", 20*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
		return len(sent) == 1 && len(bot.Edits()) >= 1
	})
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.exitCode(30 * time.Second)
	opened := bot.Sent()[0]
	if strings.HasSuffix(opened.Text, slow[len(slow)-1]) {
		t.Fatalf("the whole answer was out before the kill; the test needs a kill mid-stream")
	}
	atKill, _ := bot.Text(46, opened.MessageID)
	editsBefore := len(bot.Edits())

	p = startBinary(t, nil, "--config", cfg, "--log-level", "warn", "run")
	want := strings.Join(again, "")
	bot.WaitFor(t, "the opened message edited to the final text", 30*time.Second, func([]telegramtest.Sent, []telegramtest.Call) bool {
		text, _ := bot.Text(46, opened.MessageID)
		return text == want
	})
	time.Sleep(500 * time.Millisecond)
	if n := len(bot.Sent()); n != 1 {
		t.Fatalf("%d messages sent; want only the one the stream opened, edited after the restart", n)
	}
	// A draft only grows: until the final text, the restart never shows
	// less in the message than it showed at the kill.
	for _, e := range bot.Edits()[editsBefore:] {
		if e.MessageID == opened.MessageID && e.Text != want && len(e.Text) < len(atKill) {
			t.Fatalf("after the restart the message went from %d characters back to %d (%q)", len(atKill), len(e.Text), e.Text)
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderr.String())
	}
}

// TestE2EStreamInjectedMessageOnDiscord: a message a plugin route injected
// (no platform message behind it) into a Discord channel is streamed like
// any other: the streamed message quotes nothing (Discord refuses a
// reference that is not a message id), it is edited while the answer
// grows, and it ends as the stored reply.
func TestE2EStreamInjectedMessageOnDiscord(t *testing.T) {
	t.Parallel()
	chunks := words(40, 4)
	llm := streamingLLM(t, chunks, 50*time.Millisecond)
	dc := discordtest.New(t, dcToken)
	guild := dc.Guild()
	ch := dc.TextChannel(guild)
	h := startApp(t, loadConfigFile(t, writeConfig(t, discordConfig(t.TempDir(), llm.BaseURL(), dc.URL+"/api/v10", ""))))
	in := core.Inbound{Conversation: core.ConversationKey{Channel: "discord", Chat: ch}, Origin: core.OriginPlugin + "webhook", Text: "summarise the push"}
	if _, err := h.app.gateway.Inject(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	want := strings.Join(chunks, "")
	var r *core.Reply
	dc.WaitFor(t, "the answer stored and delivered", func() bool {
		sent := dc.Sent()
		if len(sent) == 0 {
			return false
		}
		rr, err := h.app.db.ReplyByPlatformID(context.Background(), "discord", sent[0].ID)
		if err != nil || rr == nil || rr.Streaming || rr.Sent[0] == "" || rr.Draft[0] {
			return false
		}
		r = rr
		return true
	})
	sent := dc.Sent()
	if len(sent) != 1 || sent[0].ReplyTo != "" {
		t.Fatalf("sent %+v; want one message quoting nothing", sent)
	}
	if len(dc.Edits()) == 0 {
		t.Fatalf("the answer was not edited while it grew; want it streamed")
	}
	if got, _ := dc.Content(sent[0].ID); r.Text != want || got != r.Parts[0] {
		t.Fatalf("message reads %q, stored %q; want both the whole answer %q", got, r.Text, want)
	}
}

// TestE2EStreamReactionWhileStreamingMapsToTheReply: in a Slack channel
// the answer goes to the thread of the message, while a reaction names
// only the channel. A 👎 on the streamed message made while the answer is
// still being written joins the answer's conversation (the draft reply
// knows it), so it is judged once the answer is finished: one negative
// signal for the model that answered, on the finished reply.
func TestE2EStreamReactionWhileStreamingMapsToTheReply(t *testing.T) {
	t.Parallel()
	chunks := words(60, 4) // 3 s at 50 ms a chunk
	llm := streamingLLM(t, chunks, 50*time.Millisecond)
	srv := slacktest.New(t, slackBotToken, slackAppToken)
	h := startApp(t, loadConfigFile(t, writeConfig(t, slackConfig(t.TempDir(), llm.BaseURL(), srv.URL, "    mode: socket\n"))))
	srv.WaitConnected(t, 1, 20*time.Second)
	srv.Deliver(srv.Mention("alice", "C1", "tell me a long story", ""))
	opened := srv.WaitPosts(t, 1, 20*time.Second)[0]
	if text, _ := srv.Text("C1", opened.TS); strings.HasSuffix(text, chunks[len(chunks)-1]) {
		t.Fatalf("the whole answer was out before the reaction; the test needs a reaction mid-stream")
	}
	ctx := context.Background()
	// A user reacts once the message is there: after the stream recorded it.
	srv.WaitFor(t, "the streamed message recorded", 20*time.Second, func() bool {
		r, err := h.app.db.ReplyByPlatformID(ctx, "slack", "C1:"+opened.TS)
		return err == nil && r != nil
	})
	srv.Deliver(srv.Reaction("alice", "C1", opened.TS, "-1", true))

	want := strings.Join(chunks, "")
	var rep *core.Reply
	srv.WaitFor(t, "the reply finished", 20*time.Second, func() bool {
		r, err := h.app.db.ReplyByPlatformID(ctx, "slack", "C1:"+opened.TS)
		if err != nil || r == nil || r.Streaming {
			return false
		}
		rep = r
		return true
	})
	if rep.Text != want {
		t.Fatalf("stored reply %q; want %q", rep.Text, want)
	}
	var sigs []core.Signal
	deadline := time.Now().Add(20 * time.Second)
	for len(sigs) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		var err error
		if sigs, err = h.app.db.SignalsForReply(ctx, rep.ID); err != nil {
			t.Fatal(err)
		}
	}
	if len(sigs) != 1 || sigs[0].Polarity != core.Negative || sigs[0].Model != "fake/small" {
		t.Fatalf("signals for reply %d = %+v; want one negative on fake/small", rep.ID, sigs)
	}
}

// TestE2EStreamSlackNativeRetryDoesNotAppendTheAnswerAgain: an answer
// streamed natively in a Slack thread is cut off (the request times out)
// and answered again. The second attempt goes on in the message the
// first one opened without appending the new answer to what the first
// attempt's stream left there: the message never shows the answer's
// start twice, and ends as the stored reply.
func TestE2EStreamSlackNativeRetryDoesNotAppendTheAnswerAgain(t *testing.T) {
	t.Parallel()
	// The first answer takes 15 s: the request timeout (6 s) comes first.
	// The second streams for about 2 s; the timeout leaves a loaded
	// machine room for it (with 3 s, the retries timed out too).
	slow := words(300, 4)
	again := words(30, 4)
	llm := providertest.NewOpenAI(t)
	var answered atomic.Bool
	llm.SetReply(func(providertest.Received) providertest.Script {
		if !answered.Swap(true) {
			return providertest.Script{Chunks: slow, ChunkDelay: 50 * time.Millisecond}
		}
		return providertest.Script{Chunks: again, ChunkDelay: 60 * time.Millisecond}
	})
	srv := slacktest.New(t, slackBotToken, slackAppToken)
	cfg := slackConfig(t.TempDir(), llm.BaseURL(), srv.URL, "    mode: socket\n    streaming: native\n") + "queue:\n  request_timeout: 6s\n"
	h := startApp(t, loadConfigFile(t, writeConfig(t, cfg)))
	srv.WaitConnected(t, 1, 20*time.Second)
	srv.Deliver(srv.Mention("alice", "C1", "tell me a long story", ""))

	want := strings.Join(again, "")
	ctx := context.Background()
	var rep *core.Reply
	srv.WaitFor(t, "the answer of the second attempt", 30*time.Second, func() bool {
		for _, c := range srv.Streams() {
			if c.Method != "chat.startStream" {
				continue
			}
			r, err := h.app.db.ReplyByPlatformID(ctx, "slack", "C1:"+c.TS)
			if err != nil || r == nil || r.Streaming || r.Text != want {
				return false
			}
			if text, _ := srv.Text("C1", c.TS); text != want {
				return false
			}
			rep = r
			return true
		}
		return false
	})
	starts := 0
	for _, c := range srv.Streams() {
		switch {
		case c.Method == "chat.startStream":
			starts++
		case c.Method == "chat.appendStream" && strings.HasPrefix(c.MarkdownText, "w0"):
			t.Fatalf("%s added %q to the message: the answer from its start again, after what the first attempt showed", c.Method, c.MarkdownText)
		}
	}
	// Besides the stream, at most the notice that the answer is delayed
	// (the retry comes more than a few seconds after the message).
	var posts []string
	for _, p := range srv.Posts() {
		if !strings.HasPrefix(p.Text, "⏳") {
			posts = append(posts, p.Text)
		}
	}
	if starts != 1 || len(posts) != 0 || rep.Sent[0] == "" {
		t.Fatalf("%d streams started, messages posted %q; want the answer in the one message the first attempt opened", starts, posts)
	}
}

// TestE2EStreamSlackNativeStatusLineIsReplacedByTheAnswer: in a Slack
// thread streamed natively, the status line shown while a tool runs is
// replaced by the answer while it is written, not only by the final
// update.
func TestE2EStreamSlackNativeStatusLineIsReplacedByTheAnswer(t *testing.T) {
	t.Parallel()
	answer := words(30, 4)
	llm := providertest.NewOpenAI(t)
	llm.SetReply(func(r providertest.Received) providertest.Script {
		if last := r.Messages[len(r.Messages)-1]; last.Role != core.RoleTool {
			return providertest.Script{ToolCalls: []core.ToolCall{{Action: "memory_save", Args: map[string]string{"content": "likes long stories"}}}}
		}
		// A second of silence (the status line shows), then the answer.
		return providertest.Script{Chunks: append(make([]string, 10), answer...), ChunkDelay: 100 * time.Millisecond}
	})
	srv := slacktest.New(t, slackBotToken, slackAppToken)
	h := startApp(t, loadConfigFile(t, writeConfig(t, slackConfig(t.TempDir(), llm.BaseURL(), srv.URL, "    mode: socket\n    streaming: native\n"))))
	srv.WaitConnected(t, 1, 20*time.Second)
	srv.Deliver(srv.Mention("alice", "C1", "remember that I like long stories, then tell one", ""))

	want := strings.Join(answer, "")
	ctx := context.Background()
	srv.WaitFor(t, "the final answer", 30*time.Second, func() bool {
		for _, c := range srv.Streams() {
			if c.Method == "chat.startStream" {
				r, err := h.app.db.ReplyByPlatformID(ctx, "slack", "C1:"+c.TS)
				text, _ := srv.Text("C1", c.TS)
				return err == nil && r != nil && !r.Streaming && r.Text == want && text == want
			}
		}
		return false
	})
	calls := srv.Streams()
	if calls[0].Method != "chat.startStream" || !strings.Contains(calls[0].MarkdownText, "memory_save") {
		t.Fatalf("the stream started with %s %q; want the status line of the tool", calls[0].Method, calls[0].MarkdownText)
	}
	// What the message showed, step by step: the stream's start, each
	// append, each chat.update.
	type state struct {
		at   time.Time
		text string
	}
	var states []state
	text := ""
	for _, c := range calls {
		if c.TS != calls[0].TS && c.Method != "chat.startStream" {
			continue
		}
		switch c.Method {
		case "chat.startStream":
			text = c.MarkdownText
		case "chat.appendStream":
			text += c.MarkdownText
		default:
			continue
		}
		states = append(states, state{c.At, text})
	}
	for _, u := range srv.Updates() {
		states = append(states, state{u.At, u.Text})
	}
	sort.SliceStable(states, func(i, j int) bool { return states[i].at.Before(states[j].at) })
	written := false
	for _, st := range states {
		switch {
		case st.text == calls[0].MarkdownText:
		case strings.HasPrefix(want, st.text) && strings.HasPrefix(st.text, "w0"):
			written = written || st.text != want
		default:
			t.Fatalf("the message showed %q: neither the status line nor the start of the answer %q", st.text, want)
		}
	}
	if !written {
		t.Fatalf("the message went from the status line to the final answer (%d states); want the answer shown while it is written", len(states))
	}
}

// panicHook's post-hook panics: the request fails for good.
type panicHook struct{}

func (panicHook) Pre(_ context.Context, in core.HookInput) (core.PreResult, error) {
	return core.PreResult{Text: in.Text, Metadata: in.Metadata}, nil
}

func (panicHook) Post(context.Context, core.HookInput, string) (string, error) {
	panic("post-hook bug")
}

// TestE2EStreamFailedRequestEndsWithTheApology: a request whose post-hook
// panics after the answer was streamed fails for good; the streamed
// message ends showing the apology, and the stream does not update it
// again afterwards.
func TestE2EStreamFailedRequestEndsWithTheApology(t *testing.T) {
	t.Parallel()
	chunks := words(40, 4)
	llm := streamingLLM(t, chunks, 50*time.Millisecond)
	bot := telegramtest.New(t, tgToken)
	startAppWith(t, loadConfigFile(t, writeConfig(t, telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL))), AppOptions{Hooks: panicHook{}})
	bot.AddUpdate(bot.Private(telegramtest.User(48, "alice"), "a story"))
	bot.WaitFor(t, "the apology", 20*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
		if len(sent) == 0 {
			return false
		}
		text, _ := bot.Text(48, sent[0].MessageID)
		return strings.HasPrefix(text, "Sorry, I could not answer that")
	})
	time.Sleep(2500 * time.Millisecond) // more than two of Telegram's edit intervals
	sent := bot.Sent()
	if text, _ := bot.Text(48, sent[0].MessageID); len(sent) != 1 || !strings.HasPrefix(text, "Sorry, I could not answer that") {
		t.Fatalf("%d messages; the streamed one reads %q; want it to end with the apology", len(sent), text)
	}
}

// TestE2EStreamCutAnswerEndsWithTheNoteOnce: an answer the provider cut
// at the output limit (finish reason "length"), streamed by edits, ends
// with the note once in the message and in the stored reply; the next
// request's history holds only the model's words.
func TestE2EStreamCutAnswerEndsWithTheNoteOnce(t *testing.T) {
	t.Parallel()
	chunks := words(20, 4)
	llm := providertest.NewOpenAI(t)
	llm.SetReply(func(providertest.Received) providertest.Script {
		return providertest.Script{Chunks: chunks, ChunkDelay: 50 * time.Millisecond, StopReason: "length"}
	})
	bot := telegramtest.New(t, tgToken)
	h := startApp(t, loadConfigFile(t, writeConfig(t, telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL))))
	alice := telegramtest.User(47, "alice")
	bot.AddUpdate(bot.Private(alice, "tell me a long story"))
	const note = "cut off here"
	bot.WaitFor(t, "the final text with the note", 20*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
		if len(sent) == 0 {
			return false
		}
		text, _ := bot.Text(47, sent[0].MessageID)
		return strings.Contains(text, note)
	})
	sent := bot.Sent()
	if len(sent) != 1 {
		t.Fatalf("%d messages sent; want the answer as one message, edited", len(sent))
	}
	final, _ := bot.Text(47, sent[0].MessageID)
	if n := strings.Count(final, note); n != 1 || !strings.HasPrefix(final, strings.Join(chunks, "")) {
		t.Fatalf("the message reads %q; want the streamed answer, then the note once", final)
	}
	r := storedReply(t, h, 47, sent[0].MessageID)
	if strings.Count(r.Text, note) != 1 {
		t.Fatalf("stored reply %q; want the note once", r.Text)
	}
	bot.AddUpdate(bot.Private(alice, "go on"))
	bot.WaitFor(t, "the second answer", 20*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool { return len(sent) >= 2 })
	reqs := llm.Requests()
	for _, m := range reqs[len(reqs)-1].Messages {
		if m.Role == core.RoleAssistant && strings.Contains(m.Content, note) {
			t.Fatalf("the next request's history holds the note: %q", m.Content)
		}
	}
}
