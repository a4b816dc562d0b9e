package telegram

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/opentalon/opentalon/core"
)

// TestFetchOverTelegramsLimitSaysTelegram: a file Telegram's getFile
// refuses as too big (over 20 MB for bots) is a core.PlatformLimit of
// 20 MB, whatever media.max_bytes allows, so the user hears Telegram's
// limit; nothing is downloaded.
func TestFetchOverTelegramsLimitSaysTelegram(t *testing.T) {
	h := newHarness(t, nil)
	id := h.srv.AddFile(bytes.Repeat([]byte{'x'}, 20<<20+1))
	err := h.bot.Fetch(context.Background(), core.InboundFile{ID: id, Name: "big.bin"}, io.Discard, 50<<20)
	var pl *core.PlatformLimit
	if !errors.As(err, &pl) || pl.Platform != "Telegram" || pl.Max != 20<<20 || !errors.Is(err, core.ErrTooLarge) {
		t.Fatalf("Fetch = %v; want Telegram's 20 MB limit (a core.PlatformLimit, ErrTooLarge)", err)
	}
	if n := h.srv.Served(id); n != 0 {
		t.Fatalf("%d bytes downloaded; want none", n)
	}
}
