package config

import (
	"strings"
	"testing"
	"time"
)

// The schedules block exactly as the issue writes it, with the channels
// it names enabled.
const issueSchedules = `channels:
  slack: { enabled: true, bot_token: xoxb-1, app_token: xapp-1 }
  telegram: { enabled: true, token: "1:t" }
schedules:
  - cron: "0 9 * * 1-5"
    prompt: "Summarize yesterday's open incidents in three bullet points."
    channel: slack
    chat: C0123456
  - interval: 6h
    prompt: "Any new releases of the tools we use?"
    channel: telegram
    chat: "-1001234567890"
    timezone: Europe/Berlin
`

func TestSchedulesLoad(t *testing.T) {
	cfg, err := Load(writeConfig(t, minimal+issueSchedules+`timezone: Europe/Berlin
notifications:
  sinks:
    - { type: webhook, url: "https://ops.example.com/h", secret: s3cret, events: [channel_down, budget_warning] }
    - { type: chat, channel: telegram, chat: "42" }
`), noEnv())
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Schedules
	if len(s) != 2 || s[0].Cron != "0 9 * * 1-5" || s[0].Chat != "C0123456" || s[1].Interval.D() != 6*time.Hour || s[1].Chat != "-1001234567890" || s[1].Timezone != "Europe/Berlin" {
		t.Fatalf("schedules = %+v", s)
	}
	n := cfg.Notifications
	if n.Window.D() != 10*time.Minute || n.MaxPerWindow != 5 || n.ChannelDownAfter.D() != time.Minute || len(n.Sinks) != 2 || n.Sinks[0].Secret.Value() != "s3cret" {
		t.Fatalf("notifications = %+v", n)
	}
	p := cfg.Plugins
	if p.Tools.Hooks.Timeout.D() != 2*time.Second || p.Tools.HTTP.MaxBodyBytes != 1<<20 || p.Tools.HTTP.Timeout.D() != 10*time.Second || p.Auth.CacheTTL.D() != 5*time.Minute {
		t.Fatalf("plugin defaults = %+v", p)
	}
}

func TestExtensionProblems(t *testing.T) {
	base := `models:
  providers:
    fake: { api: openai-completions, base_url: "http://127.0.0.1:9/v1" }
    mine: { api: plugin }
  catalog:
    fake/small: { alias: small, weight: 90 }
routing:
  primary: fake/small
`
	_, err := Load(writeConfig(t, base+`channels:
  slack: { enabled: true, bot_token: xoxb-1, app_token: xapp-1 }
timezone: Mars/Olympus
schedules:
  - { cron: "0 9 * *", prompt: p, channel: slack, chat: C1 }
  - { interval: 1h, cron: "* * * * *", prompt: p, channel: slack, chat: C1 }
  - { prompt: p, channel: slack, chat: C1 }
  - { interval: 1h, channel: slack, chat: C1 }
  - { interval: 1h, prompt: p, plugin: calc, action: evaluate, channel: slack, chat: C1 }
  - { interval: 1h, plugin: calc, channel: slack, chat: C1 }
  - { interval: 1h, prompt: p, channel: telegram, chat: C1 }
  - { interval: 1h, prompt: p, channel: slak, chat: C1 }
  - { interval: 1h, prompt: p, channel: slack }
  - { cron: "0 9 * * *", prompt: p, channel: slack, chat: C1, missed: twice, timezone: Nowhere/Land, model: nope }
notifications:
  window: 0
  sinks:
    - { type: webhok }
    - { type: webhook }
    - { type: chat, channel: discord, chat: "1" }
    - { type: plugin, events: [chanel_down] }
plugins:
  tools:
    hooks: { timeout: 0 }
    http: { max_body_bytes: 0 }
  auth: { plugin: "a b", channels: [slak] }
`), noEnv())
	ps := problemsOf(t, err)
	got := map[string]bool{}
	for _, p := range ps {
		got[p.Path] = true
	}
	for _, want := range []string{
		"timezone", "schedules[0].cron", "schedules[1]", "schedules[2]", "schedules[3]", "schedules[4]", "schedules[5].action",
		"schedules[6].channel", "schedules[7].channel", "schedules[8].chat", "schedules[9].missed", "schedules[9].timezone", "schedules[9].model",
		"notifications.window", "notifications.sinks[0].type", "notifications.sinks[1].url", "notifications.sinks[2].channel",
		"notifications.sinks[3].plugin", "notifications.sinks[3].events[0]", "plugins.tools.hooks.timeout",
		"plugins.tools.http.max_body_bytes", "plugins.auth.plugin", "plugins.auth.channels[0]", "models.providers.mine.plugin", "plugins.tools",
	} {
		if !got[want] {
			t.Errorf("no problem at %s", want)
		}
	}
	mustContain(t, err.Error(), `channel "telegram" is not enabled; enable channels.telegram`, `did you mean "slack"`, `did you mean "webhook"`, `did you mean "channel_down"`, "five fields")
}

