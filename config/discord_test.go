package config

import (
	"strings"
	"testing"
)

func TestDiscordSection(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		wantErr []string
		check   func(t *testing.T, c *Config)
	}{
		{
			name: "defaults",
			body: "channels:\n  discord: { enabled: true, token: t }\n",
			check: func(t *testing.T, c *Config) {
				d := c.Channels.Discord
				if n, auto, err := d.Shards.Count(); n != 1 || auto || err != nil {
					t.Errorf("default shards = %d %v %v, want 1", n, auto, err)
				}
				if d.APIURL != "https://discord.com" || !d.RegisterCommands || d.Trigger != TriggerMention || d.AckReaction != "👀" || len(d.AllowGuilds) != 0 {
					t.Errorf("discord defaults = %+v", d)
				}
				if len(d.Reactions.Positive) != 4 || d.Reactions.Negative[0] != "👎" {
					t.Errorf("reactions = %+v", d.Reactions)
				}
			},
		},
		{
			name: "every key, and an older api_url",
			body: "channels:\n  discord:\n    enabled: true\n    token: t\n    api_url: https://discord.com/api/v10\n    allow_users: [\"42\", alice]\n    allow_chats: [\"1001\"]\n    allow_guilds: [\"900\"]\n    trigger: all\n    register_commands: false\n    ack_reaction: \"\"\n",
			check: func(t *testing.T, c *Config) {
				d := c.Channels.Discord
				if d.APIURL != "https://discord.com/api/v10" || d.RegisterCommands || d.AllowGuilds[0] != "900" || d.AllowUsers[1] != "alice" || d.AllowChats[0] != "1001" || d.Trigger != TriggerAll || d.AckReaction != "" {
					t.Errorf("discord = %+v", d)
				}
			},
		},
		{
			name:    "no token",
			body:    "channels:\n  discord: { enabled: true }\n",
			wantErr: []string{"channels.discord.token: missing; an enabled Discord channel needs the bot token"},
		},
		{
			name:    "ids that are not ids",
			body:    "channels:\n  discord: { enabled: true, token: t, api_url: \"discord.com\", allow_guilds: [\"My Server\"], allow_chats: [\"#general\"] }\n",
			wantErr: []string{`channels.discord.api_url: "discord.com" is not an http(s) URL`, `channels.discord.allow_guilds[0]: "My Server" is not a Discord guild (server) id`, `channels.discord.allow_chats[0]: "#general" is not a Discord channel id`},
		},
		{
			name:    "an empty guild entry",
			body:    "channels:\n  discord: { enabled: true, token: t, allow_guilds: [\"\"] }\n",
			wantErr: []string{"channels.discord.allow_guilds[0]: is empty"},
		},
		{
			name: "shards: a number or auto",
			body: "channels:\n  discord: { enabled: true, token: t, shards: 4 }\n",
			check: func(t *testing.T, c *Config) {
				if n, auto, err := c.Channels.Discord.Shards.Count(); n != 4 || auto || err != nil {
					t.Errorf("shards: 4 = %d %v %v", n, auto, err)
				}
			},
		},
		{
			name: "shards: auto",
			body: "channels:\n  discord: { enabled: true, token: t, shards: auto }\n",
			check: func(t *testing.T, c *Config) {
				if n, auto, err := c.Channels.Discord.Shards.Count(); n != 0 || !auto || err != nil {
					t.Errorf("shards: auto = %d %v %v", n, auto, err)
				}
			},
		},
		{
			name:    "shards: zero",
			body:    "channels:\n  discord: { enabled: true, token: t, shards: 0 }\n",
			wantErr: []string{"channels.discord.shards: 0 shards cannot connect; use a whole number of gateway shards, 1 or more (e.g. shards: 2), or shards: auto"},
		},
		{
			name:    "shards: negative",
			body:    "channels:\n  discord: { enabled: true, token: t, shards: -2 }\n",
			wantErr: []string{"channels.discord.shards: -2 shards cannot connect"},
		},
		{
			name:    "shards: neither a number nor auto",
			body:    "channels:\n  discord: { enabled: true, token: t, shards: many }\n",
			wantErr: []string{`channels.discord.shards: "many" is neither a number nor auto; use a whole number`},
		},
		{
			name:    "shards: a fraction",
			body:    "channels:\n  discord: { enabled: true, token: t, shards: 1.5 }\n",
			wantErr: []string{`channels.discord.shards: "1.5" is neither a number nor auto`},
		},
		{
			name: "disabled: nothing is checked",
			body: "channels:\n  discord: { enabled: false, allow_guilds: [\"x\"] }\n",
			check: func(t *testing.T, c *Config) {
				if c.Channels.Discord.Enabled {
					t.Error("enabled")
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(writeConfig(t, minimal+tt.body), MapEnv(nil))
			if len(tt.wantErr) > 0 {
				ps := problemsOf(t, err)
				if len(ps) != len(tt.wantErr) {
					t.Fatalf("problems = %v, want %d", err, len(tt.wantErr))
				}
				for i, w := range tt.wantErr {
					mustContain(t, ps[i].String(), w)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, cfg)
		})
	}
}

// config check prints channels.discord.shards as the count it means (1
// when unset), a number, or auto.
func TestDiscordShardsPrinted(t *testing.T) {
	for _, tt := range []struct{ set, want string }{
		{"", "shards: 1\n"},
		{", shards: 3", "shards: 3\n"},
		{", shards: \"2\"", "shards: 2\n"},
		{", shards: AUTO", "shards: auto\n"},
	} {
		c, err := Load(writeConfig(t, minimal+"channels:\n  discord: { enabled: true, token: t"+tt.set+" }\n"), noEnv())
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Redacted(); !strings.Contains(got, tt.want) {
			t.Errorf("shards%s prints as %q, want %q", tt.set, grepLine(got, "shards:"), tt.want)
		}
	}
}

// grepLine is the first line of s that contains sub, trimmed.
func grepLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
