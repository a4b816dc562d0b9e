package config

import (
	"reflect"
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
			Trigger: TriggerAll, AckReaction: "",
			Reactions: Reactions{Positive: []string{"👍"}, Negative: []string{"👎", "😡"}},
			Model:     "big", Models: map[string]string{"-100200300": "fake/big", "42": "small"},
		},
	}
	if !reflect.DeepEqual(tg, want) {
		t.Errorf("telegram =\n%#v\nwant\n%#v", tg, want)
	}
}
