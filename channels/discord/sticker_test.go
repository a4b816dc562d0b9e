package discord_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/channels/discord/discordtest"
	"github.com/opentalon/opentalon/core"
)

// TestStickersAreFiles: a sticker is what the user sent, not nothing.
// Before, a DM with only a sticker was dropped as empty (the user heard
// nothing) and a sticker beside text never reached the model. A PNG or
// GIF sticker is an image fetched from Discord's media CDN; a Lottie one
// a file of its own type, which the user is told cannot be read.
func TestStickersAreFiles(t *testing.T) {
	t.Parallel()
	r := start(t, nil, nil)
	dm := r.srv.DM(r.alice)
	png := []byte("\x89PNG\r\n\x1a\nsticker")
	id := r.srv.AddSticker(png)
	r.srv.Message(t, discordtest.Msg{Channel: dm, Author: r.alice, Content: "what is this?",
		Stickers: []discordtest.Sticker{{ID: id, Name: "wave", Format: 1}}})
	r.waitSent(t, 1)
	fs := r.agent.seen()[0].In.Files
	if len(fs) != 1 || fs[0].Kind != core.MediaImage || fs[0].MIME != "image/png" {
		t.Fatalf("files = %+v; want the sticker as a PNG image", fs)
	}
	var got bytes.Buffer
	if err := r.bot.Fetch(context.Background(), fs[0], &got, 1<<20); err != nil || !bytes.Equal(got.Bytes(), png) {
		t.Fatalf("Fetch = %q, %v; want the sticker's image", got.String(), err)
	}

	// A sticker alone is answered (this gateway reads no files: it says so).
	r.srv.Message(t, discordtest.Msg{Channel: dm, Author: r.alice, Stickers: []discordtest.Sticker{{ID: "77", Name: "dance", Format: 3}}})
	if s := r.waitSent(t, 2)[1]; !strings.Contains(s.Content, "I cannot read files here") {
		t.Fatalf("reply %q; want the sticker answered", s.Content)
	}
}
