package slack_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

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
