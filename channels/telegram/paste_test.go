package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/config"
)

// longPart is a text of n characters, as a client cuts a long paste.
func longPart(word string, n int) string {
	s := strings.Repeat(word+" ", n/(len(word)+1)+1)
	return strings.TrimSpace(s[:n])
}

// dated sets u's message date to at (Unix seconds).
func dated(u models.Update, at int) models.Update {
	u.Message.Date = at
	return u
}

// TestSplitPasteIsOneMessage: a text over Telegram's 4,096 characters,
// which the client sent as parts one right after the other, reaches the
// gateway as one message (one answer, to the whole text); what comes
// apart from it (later, from someone else, in another topic, after a
// short message) is answered on its own.
func TestSplitPasteIsOneMessage(t *testing.T) {
	const at = 1_700_000_000
	p1, p2, p3 := longPart("alpha", 4096), longPart("beta", 4090), "gamma end. What does this log say?"
	tests := []struct {
		name    string
		updates func(srv *telegramtest.Server) []models.Update
		want    []string
	}{
		{
			name: "private, three parts",
			updates: func(srv *telegramtest.Server) []models.Update {
				return []models.Update{
					dated(srv.Private(alice, p1), at), dated(srv.Private(alice, p2), at), dated(srv.Private(alice, p3), at+1),
					dated(srv.Private(alice, "thanks"), at+60),
				}
			},
			want: []string{p1 + "\n" + p2 + "\n" + p3, "thanks"},
		},
		{
			name: "a forum topic's parts, not another topic's",
			updates: func(srv *telegramtest.Server) []models.Update {
				return []models.Update{
					dated(srv.Group(groupID, alice, "@talon_bot "+p1, 7), at),
					dated(srv.Group(groupID, alice, p3, 7), at+1),
					dated(srv.Group(groupID, alice, "@talon_bot "+p1, 7), at+2),
					dated(srv.Group(groupID, alice, "@talon_bot other topic", 9), at+2),
				}
			},
			want: []string{p1 + "\n" + p3, p1, "other topic"},
		},
		{
			name: "short, then near the limit, then much later",
			updates: func(srv *telegramtest.Server) []models.Update {
				return []models.Update{
					dated(srv.Private(alice, "hi"), at), dated(srv.Private(alice, p3), at),
					dated(srv.Private(alice, p1), at+1), dated(srv.Private(alice, "and?"), at+600),
				}
			},
			want: []string{"hi", p3, p1, "and?"},
		},
		{
			name: "a group paste that names the bot at its end",
			updates: func(srv *telegramtest.Server) []models.Update {
				return []models.Update{
					dated(srv.Group(groupID, alice, p1, 0), at),
					dated(srv.Group(groupID, alice, p2, 0), at),
					dated(srv.Group(groupID, alice, "that is all, @talon_bot what now?", 0), at+1),
					dated(srv.Group(groupID, alice, p1, 0), at+5),
					dated(srv.Group(groupID, alice, "not for the bot", 0), at+5),
				}
			},
			want: []string{p1 + "\n" + p2 + "\nthat is all, what now?"},
		},
		{
			name: "a command right after a long message",
			updates: func(srv *telegramtest.Server) []models.Update {
				return []models.Update{
					dated(srv.Group(groupID, alice, "@talon_bot "+p1, 0), at),
					dated(srv.Group(groupID, alice, "/new", 0), at+1),
				}
			},
			want: []string{p1, "/new"},
		},
		{
			name: "a long command, then a question",
			updates: func(srv *telegramtest.Server) []models.Update {
				return []models.Update{
					dated(srv.Group(groupID, alice, "/new "+p1, 0), at),
					dated(srv.Group(groupID, alice, "@talon_bot what next?", 0), at+1),
				}
			},
			want: []string{"/new " + p1, "what next?"},
		},
		{
			name: "a reply to another message right after a long one",
			updates: func(srv *telegramtest.Server) []models.Update {
				u := dated(srv.Private(alice, "about this one"), at+1)
				u.Message.ReplyToMessage = &models.Message{ID: 1, Chat: u.Message.Chat, From: alice, Text: "older"}
				return []models.Update{dated(srv.Private(alice, p1), at), u}
			},
			want: []string{p1, "about this one"},
		},
		{
			name: "another user's message after a long one",
			updates: func(srv *telegramtest.Server) []models.Update {
				return []models.Update{
					dated(srv.Group(groupID, alice, "@talon_bot "+p1, 0), at),
					dated(srv.Group(groupID, bob, "@talon_bot me too", 0), at),
				}
			},
			want: []string{p1, "me too"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *config.Telegram, _ *Options) { c.Trigger = "mention" })
			var last int64
			for _, u := range tc.updates(h.srv) {
				last = h.srv.AddUpdate(u)
			}
			accepted := acceptedUpTo(t, h, last)
			var got []string
			for _, in := range accepted {
				got = append(got, in.Text)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("accepted %d messages (%s); want %d", len(got), short(got), len(tc.want))
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("message %d = %s; want %s", i, short([]string{got[i]}), short([]string{tc.want[i]}))
				}
			}
			if tc.name == "a forum topic's parts, not another topic's" && accepted[0].Conversation.Thread != "7" {
				t.Errorf("the paste's conversation = %+v; want topic 7", accepted[0].Conversation)
			}
		})
	}
}

