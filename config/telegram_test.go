package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestTelegramDecoding(t *testing.T) {
	body := minimal + `channels:
  telegram:
    enabled: true
    token: "${TELEGRAM_BOT_TOKEN}"
    mode: webhook
    webhook: { listen: "127.0.0.1:8443", url: "https://bot.example/tg", secret: s }
    allow_users: [12345, "@bob"]
    allow_chats: [-100200300]
    group_trigger: all
    ack_reaction: ""
    reactions: { positive: ["👍"], negative: ["👎", "😡"] }
    model: big
    models: { -100200300: fake/big, 42: small }
`
	cfg, err := Load(writeConfig(t, body), MapEnv(map[string]string{"TELEGRAM_BOT_TOKEN": "123:abc"}))
	if err != nil {
		t.Fatal(err)
	}
	tg := cfg.Channels.Telegram
	want := Telegram{
		Enabled: true, Token: "123:abc", APIURL: "https://api.telegram.org", Mode: ModeWebhook,
		Webhook:      TelegramWebhook{Listen: "127.0.0.1:8443", URL: "https://bot.example/tg", Secret: "s"},
		GroupTrigger: TriggerAll,
		ChannelCommon: ChannelCommon{
			AllowUsers: []string{"12345", "@bob"}, AllowChats: []string{"-100200300"},
			Trigger: TriggerAll, AckReaction: "", Access: AccessOpen, Streaming: StreamingEdit,
			Reactions: Reactions{Positive: []string{"👍"}, Negative: []string{"👎", "😡"}},
			Model:     "big", Models: map[string]string{"-100200300": "fake/big", "42": "small"},
		},
	}
	if !reflect.DeepEqual(tg, want) {
		t.Errorf("telegram =\n%#v\nwant\n%#v", tg, want)
	}
}

func TestCommonChannelBlock(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		check   func(t *testing.T, c *Config)
		wantErr []string
	}{
		{
			name: "trigger is the common key",
			body: "channels:\n  telegram: { enabled: true, token: t, trigger: all }\n",
			check: func(t *testing.T, c *Config) {
				if c.Channels.Telegram.Trigger != TriggerAll {
					t.Errorf("trigger = %q", c.Channels.Telegram.Trigger)
				}
			},
		},
		{
			name: "group_trigger keeps working",
			body: "channels:\n  telegram: { enabled: true, token: t, group_trigger: all }\n",
			check: func(t *testing.T, c *Config) {
				if c.Channels.Telegram.Trigger != TriggerAll {
					t.Errorf("trigger = %q, want all from group_trigger", c.Channels.Telegram.Trigger)
				}
			},
		},
		{
			name:    "group_trigger and trigger disagree",
			body:    "channels:\n  telegram: { enabled: true, token: t, group_trigger: all, trigger: mention }\n",
			wantErr: []string{`channels.telegram.group_trigger: "all" conflicts with channels.telegram.trigger "mention"`},
		},
		{
			name:    "a bad trigger names the key",
			body:    "channels:\n  telegram: { enabled: true, token: t, trigger: mentoin }\n",
			wantErr: []string{`channels.telegram.trigger: unknown value "mentoin" (did you mean "mention"?)`},
		},
		{
			name:    "an unknown key suggests a common one",
			body:    "channels:\n  telegram: { enabled: true, token: t, allow_user: [1] }\n",
			wantErr: []string{`unknown key "allow_user" in channels.telegram (did you mean "allow_users"?)`},
		},
		{
			name: "slack and discord have the block too",
			body: "channels:\n  slack: { allow_users: [U1], reactions: { negative: [\"-1\"] }, model: fake/m }\n  discord: { allow_chats: [\"123\"], trigger: all }\n",
			check: func(t *testing.T, c *Config) {
				s, d := c.Channels.Slack, c.Channels.Discord
				if s.AllowUsers[0] != "U1" || s.Reactions.Negative[0] != "-1" || s.Model != "fake/m" || s.AckReaction != "eyes" || d.AllowChats[0] != "123" || d.Trigger != TriggerAll {
					t.Errorf("slack %+v discord %+v", s.ChannelCommon, d.ChannelCommon)
				}
				for _, r := range c.ModelRefs() {
					if strings.HasPrefix(r.Path, "channels.") {
						t.Errorf("a disabled channel's model is a reference: %v", r)
					}
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
