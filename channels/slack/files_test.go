package slack_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/channels/slack/slacktest"
	"github.com/opentalon/opentalon/core"
)

// TestFetchWithoutFilesReadScope: Slack answers a download by a token
// without the files:read scope with its sign-in page (200, HTML). That
// is an error naming the scope (and a sentence for the user), never the
// file's content: before, the page was read as notes.txt's text, or sent
// to the model as pic.png's bytes.
func TestFetchWithoutFilesReadScope(t *testing.T) {
	r := newRig(t, setup{})
	txt := r.srv.AddFile([]byte("the notes"))
	f := core.InboundFile{ID: txt, Kind: core.MediaDocument, Name: "notes.txt", MIME: "text/plain", Size: 9}

	var got bytes.Buffer
	if err := r.bot.Fetch(context.Background(), f, &got, 1<<20); err != nil || got.String() != "the notes" {
		t.Fatalf("Fetch = %q, %v; want the file", got.String(), err)
	}

	r.srv.WithoutFilesRead()
	got.Reset()
	err := r.bot.Fetch(context.Background(), f, &got, 1<<20)
	if err == nil || !strings.Contains(err.Error(), "files:read") {
		t.Fatalf("Fetch = %q, %v; want an error naming the files:read scope", got.String(), err)
	}
	if msg := core.UserMessage(err); !strings.Contains(msg, "sign-in page instead of notes.txt") {
		t.Errorf("the user is told %q; want the sign-in page named", msg)
	}
	if got.Len() != 0 {
		t.Errorf("%d bytes of the sign-in page were kept as the file", got.Len())
	}
	if strings.Contains(err.Error(), r.srv.BotToken) {
		t.Errorf("the error shows the bot token: %v", err)
	}
}

// TestSlackConnectFileStubIsFetched: a file shared over Slack Connect
// comes as a stub (file_access check_file_info, only its id). Before, it
// was dropped: the model got "summarize this" without the file (and a
// file shared with no text was never answered). Now the message comes
// with the file, and Fetch asks files.info for its URL.
func TestSlackConnectFileStubIsFetched(t *testing.T) {
	r := newRig(t, setup{})
	url := r.srv.AddFile([]byte("quarterly numbers"))
	r.srv.Deliver(r.srv.DMFile("alice", "summarize this", slacktest.File{URL: url, Name: "q3.csv", MIME: "text/csv", Size: 17, Stub: true}))
	r.srv.WaitPosts(t, 1, wait)
	r.agent.mu.Lock()
	fs := r.agent.turns[0].In.Files
	r.agent.mu.Unlock()
	if len(fs) != 1 {
		t.Fatalf("files = %+v; want the shared file", fs)
	}
	var got bytes.Buffer
	if err := r.bot.Fetch(context.Background(), fs[0], &got, 1<<20); err != nil || got.String() != "quarterly numbers" {
		t.Fatalf("Fetch = %q, %v; want the file through files.info", got.String(), err)
	}
	if err := r.bot.Fetch(context.Background(), fs[0], &got, 5); !errors.Is(err, core.ErrTooLarge) {
		t.Fatalf("Fetch within 5 bytes = %v; want ErrTooLarge from files.info's size", err)
	}
}
