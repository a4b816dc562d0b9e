package storetest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

// testSealed: a short-lived credential kept sealed opens on another
// handle with the same key, never under another key or after it expired,
// and is gone once dropped or swept; the database holds no plaintext.
func testSealed(t *testing.T, e Engine) {
	clock := NewClock()
	key := bytes.Repeat([]byte{7}, store.SealKeySize)
	open := e.New(t)
	a := open(store.Options{Now: clock.Now, SealKey: key})
	b := open(store.Options{Now: clock.Now, SealKey: key})
	other := open(store.Options{Now: clock.Now, SealKey: bytes.Repeat([]byte{8}, store.SealKeySize)})
	const secret = "https://hooks.slack.com/commands/T1/123/plain-secret-token"
	check(t, "keep", a.KeepSealed(ctx, "slack:response:cmd:1", secret, clock.Now().Add(30*time.Minute)))
	if got, ok, err := b.OpenSealed(ctx, "slack:response:cmd:1"); err != nil || !ok || got != secret {
		t.Fatalf("another handle opens %q %v %v; want the secret", got, ok, err)
	}
	if got, ok, err := other.OpenSealed(ctx, "slack:response:cmd:1"); err != nil || ok || got != "" {
		t.Fatalf("under another key: %q %v %v; want nothing", got, ok, err)
	}
	if _, ok, _ := b.OpenSealed(ctx, "slack:response:cmd:2"); ok {
		t.Fatal("a name never kept opened")
	}
	check(t, "drop", b.DropSealed(ctx, "slack:response:cmd:1"))
	if _, ok, _ := a.OpenSealed(ctx, "slack:response:cmd:1"); ok {
		t.Fatal("a dropped credential still opens")
	}
	check(t, "keep 2", a.KeepSealed(ctx, "discord:interaction:9", "tok", clock.Now().Add(15*time.Minute)))
	check(t, "keep 3", a.KeepSealed(ctx, "discord:interaction:10", "tok", clock.Now().Add(time.Hour)))
	clock.Advance(16 * time.Minute)
	if _, ok, _ := a.OpenSealed(ctx, "discord:interaction:9"); ok {
		t.Fatal("an expired credential still opens")
	}
	if n, err := a.SweepSealed(ctx, clock.Now()); err != nil || n != 1 {
		t.Fatalf("sweep = %d, %v; want the one expired", n, err)
	}
	if _, ok, _ := a.OpenSealed(ctx, "discord:interaction:10"); !ok {
		t.Fatal("the sweep took a credential still valid")
	}
	none := open(store.Options{Now: clock.Now})
	if err := none.KeepSealed(ctx, "x", "y", clock.Now().Add(time.Minute)); err == nil || !strings.Contains(err.Error(), "state.seal_key") {
		t.Fatalf("keeping without a key: %v; want an error naming state.seal_key", err)
	}
}

// testReplied: whether the bot answered in a conversation is read from
// the replies, by any handle.
func testReplied(t *testing.T, e Engine) {
	clock := NewClock()
	open := e.New(t)
	a, b := open(store.Options{Now: clock.Now}), open(store.Options{Now: clock.Now})
	thread := core.ConversationKey{Channel: "slack", Chat: "C1", Thread: "1700000000.000100"}
	if ok, err := b.Replied(ctx, thread); err != nil || ok {
		t.Fatalf("replied before any reply = %v, %v", ok, err)
	}
	sess, err := a.ActiveSession(ctx, thread)
	check(t, "session", err)
	req := mustEnqueue(t, a, msg(thread, "1", "question"))
	_, err = a.SaveReply(ctx, &core.Reply{RequestID: req, SessionID: sess.ID, Conversation: thread, Text: "answer", Parts: []string{"answer"}}, nil)
	check(t, "save", err)
	if ok, err := b.Replied(ctx, thread); err != nil || !ok {
		t.Fatalf("replied after a reply = %v, %v", ok, err)
	}
	if ok, _ := b.Replied(ctx, core.ConversationKey{Channel: "slack", Chat: "C1", Thread: "1700000000.000200"}); ok {
		t.Fatal("another thread of the channel counts as answered")
	}
	if ok, _ := b.Replied(ctx, core.ConversationKey{Channel: "slack", Chat: "C1"}); ok {
		t.Fatal("the channel itself counts as answered")
	}
}

// testMediaShared: a file stored by one handle whose own copy is gone
// (another replica's cache never had it): on a database replicas share
// its bytes come from the database, on SQLite it is gone.
func testMediaShared(t *testing.T, e Engine) {
	clock := NewClock()
	dirA, dirB := t.TempDir(), t.TempDir()
	open := e.New(t)
	a := open(store.Options{Now: clock.Now, MediaDir: dirA})
	b := open(store.Options{Now: clock.Now, MediaDir: dirB})
	data := []byte("\x89PNG\x00photo bytes")
	f, err := a.StoreMedia(ctx, "telegram:photo-1", "image/png", bytes.NewReader(data), 1<<20)
	check(t, "store", err)
	got, ok, err := b.MediaBySource(ctx, "telegram:photo-1")
	shared := e.Name == "postgres"
	if err != nil || ok != shared {
		t.Fatalf("by source on the other handle = %+v %v %v; want found=%v", got, ok, err, shared)
	}
	if !shared {
		return
	}
	if _, err := os.Stat(filepath.Join(dirB, f.SHA256)); err == nil {
		t.Fatal("the other handle had the file before reading it")
	}
	read, err := b.ReadMedia(ctx, f.SHA256)
	if err != nil || !bytes.Equal(read, data) {
		t.Fatalf("read on the other handle = %q, %v", read, err)
	}
	if _, err := os.Stat(filepath.Join(dirB, f.SHA256)); err != nil {
		t.Fatalf("the bytes read from the database were not cached: %v", err)
	}
	clock.Advance(time.Hour)
	if n, err := a.SweepMedia(ctx, clock.Now()); err != nil || n != 1 {
		t.Fatalf("sweep = %d, %v", n, err)
	}
	if _, err := b.ReadMedia(ctx, f.SHA256); core.ErrorKind(err) != core.KindNotFound {
		t.Fatalf("a file swept by another handle, read from a stale cache: %v; want not found", err)
	}
}
