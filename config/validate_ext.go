package config

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/schedule"
)

// pluginNameRE is a plugin's declared name (as plugins.ValidName).
var pluginNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`) })

func validPluginName(s string) bool {
	return pluginNameRE().MatchString(s) && !strings.Contains(s, "__")
}

// validateExtensions checks the blocks of the extension points, each by
// its own function: timezone and schedules, notifications, and the
// plugin extension blocks (plugins.tools.hooks, .http, plugins.auth,
// plugins.blobs, api: plugin providers).
func validateExtensions(c *Config, ps *problems) {
	chans := channelsOf(c)
	validateSchedules(c, ps, chans)
	validateNotifications(c, ps, chans)
	validatePluginBlocks(c, ps, chans)
}

// channelSet is the config's channel names and which are enabled, for
// the blocks that name a channel.
type channelSet struct {
	names   []string
	enabled map[string]bool
}

func channelsOf(c *Config) channelSet {
	cs := channelSet{enabled: map[string]bool{}}
	for _, sec := range c.Channels.Sections() {
		cs.names = append(cs.names, sec.Name)
		if sec.Enabled {
			cs.enabled[sec.Name] = true
		}
	}
	return cs
}

// check reports a channel at path that is missing, unknown or not
// enabled.
func (cs channelSet) check(ps *problems, path, ch string) {
	switch {
	case ch == "":
		ps.at(path, "missing; name the channel (%s)", strings.Join(cs.names, ", "))
	case !slices.Contains(cs.names, ch):
		ps.at(path, "unknown channel %q%s; use one of %s", ch, didYouMean(ch, cs.names), strings.Join(cs.names, ", "))
	case !cs.enabled[ch]:
		ps.at(path, "channel %q is not enabled; enable channels.%s or name another channel", ch, ch)
	}
}

// validateSchedules checks timezone and schedules: each one's timing,
// what it does, where its output goes, its zone and missed policy.
func validateSchedules(c *Config, ps *problems, chans channelSet) {
	if c.Timezone != "" {
		if _, err := time.LoadLocation(c.Timezone); err != nil {
			ps.at("timezone", "%q is not a known time zone: use an IANA name such as \"Europe/Berlin\" or \"UTC\" (\"\" = the machine's)", c.Timezone)
		}
	}
	for i, s := range c.Schedules {
		p := fmt.Sprintf("schedules[%d]", i)
		switch {
		case s.Interval > 0 && s.Cron != "":
			ps.at(p, "has both interval and cron; keep one")
		case s.Interval <= 0 && s.Cron == "" && ps.reported(p+".interval"):
			// A bad interval (negative, unreadable) is reported as such.
		case s.Interval <= 0 && s.Cron == "":
			ps.at(p, "needs interval (a duration such as \"6h\") or cron (five fields such as \"0 9 * * 1-5\")")
		case s.Cron != "":
			if cr, err := schedule.ParseCron(s.Cron); err != nil {
				ps.at(p+".cron", "%v", err)
			} else if cr.Next(time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC), time.UTC).IsZero() {
				// Only a day no month has (February 30th) misses five
				// years from any start, so a fixed one will do.
				ps.at(p+".cron", "%q never fires: no month has that day; fix the day of month or month", s.Cron)
			}
		}
		switch {
		case s.Prompt != "" && (s.Plugin != "" || s.Action != ""):
			ps.at(p, "has a prompt and a plugin action; keep one")
		case s.Prompt == "" && s.Plugin == "":
			ps.at(p, "needs a prompt (answered by the LLM) or plugin + action (whose output is posted)")
		case s.Plugin != "" && s.Action == "":
			ps.at(p+".action", "missing; plugin %s needs the action to run", s.Plugin)
		case s.Plugin == "" && s.Action != "":
			ps.at(p+".plugin", "missing; action %s needs the plugin it belongs to", s.Action)
		case s.Plugin != "" && !validPluginName(s.Plugin):
			ps.at(p+".plugin", "%q is not a plugin name (letters, digits, '-' and '_')", s.Plugin)
		}
		if len(s.Args) > 0 && s.Plugin == "" {
			ps.at(p+".args", "only a plugin action takes args")
		}
		chans.check(ps, p+".channel", s.Channel)
		if strings.TrimSpace(s.Chat) == "" {
			ps.at(p+".chat", "missing; the chat id the output goes to (a Slack channel id, a Telegram chat id, …)")
		}
		// A time zone is optional on every schedule (issue 16); an
		// interval, which counts from its start, has no use for it.
		if s.Timezone != "" {
			if _, err := time.LoadLocation(s.Timezone); err != nil {
				ps.at(p+".timezone", "%q is not a known time zone: use an IANA name such as \"Europe/Berlin\"", s.Timezone)
			}
		}
		if s.Missed != "" && s.Missed != MissedSkip && s.Missed != MissedOnce {
			ps.at(p+".missed", "unknown value %q; use skip (drop the firings that fell while the gateway was down) or once (run one of them)", s.Missed)
		}
		if s.Model != "" && s.Prompt == "" {
			ps.at(p+".model", "only a prompt is answered by a model")
		}
	}
}

// validateNotifications checks notifications: its window and limits,
// and each sink by its type.
func validateNotifications(c *Config, ps *problems, chans channelSet) {
	n := c.Notifications
	if n.Window <= 0 {
		ps.at("notifications.window", "must be a positive duration such as \"10m\"")
	}
	atLeast(ps, "notifications.max_per_window", n.MaxPerWindow, 1)
	if n.ChannelDownAfter <= 0 {
		ps.at("notifications.channel_down_after", "must be a positive duration such as \"1m\"")
	}
	sinkTypes := []string{SinkWebhook, SinkChat, SinkPlugin}
	for i, s := range n.Sinks {
		p := fmt.Sprintf("notifications.sinks[%d]", i)
		switch s.Type {
		case SinkWebhook:
			if s.URL == "" {
				ps.at(p+".url", "missing; a webhook sink needs the URL it POSTs to")
			} else {
				if u, err := url.Parse(string(s.URL)); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					ps.at(p+".url", "%s is not an http(s) URL such as \"https://hooks.example.com/opentalon\"", s.URL)
				}
			}
		case SinkChat:
			chans.check(ps, p+".channel", s.Channel)
			if strings.TrimSpace(s.Chat) == "" {
				ps.at(p+".chat", "missing; the chat id the events go to (your own DM with the bot, for example)")
			}
		case SinkPlugin:
			if !validPluginName(s.Plugin) {
				ps.at(p+".plugin", "missing or not a plugin name; a plugin sink names the plugin that serves Notify")
			}
		case "":
			ps.at(p+".type", "missing; use %s", strings.Join(sinkTypes, ", "))
		default:
			ps.at(p+".type", "unknown sink type %q%s; use %s", s.Type, didYouMean(s.Type, sinkTypes), strings.Join(sinkTypes, ", "))
		}
		for j, e := range s.Events {
			if !slices.Contains(core.EventKinds, e) {
				ps.at(fmt.Sprintf("%s.events[%d]", p, j), "unknown event %q%s; use %s", e, didYouMean(e, core.EventKinds), strings.Join(core.EventKinds, ", "))
			}
		}
	}
}

// validatePluginBlocks checks the plugin extension blocks: the hook and
// HTTP route limits, plugins.auth, plugins.blobs, the plugin names of
// api: plugin providers, and that a plugin named anywhere is started.
func validatePluginBlocks(c *Config, ps *problems, chans channelSet) {
	t := c.Plugins.Tools
	if t.Hooks.Timeout <= 0 {
		ps.at("plugins.tools.hooks.timeout", "must be a positive duration such as \"2s\"")
	}
	if t.HTTP.MaxBodyBytes < 1 {
		ps.at("plugins.tools.http.max_body_bytes", "must be at least 1 (default 1048576)")
	}
	if t.HTTP.Timeout <= 0 {
		ps.at("plugins.tools.http.timeout", "must be a positive duration such as \"10s\"")
	}
	a := c.Plugins.Auth
	if a.Plugin != "" && !validPluginName(a.Plugin) {
		ps.at("plugins.auth.plugin", "%q is not a plugin name (letters, digits, '-' and '_')", a.Plugin)
	}
	if a.CacheTTL <= 0 {
		ps.at("plugins.auth.cache_ttl", "must be a positive duration such as \"5m\"")
	}
	if a.Timeout <= 0 {
		ps.at("plugins.auth.timeout", "must be a positive duration such as \"2s\"")
	}
	for i, ch := range a.Channels {
		if !slices.Contains(chans.names, ch) {
			ps.at(fmt.Sprintf("plugins.auth.channels[%d]", i), "unknown channel %q%s; use one of %s", ch, didYouMean(ch, chans.names), strings.Join(chans.names, ", "))
		}
	}
	if b := c.Plugins.Blobs.Plugin; b != "" && !validPluginName(b) {
		ps.at("plugins.blobs.plugin", "%q is not a plugin name (letters, digits, '-' and '_')", b)
	}
	for _, id := range c.providerIDs() {
		if p := c.Models.Providers[id]; p.API == APIPlugin && p.Plugin != "" && !validPluginName(p.Plugin) {
			ps.at("models.providers."+id+".plugin", "%q is not a plugin name (letters, digits, '-' and '_')", p.Plugin)
		}
	}
	if hasPluginUse(c) && c.Plugins.Tools.PluginDir == "" && len(c.Plugins.Tools.Plugins) == 0 {
		ps.at("plugins.tools", "a plugin is named (an api: plugin provider, plugins.auth, plugins.blobs, a schedule or a sink) but no plugin is started: set plugins.tools.plugin_dir or plugins.tools.plugins")
	}
}

// hasPluginUse reports whether the config names a plugin anywhere.
func hasPluginUse(c *Config) bool {
	if c.Plugins.Auth.Plugin != "" || c.Plugins.Blobs.Plugin != "" {
		return true
	}
	for _, p := range c.Models.Providers {
		if p.API == APIPlugin {
			return true
		}
	}
	for _, s := range c.Schedules {
		if s.Plugin != "" {
			return true
		}
	}
	for _, s := range c.Notifications.Sinks {
		if s.Type == SinkPlugin {
			return true
		}
	}
	return false
}
