package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
)

// addTelegram is wired once the Telegram channel lands.
func (a *App) addTelegram(context.Context) error {
	return core.Errorf(core.KindInvalid, "channels.telegram: the Telegram channel is not in this build yet; set channels.telegram.enabled: false")
}

// mountPluginAPI is wired once the plugin LLM endpoint lands.
func (a *App) mountPluginAPI(*http.ServeMux) {}

// cmdRouting runs the routing subcommands once they land.
func cmdRouting(_ context.Context, cmd string, _ *globalFlags, _ []string, _ Stdio, _ config.Env, _ *slog.Logger) error {
	return fmt.Errorf("%s: not in this build yet", cmd)
}
