package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// slackManifest is what TestSlackManifestListsEveryCommand reads of
// examples/slack-manifest.yaml.
type slackManifest struct {
	Features struct {
		AppHome struct {
			MessagesTab bool `yaml:"messages_tab_enabled"`
		} `yaml:"app_home"`
		SlashCommands []struct {
			Command     string `yaml:"command"`
			Description string `yaml:"description"`
			UsageHint   string `yaml:"usage_hint"`
		} `yaml:"slash_commands"`
	} `yaml:"features"`
	OAuth struct {
		Scopes struct {
			Bot []string `yaml:"bot"`
		} `yaml:"scopes"`
	} `yaml:"oauth_config"`
	Settings struct {
		Events struct {
			Bot []string `yaml:"bot_events"`
		} `yaml:"event_subscriptions"`
		SocketMode bool `yaml:"socket_mode_enabled"`
	} `yaml:"settings"`
}

// TestSlackManifestListsEveryCommand: the Slack app manifest a new
// operator pastes into Slack creates a slash command for each in-chat
// command the gateway answers (with its /help description), and asks for
// the scopes and events the README's Slack set-up names, files included
// (the channel downloads what users share and uploads what tools make).
func TestSlackManifestListsEveryCommand(t *testing.T) {
	raw, err := os.ReadFile("../../examples/slack-manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m slackManifest
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatalf("examples/slack-manifest.yaml: %v", err)
	}
	llm := providertest.NewOpenAI(t)
	h := startApp(t, loadConfigFile(t, writeConfig(t, testConfig(t.TempDir(), llm.BaseURL(), ""))))
	want := map[string]string{}
	for _, c := range h.app.gateway.Commands() {
		want["/"+c.Name] = c.Description
	}
	got := map[string]string{}
	for _, c := range m.Features.SlashCommands {
		got[c.Command] = c.Description
		if len(c.Description) > 100 {
			t.Errorf("%s: description of %d characters; Slack takes 100", c.Command, len(c.Description))
		}
	}
	for name, desc := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("the manifest has no slash command %s (%q)", name, desc)
		} else if g != desc {
			t.Errorf("%s: the manifest says %q, /help %q", name, g, desc)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("the manifest's slash command %s is not a command of the gateway", name)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	// The README's Slack paragraph names the scopes and events in
	// backquotes after "scopes" and "bot events".
	section := string(readme)
	i := strings.Index(section, "In the Slack app's settings")
	if i < 0 {
		t.Fatal("README has no Slack set-up paragraph")
	}
	section, _, _ = strings.Cut(section[i:], "\n")
	scopes, events := regexp.MustCompile("`([a-z_]+:[a-z_]+)`").FindAllStringSubmatch(section, -1), regexp.MustCompile("`((?:app_mention|message\\.[a-z]+|reaction_[a-z]+))`").FindAllStringSubmatch(section, -1)
	for _, s := range append(scopes, []string{"", "files:read"}, []string{"", "files:write"}) {
		if !slices.Contains(m.OAuth.Scopes.Bot, s[1]) {
			t.Errorf("the manifest lacks the bot scope %s", s[1])
		}
	}
	for _, e := range events {
		if !slices.Contains(m.Settings.Events.Bot, e[1]) {
			t.Errorf("the manifest lacks the bot event %s", e[1])
		}
	}
	if len(scopes) < 5 || len(events) < 5 || !m.Settings.SocketMode || !m.Features.AppHome.MessagesTab {
		t.Errorf("README scopes %d, events %d; manifest socket mode %v, messages tab %v", len(scopes), len(events), m.Settings.SocketMode, m.Features.AppHome.MessagesTab)
	}
}