// short shows long texts by their length and ends.
func short(ts []string) string {
	var out []string
	for _, s := range ts {
		if len(s) > 40 {
			s = s[:15] + "…(" + strconv.Itoa(len(s)) + ")…" + s[len(s)-15:]
		}
		out = append(out, strconv.Quote(s))
	}
	return "[" + strings.Join(out, " ") + "]"
}

// TestSplitPasteAcrossPolls: when a getUpdates brings only a paste's
// first part, the poller reads again from the same offset (telling
// Telegram of nothing, so a crash meanwhile loses nothing) and hands the
// parts over as one message.
func TestSplitPasteAcrossPolls(t *testing.T) {
	var srv *telegramtest.Server
	var once sync.Once
	p1, p2 := longPart("alpha", 4096), "the end"
	h := newHarness(t, func(_ *config.Telegram, o *Options) {
		o.Sleep = func(ctx context.Context, d time.Duration) error {
			if d == albumWait {
				once.Do(func() { srv.AddUpdate(srv.Private(alice, p2)) })
			}
			return nil
		}
	})
	srv = h.srv
	sink := newFakeSink()
	u1 := h.srv.Private(alice, p1)
	first := h.srv.AddUpdate(u1)
	h.run(t, sink)
	h.srv.WaitFor(t, "the offset past the paste", 5*time.Second, func([]telegramtest.Sent, []telegramtest.Call) bool { return h.srv.Confirmed() > first+1 })
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.accepted) != 1 || sink.accepted[0].Text != p1+"\n"+p2 {
		var got []string
		for _, in := range sink.accepted {
			got = append(got, in.Text)
		}
		t.Fatalf("accepted %s; want the two parts as one message", short(got))
	}
	if want := platformID(u1.Message.Chat.ID, u1.Message.ID); sink.accepted[0].MessageID != want {
		t.Errorf("the paste's MessageID = %q; want the first part's, %q (the key a re-read is dropped by)", sink.accepted[0].MessageID, want)
	}
	for _, c := range h.srv.Calls("getUpdates") {
		if c.Params["timeout"] == "0" && c.Params["offset"] != "" && c.Params["offset"] != strconv.FormatInt(first, 10) {
			t.Errorf("the paste's re-read asked from offset %s; want %d (nothing confirmed)", c.Params["offset"], first)
		}
	}
}

// TestShortMessageDoesNotWait: an ordinary message is handed over
// without the poller waiting for anything after it.
func TestShortMessageDoesNotWait(t *testing.T) {
	h := newHarness(t, nil)
	last := h.srv.AddUpdate(h.srv.Private(alice, longPart("word", pasteNear-1)))
	if got := acceptedUpTo(t, h, last); len(got) != 1 {
		t.Fatalf("accepted %d messages; want 1", len(got))
	}
	for _, d := range h.sleeps.all() {
		if d == albumWait {
			t.Fatalf("the poller waited %v after a message under the paste length", d)
		}
	}
}

