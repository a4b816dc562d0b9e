package main

import (
	"log/slog"
	"time"

	"github.com/opentalon/opentalon/channels/telegram"
	"github.com/opentalon/opentalon/config"
)

// newTelegramChannel builds the Telegram channel from its config section
// (no network until the gateway runs it). The lead's addTelegram adds the
// result with gateway.AddChannel.
func newTelegramChannel(cfg config.Telegram, log *slog.Logger, now func() time.Time) (*telegram.Bot, error) {
	return telegram.New(telegram.Options{Config: cfg, Logger: log, Now: now})
}