// Issue 25 (lower): a webhook sink's URL may carry its token in the path
// (Slack's and Discord's incoming webhooks): it prints, logs and shows in
// errors as its scheme and host only.
func TestWebhookURLIsRedacted(t *testing.T) {
	for raw, want := range map[string]string{
		"https://hooks.slack.com/services/T1/B2/SECRET": "https://hooks.slack.com/…",
		"https://discord.com/api/webhooks/1/SECRET":     "https://discord.com/…",
		"https://ops.example.com/":                      "https://ops.example.com",
		"https://ops.example.com?token=SECRET":          "https://ops.example.com/…",
		"https://user:SECRET@ops.example.com":           "https://ops.example.com",
		"htps//hooks.slack.com/services/T1/B2/SECRET":   "[a URL, redacted]",
		"": "",
	} {
		if got := CredentialURL(raw).String(); got != want {
			t.Errorf("CredentialURL(%q) = %q; want %q", raw, got, want)
		}
	}
	_, err := Load(writeConfig(t, minimal+`
notifications:
  sinks:
    - { type: webhook, url: "ftp://hooks.slack.com/services/T1/B2/SECRET" }
`), noEnv())
	if err == nil || strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), "notifications.sinks[0].url") {
		t.Fatalf("err = %v; want the bad URL named without its token", err)
	}
}

// A cron that names a day no month has (February 30th, April 31st) would
// load and never fire; a chat-made schedule like it is refused with
// "never fires", and so is a config one, at its key.
func TestScheduleThatNeverFires(t *testing.T) {
	base := `models:
  providers:
    fake: { api: openai-completions, base_url: "http://127.0.0.1:9/v1" }
  catalog:
    fake/small: { alias: small, weight: 90 }
routing:
  primary: fake/small
channels:
  slack: { enabled: true, bot_token: xoxb-1, app_token: xapp-1 }
schedules:
`
	for _, tt := range []struct {
		cron  string
		fires bool
	}{
		{"0 9 30 2 *", false},
		{"0 9 31 4,6,9,11 *", false},
		{"0 9 29 2 *", true},   // leap years
		{"0 9 31 * *", true},   // the months that have one
		{"0 9 30 2 mon", true}, // day of month or day of week
		{"0 9 31 2,3 *", true}, // March has one
	} {
		_, err := Load(writeConfig(t, base+`  - { cron: "`+tt.cron+`", prompt: p, channel: slack, chat: C1 }
`), noEnv())
		if tt.fires {
			if err != nil {
				t.Errorf("%s: %v", tt.cron, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: loads; want a problem at schedules[0].cron", tt.cron)
			continue
		}
		got := false
		for _, p := range problemsOf(t, err) {
			got = got || p.Path == "schedules[0].cron"
		}
		if !got || !strings.Contains(err.Error(), "never fires") {
			t.Errorf("%s: %v; want a problem at schedules[0].cron saying it never fires", tt.cron, err)
		}
	}
}

// A bad value in a flow mapping ("{ interval: -5m, chat: C1 }") is
// reported at its own key, not at the last key on its line.
func TestFlowMappingProblemAtItsKey(t *testing.T) {
	_, err := Load(writeConfig(t, `models:
  providers:
    fake: { api: openai-completions, base_url: "http://127.0.0.1:9/v1" }
  catalog:
    fake/small: { alias: small, weight: 90 }
routing:
  primary: fake/small
channels:
  slack: { enabled: true, bot_token: xoxb-1, app_token: xapp-1 }
schedules:
  - { interval: -5m, prompt: p, channel: slack, chat: C1 }
  - { interval: 1h, prompt: p, channel: slack, chat: C1, missed: [x] }
`), noEnv())
	paths := map[string]bool{}
	for _, p := range problemsOf(t, err) {
		paths[p.Path] = true
	}
	for _, want := range []string{"schedules[0].interval", "schedules[1].missed"} {
		if !paths[want] {
			t.Errorf("no problem at %s: %v", want, err)
		}
	}
	// The bad interval is its one problem: not also "needs interval".
	for _, wrong := range []string{"schedules[0].chat", "schedules[1].chat", "schedules[0]"} {
		if paths[wrong] {
			t.Errorf("a problem is reported at %s, the last key on its line: %v", wrong, err)
		}
	}
}