// TestWebhookSplitPasteIsOneMessage: in webhook mode, where each part
// comes in its own request, the first part's request waits for the next
// part; both are acknowledged once the paste was committed as one
// message, a part delivered again is acknowledged without a second one,
// and a short message is handed over at once.
func TestWebhookSplitPasteIsOneMessage(t *testing.T) {
	h, sink, addr := runWebhook(t)
	post := func(u models.Update) int {
		body, _ := json.Marshal(u)
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr.String()+"/telegram", bytes.NewReader(body))
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", "hook-secret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	texts := func() []string {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		var out []string
		for _, in := range sink.accepted {
			out = append(out, in.Text)
		}
		return out
	}
	p1, p2 := longPart("alpha", 4096), "the end"
	u1, u2 := h.srv.Private(alice, p1), h.srv.Private(alice, p2)
	u1.ID, u2.ID = 1, 2
	first := make(chan int, 1)
	go func() { first <- post(u1) }()
	// The first part's request is gathering before the second is sent
	// (Telegram sends them in that order).
	for {
		h.bot.pastes.mu.Lock()
		n := len(h.bot.pastes.open)
		h.bot.pastes.mu.Unlock()
		if n == 1 {
			break
		}
		select {
		case code := <-first:
			t.Fatalf("the first part's request ended (%d) without waiting for the next part; accepted %s", code, short(texts()))
		case <-time.After(time.Millisecond):
		}
	}
	if code := post(u2); code != http.StatusOK {
		t.Fatalf("second part: status %d", code)
	}
	if code := <-first; code != http.StatusOK {
		t.Fatalf("first part: status %d", code)
	}
	if got := texts(); len(got) != 1 || got[0] != p1+"\n"+p2 {
		t.Fatalf("accepted %s; want the two parts as one message", short(got))
	}
	if code := post(u2); code != http.StatusOK || len(texts()) != 1 {
		t.Fatalf("a part delivered again: status %d, accepted %s; want 200 and still one message", code, short(texts()))
	}
	u3 := h.srv.Private(alice, "thanks")
	u3.ID = 3
	if code := post(u3); code != http.StatusOK {
		t.Fatalf("short message: status %d", code)
	}
	if got := texts(); len(got) != 2 || got[1] != "thanks" {
		t.Fatalf("accepted %s; want the short message on its own", short(got))
	}
}

// TestPasteWaitHoldsOnlyThePaste: while the poller waits for a paste's
// next part, the messages that came before it in the batch (another
// chat's here) are already handed over: only the paste waits.
func TestPasteWaitHoldsOnlyThePaste(t *testing.T) {
	var srv *telegramtest.Server
	sink := newFakeSink()
	var once sync.Once
	acceptedBeforeWait := -1
	p1, p2 := longPart("alpha", 4096), "the end"
	h := newHarness(t, func(_ *config.Telegram, o *Options) {
		o.Sleep = func(ctx context.Context, d time.Duration) error {
			if d == albumWait {
				once.Do(func() {
					sink.mu.Lock()
					acceptedBeforeWait = len(sink.accepted)
					sink.mu.Unlock()
					srv.AddUpdate(srv.Private(alice, p2))
				})
			}
			return nil
		}
	})
	srv = h.srv
	h.srv.AddUpdate(h.srv.Private(bob, "a short question"))
	first := h.srv.AddUpdate(h.srv.Private(alice, p1))
	h.run(t, sink)
	h.srv.WaitFor(t, "the offset past the paste", 5*time.Second, func([]telegramtest.Sent, []telegramtest.Call) bool { return h.srv.Confirmed() > first+1 })
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if acceptedBeforeWait != 1 {
		t.Errorf("%d messages handed over when the poller began to wait for the paste; want bob's, 1", acceptedBeforeWait)
	}
	var got []string
	for _, in := range sink.accepted {
		got = append(got, in.Text)
	}
	if len(got) != 2 || got[0] != "a short question" || got[1] != p1+"\n"+p2 {
		t.Fatalf("accepted %s; want bob's question, then alice's paste as one message", short(got))
	}
}

