package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
)

func TestStreamingReplyIsFilledIn(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	conv := core.ConversationKey{Channel: "telegram", Chat: "1"}
	sess, err := db.ActiveSession(ctx, conv)
	if err != nil {
		t.Fatal(err)
	}
	draft := &core.Reply{RequestID: 7, SessionID: sess.ID, Conversation: conv, Streaming: true}
	id, err := db.BeginReply(ctx, draft)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := db.BeginReply(ctx, draft); err != nil || again != id {
		t.Fatalf("a second BeginReply gave %d (%v); want the same row %d", again, err, id)
	}
	for i, pid := range []string{"1:10", "1:11", "1:12"} {
		if err := db.MarkDraft(ctx, id, i, pid); err != nil {
			t.Fatal(err)
		}
	}
	r, err := db.ReplyForRequest(ctx, 7, conv)
	if err != nil || r == nil || !r.Streaming || len(r.Sent) != 3 || !r.Draft[2] || r.Sent[1] != "1:11" {
		t.Fatalf("draft reply = %+v (%v); want a streaming reply with three draft messages", r, err)
	}
	if got, _ := db.ReplyByPlatformID(ctx, "telegram", "1:11"); got == nil || got.ID != id {
		t.Fatalf("a reaction on a streamed message maps to %+v; want reply %d", got, id)
	}
	// The final text needs two parts and carries a file.
	final := &core.Reply{RequestID: 7, SessionID: sess.ID, Conversation: conv, Text: "final", Parts: []string{"fi", "nal"},
		Files: []core.Attachment{{Kind: core.MediaImage, Name: "c.png", MIME: "image/png", Size: 3, SHA256: strings.Repeat("a", 64)}}, Model: "m"}
	got, err := db.SaveReply(ctx, final, []core.ChatMessage{{Role: core.RoleUser, Content: "q"}, {Role: core.RoleAssistant, Content: "final"}})
	if err != nil || got != id {
		t.Fatalf("SaveReply = %d (%v); want the draft row %d filled in", got, err, id)
	}
	r, _ = db.ReplyForRequest(ctx, 7, conv)
	if r.Streaming || r.Text != "final" || len(r.Parts) != 2 || len(r.Files) != 1 || r.Files[0].Name != "c.png" {
		t.Fatalf("reply = %+v; want the final text, parts and file", r)
	}
	if len(r.Sent) != 3 || !r.Draft[0] || r.Sent[2] != "1:12" {
		t.Fatalf("sent %v draft %v; the stream's messages stay recorded until delivered", r.Sent, r.Draft)
	}
	if err := db.MarkSent(ctx, id, 0, "1:10"); err != nil {
		t.Fatal(err)
	}
	if err := db.ForgetPart(ctx, id, 2); err != nil {
		t.Fatal(err)
	}
	r, _ = db.ReplyForRequest(ctx, 7, conv)
	if r.Draft[0] || r.Sent[2] != "" || r.Sent[0] != "1:10" {
		t.Fatalf("after delivery: sent %v draft %v", r.Sent, r.Draft)
	}
	// A saved (not streaming) reply is not overwritten by a second save.
	if again, _ := db.SaveReply(ctx, &core.Reply{RequestID: 7, SessionID: sess.ID, Conversation: conv, Text: "other", Parts: []string{"other"}}, nil); again != id {
		t.Fatalf("second save = %d", again)
	}
	if r, _ = db.ReplyForRequest(ctx, 7, conv); r.Text != "final" {
		t.Fatalf("the stored reply changed to %q", r.Text)
	}
}

func TestHistoryKeepsAttachmentReferences(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	sess, _ := db.ActiveSession(ctx, core.ConversationKey{Channel: "console", Chat: "c"})
	att := core.Attachment{Kind: core.MediaImage, Name: "p.jpg", MIME: "image/jpeg", Size: 5, SHA256: strings.Repeat("b", 64), Data: []byte("bytes")}
	if _, err := db.SaveReply(ctx, &core.Reply{RequestID: 1, SessionID: sess.ID, Conversation: sess.Conversation, Text: "a", Parts: []string{"a"}},
		[]core.ChatMessage{{Role: core.RoleUser, Content: "look", Attachments: []core.Attachment{att}}}); err != nil {
		t.Fatal(err)
	}
	h, err := db.History(ctx, sess.ID, 10)
	if err != nil || len(h) != 1 || len(h[0].Attachments) != 1 {
		t.Fatalf("history %+v (%v); want the message with its image", h, err)
	}
	if a := h[0].Attachments[0]; a.SHA256 != att.SHA256 || a.MIME != "image/jpeg" || a.Data != nil {
		t.Fatalf("attachment %+v; want the reference without its bytes", a)
	}
}

