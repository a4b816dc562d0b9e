package main

import (
	"fmt"
	"strings"

	"github.com/opentalon/opentalon/channels/console"
	"github.com/opentalon/opentalon/channels/discord"
	"github.com/opentalon/opentalon/channels/slack"
	"github.com/opentalon/opentalon/channels/telegram"
	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
)

// channelBuild builds one platform's channel from the config; it touches
// no network (the gateway runs it).
type channelBuild func(a *App) (core.Channel, error)

// channelBuilds is the one list of the channels this binary has, by the
// name of their block under channels (config.Channels.Sections). Adding a
// platform is its package, its config block (type, field, name,
// Sections entry, defaults, checks) and one entry here; see
// docs/architecture.md.
func channelBuilds() map[string]channelBuild {
	return map[string]channelBuild{
		config.ChannelConsole:  buildConsole,
		config.ChannelTelegram: buildTelegram,
		config.ChannelSlack:    buildSlack,
		config.ChannelDiscord:  buildDiscord,
	}
}

func buildConsole(a *App) (core.Channel, error) {
	return console.New(console.Options{
		In:          a.opts.Stdin,
		Out:         a.opts.Stdout,
		Thread:      consoleReplica(a.cfg),
		OnEOF:       func() { close(a.eof) },
		Now:         a.opts.Now,
		Interactive: a.opts.Interactive,
		// Stdin alone decides whether a long line was cut: the terminal
		// cuts it whatever stdout is.
		TerminalIn: isTerminal(a.opts.Stdin),
		// Answers are escaped for a terminal only: a pipe gets them as
		// they are.
		TerminalOut: isTerminal(a.opts.Stdout),
	}), nil
}

func buildTelegram(a *App) (core.Channel, error) {
	o := telegram.Options{Config: a.cfg.Channels.Telegram, Logger: a.log, Now: a.opts.Now, Hold: a.telegramHold()}
	if a.opts.Telegram != nil {
		a.opts.Telegram(&o)
	}
	return telegram.New(o)
}

func buildSlack(a *App) (core.Channel, error) {
	return slack.New(slack.Options{Config: a.cfg.Channels.Slack, Logger: a.log, Now: a.opts.Now, HoldSlot: a.slackHoldSlot()})
}

func buildDiscord(a *App) (core.Channel, error) {
	return discord.New(discord.Options{Config: a.cfg.Channels.Discord, Logger: a.log, Now: a.opts.Now, HoldShard: a.discordHoldShard()})
}

// enabledChannels lists the names of the enabled channel blocks in the
// config's order.
func enabledChannels(cfg *config.Config) []string {
	var out []string
	for _, sec := range cfg.Channels.Sections() {
		if sec.Enabled {
			out = append(out, sec.Name)
		}
	}
	return out
}

// addChannels builds every enabled channel and hands it to the gateway;
// Close closes them.
func (a *App) addChannels() error {
	builds := channelBuilds()
	names := enabledChannels(a.cfg)
	if len(names) == 0 {
		var all []string
		for _, sec := range a.cfg.Channels.Sections() {
			all = append(all, "channels."+sec.Name+".enabled")
		}
		return core.Errorf(core.KindInvalid, "no channel is enabled: set one of %s to true", strings.Join(all, ", "))
	}
	warnAccess(a.cfg, a.log)
	for _, name := range names {
		build, ok := builds[name]
		if !ok {
			return core.Errorf(core.KindInvalid, "the %s channel is not built in this version; set channels.%s.enabled: false", name, name)
		}
		ch, err := build(a)
		if err != nil {
			return fmt.Errorf("channels.%s: %w", name, err)
		}
		a.gateway.AddChannel(ch)
		a.closers = append(a.closers, ch.Close)
	}
	return nil
}

// consoleOnly says the console is the only enabled channel: then the end
// of its input, once every message is answered, ends the run.
func consoleOnly(cfg *config.Config) bool {
	names := enabledChannels(cfg)
	return len(names) == 1 && names[0] == config.ChannelConsole
}

// channelModels returns the per-channel and per-chat models of the
// enabled channels (channels.<x>.model and channels.<x>.models), the same
// ones config.ModelRefs lists.
func channelModels(cfg *config.Config) (perChannel map[string]string, perChat map[string]map[string]string) {
	perChannel, perChat = map[string]string{}, map[string]map[string]string{}
	for _, sec := range cfg.Channels.Sections() {
		if !sec.Enabled {
			continue
		}
		if sec.Model != "" {
			perChannel[sec.Name] = sec.Model
		}
		if len(sec.Models) > 0 {
			perChat[sec.Name] = sec.Models
		}
	}
	return perChannel, perChat
}