// TestFailedUpdateIsReadAgainOnce: with no paste in a batch, an update
// the gateway did not commit is reported and read again after the
// backoff, not handed over a second time at once.
func TestFailedUpdateIsReadAgainOnce(t *testing.T) {
	h := newHarness(t, nil)
	sink := newFakeSink()
	sink.failNext = 1
	last := h.srv.AddUpdate(h.srv.Private(alice, "hello"))
	h.run(t, sink)
	h.srv.WaitFor(t, "the offset past the update", 5*time.Second, func([]telegramtest.Sent, []telegramtest.Call) bool { return h.srv.Confirmed() > last })
	if !strings.Contains(h.logs.String(), "update not accepted; it will be read again") {
		t.Fatalf("the failed update was not reported as read again; logs:\n%s", h.logs.String())
	}
	found := false
	for _, d := range h.sleeps.all() {
		found = found || d == time.Second
	}
	if !found {
		t.Errorf("no backoff before the update was read again; sleeps %v", h.sleeps.all())
	}
}

// TestEditedPastePart: an edit of a part of a paste handed over as one
// message edits the queued paste (the first part's id) to the whole text
// with that part changed: an edit of the first part does not cut the
// paste to that part, nor is an edit of a later part lost.
func TestEditedPastePart(t *testing.T) {
	const at = 1_700_000_000
	p1, p2 := longPart("alpha", 4096), "the end"
	h := newHarness(t, nil)
	u1, u2 := dated(h.srv.Private(alice, p1), at), dated(h.srv.Private(alice, p2), at)
	h.srv.AddUpdate(u1)
	h.srv.AddUpdate(u2)
	edit := func(u models.Update, text string) models.Update {
		m := *u.Message
		m.Text, m.EditDate = text, at+30
		return models.Update{EditedMessage: &m}
	}
	p1b := longPart("omega", 4096)
	h.srv.AddUpdate(edit(u1, p1b))
	last := h.srv.AddUpdate(edit(u2, "the real end"))
	sink := newFakeSink()
	h.run(t, sink)
	h.srv.WaitFor(t, "the offset past the updates", 5*time.Second, func([]telegramtest.Sent, []telegramtest.Call) bool { return h.srv.Confirmed() > last })
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.accepted) != 1 {
		t.Fatalf("accepted %d messages; want the paste as one", len(sink.accepted))
	}
	first := platformID(u1.Message.Chat.ID, u1.Message.ID)
	want := []string{p1b + "\n" + p2, p1b + "\nthe real end"}
	if len(sink.edits) != len(want) {
		t.Fatalf("%d edits handed over; want %d", len(sink.edits), len(want))
	}
	for i, e := range sink.edits {
		if e.MessageID != first || e.Text != want[i] {
			t.Errorf("edit %d: message %q, text %s; want message %q, text %s", i, e.MessageID, short([]string{e.Text}), first, short([]string{want[i]}))
		}
	}
}

// TestWebhookPasteFirstPartDeliveredAgain: Telegram delivers a paste's
// first part again (its first request broke) while the webhook still
// gathers the paste, its short second part already joined. The repeat
// waits for the paste: handed over alone it would be committed under the
// first part's id, the id the whole paste is then dropped by as a
// duplicate, and the second part would be lost.
func TestWebhookPasteFirstPartDeliveredAgain(t *testing.T) {
	h, sink, addr := runWebhook(t)
	post := func(u models.Update) int {
		body, _ := json.Marshal(u)
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr.String()+"/telegram", bytes.NewReader(body))
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", "hook-secret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	gathered := func(n int) {
		for {
			h.bot.pastes.mu.Lock()
			got := 0
			for _, p := range h.bot.pastes.open {
				got = len(p.updates)
			}
			h.bot.pastes.mu.Unlock()
			if got >= n {
				return
			}
			time.Sleep(time.Millisecond) // polling the gatherer's state, not timing the test
		}
	}
	p1, p2 := longPart("alpha", 4096), "the end"
	u1, u2 := h.srv.Private(alice, p1), h.srv.Private(alice, p2)
	u1.ID, u2.ID = 1, 2
	codes := make(chan int, 3)
	go func() { codes <- post(u1) }()
	gathered(1)
	go func() { codes <- post(u2) }()
	gathered(2)
	go func() { codes <- post(u1) }()
	for range 3 {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("status %d; want 200", code)
		}
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	var got []string
	for _, in := range sink.accepted {
		got = append(got, in.Text)
	}
	if len(got) != 1 || got[0] != p1+"\n"+p2 {
		t.Fatalf("accepted %s; want only the paste, once, as one message", short(got))
	}
}
