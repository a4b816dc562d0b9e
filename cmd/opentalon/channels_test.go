package main

import (
	"context"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/config"
)

func TestChannelWiringFromOneList(t *testing.T) {
	t.Parallel()
	on := func(edit func(*config.Channels)) *config.Config {
		cfg := config.Default()
		edit(&cfg.Channels)
		return cfg
	}
	tests := []struct {
		name        string
		cfg         *config.Config
		consoleOnly bool
		perChannel  map[string]string
	}{
		{"default", config.Default(), true, map[string]string{}},
		{"console and telegram", on(func(c *config.Channels) { c.Telegram.Enabled = true; c.Telegram.Model = "a/b" }), false, map[string]string{"telegram": "a/b"}},
		{"console and slack", on(func(c *config.Channels) { c.Slack.Enabled = true }), false, map[string]string{}},
		{"console and discord", on(func(c *config.Channels) { c.Discord.Enabled = true; c.Discord.Model = "d/m" }), false, map[string]string{"discord": "d/m"}},
		{"telegram only", on(func(c *config.Channels) { c.Console.Enabled = false; c.Telegram.Enabled = true }), false, map[string]string{}},
		{"disabled channel's model", on(func(c *config.Channels) { c.Telegram.Model = "x/y"; c.Slack.Models = map[string]string{"C1": "x/z"} }), true, map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := consoleOnly(tt.cfg); got != tt.consoleOnly {
				t.Errorf("consoleOnly = %v, want %v", got, tt.consoleOnly)
			}
			perChannel, perChat := channelModels(tt.cfg)
			if !reflect.DeepEqual(perChannel, tt.perChannel) {
				t.Errorf("per-channel models = %v, want %v", perChannel, tt.perChannel)
			}
			// The router gets exactly the references the config validated.
			refs := map[string]bool{}
			for _, r := range tt.cfg.ModelRefs() {
				refs[r.Ref] = true
			}
			for _, m := range perChannel {
				if !refs[m] {
					t.Errorf("per-channel model %q is not among the config's model references", m)
				}
			}
			for _, chats := range perChat {
				for _, m := range chats {
					if !refs[m] {
						t.Errorf("per-chat model %q is not among the config's model references", m)
					}
				}
			}
		})
	}
	// Every channel the config knows has a build or is reported unbuilt.
	builds := channelBuilds()
	for _, sec := range config.Default().Channels.Sections() {
		if _, ok := builds[sec.Name]; !ok {
			t.Errorf("channel %s has no build in channelBuilds", sec.Name)
		}
	}
}

// TestHTTPServerLimits (issue 9, finding 13): the local API server
// bounds reads, writes, idle keep-alive connections and bodies.
func TestHTTPServerLimits(t *testing.T) {
	t.Parallel()
	cfg := parseConfig(t, strings.Replace(testConfig(t.TempDir(), "http://127.0.0.1:1", ""), `listen: ""`, `listen: "127.0.0.1:0"`, 1))
	seedDB(t, cfg.State.DataDir)
	app, err := BuildApp(context.Background(), cfg, AppOptions{Stdin: strings.NewReader(""), Stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	s := app.server
	if s.ReadTimeout <= 0 || s.WriteTimeout <= 0 || s.IdleTimeout <= 0 || s.ReadHeaderTimeout <= 0 || s.MaxHeaderBytes <= 0 {
		t.Fatalf("server limits: read %v write %v idle %v header %v/%d", s.ReadTimeout, s.WriteTimeout, s.IdleTimeout, s.ReadHeaderTimeout, s.MaxHeaderBytes)
	}
}