func TestMediaStore(t *testing.T) {
	c := clock.NewFake(time.Unix(1_800_000_000, 0))
	db := openTest(t, Options{Now: c.Now})
	ctx := context.Background()
	data := bytes.Repeat([]byte("x"), 1000)
	sum := sha256.Sum256(data)
	f, err := db.StoreMedia(ctx, "telegram:file-1", "text/plain", bytes.NewReader(data), 1000)
	if err != nil || f.SHA256 != hex.EncodeToString(sum[:]) || f.Size != 1000 {
		t.Fatalf("StoreMedia = %+v (%v)", f, err)
	}
	if got, err := db.ReadMedia(ctx, f.SHA256); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadMedia: %v", err)
	}
	if _, err := db.StoreMedia(ctx, "telegram:file-2", "text/plain", bytes.NewReader(append(data, 'y')), 1000); !errors.Is(err, core.ErrTooLarge) {
		t.Fatalf("1001 bytes with a limit of 1000: %v; want ErrTooLarge", err)
	}
	if _, ok, _ := db.MediaBySource(ctx, "telegram:file-2"); ok {
		t.Fatal("a refused file was recorded")
	}
	got, ok, err := db.MediaBySource(ctx, "telegram:file-1")
	if err != nil || !ok || got.SHA256 != f.SHA256 || got.HasText {
		t.Fatalf("MediaBySource = %+v %v %v", got, ok, err)
	}
	if err := db.SetMediaText(ctx, f.SHA256, "the text"); err != nil {
		t.Fatal(err)
	}
	if got, _, _ = db.MediaBySource(ctx, "telegram:file-1"); !got.HasText || got.Text != "the text" {
		t.Fatalf("text = %q %v", got.Text, got.HasText)
	}
	if _, err := db.ReadMedia(ctx, "../opentalon.db"); core.ErrorKind(err) != core.KindInvalid {
		t.Fatalf("ReadMedia of a path: %v; want refused", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(filepath.Dir(db.Path()), MediaDir)); len(entries) != 1 {
		t.Fatalf("%d files in the media store; want only the stored one (no temporary left)", len(entries))
	}

	c.Advance(48 * time.Hour)
	if n, err := db.SweepMedia(ctx, c.Now().Add(-24*time.Hour)); err != nil || n != 1 {
		t.Fatalf("SweepMedia = %d (%v); want the unused file removed", n, err)
	}
	if _, err := db.ReadMedia(ctx, f.SHA256); core.ErrorKind(err) != core.KindNotFound {
		t.Fatalf("ReadMedia after the sweep: %v; want not found", err)
	}
	if _, ok, _ := db.MediaBySource(ctx, "telegram:file-1"); ok {
		t.Fatal("the source of a swept file is still found")
	}
}

// TestMediaKeptInABlobStore: with a blob store (plugins.blobs.plugin)
// each stored file is put there too, a file gone from the local media
// directory is read back from it (and cached again), and the sweep
// deletes it there.
func TestMediaKeptInABlobStore(t *testing.T) {
	c := clock.NewFake(time.Unix(1_800_000_000, 0))
	db := openTest(t, Options{Now: c.Now})
	blobs := NewFileBlobs(t.TempDir())
	db.UseBlobs(blobs)
	ctx := context.Background()
	local := filepath.Join(filepath.Dir(db.Path()), MediaDir)

	data := []byte("a photo's bytes")
	f, err := db.StoreMedia(ctx, "telegram:file-1", "image/jpeg", bytes.NewReader(data), 1000)
	if err != nil {
		t.Fatal(err)
	}
	made, err := db.PutMedia(ctx, []byte("a chart the bot made"), "image/png")
	if err != nil {
		t.Fatal(err)
	}
	for _, sha := range []string{f.SHA256, made} {
		if _, err := blobs.Get(ctx, "media/"+sha); err != nil {
			t.Fatalf("blob media/%s: %v; want the file in the blob store", sha, err)
		}
	}

	// This machine's copy is gone (another machine, a lost disk).
	if err := os.RemoveAll(local); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := db.MediaBySource(ctx, "telegram:file-1"); err != nil || !ok {
		t.Fatalf("MediaBySource without the local copy: %v %v; want it found", ok, err)
	}
	if got, err := db.ReadMedia(ctx, f.SHA256); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadMedia without the local copy = %q, %v; want it from the blob store", got, err)
	}
	if _, err := os.Stat(filepath.Join(local, f.SHA256)); err != nil {
		t.Fatalf("the file read from the blob store is not cached again: %v", err)
	}

	c.Advance(48 * time.Hour)
	if n, err := db.SweepMedia(ctx, c.Now().Add(-24*time.Hour)); err != nil || n != 2 {
		t.Fatalf("SweepMedia = %d (%v); want both files removed", n, err)
	}
	if _, err := blobs.Get(ctx, "media/"+f.SHA256); core.ErrorKind(err) != core.KindNotFound {
		t.Fatalf("blob after the sweep: %v; want it deleted", err)
	}
}
