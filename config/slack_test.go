package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestSlackDecoding(t *testing.T) {
	body := minimal + `channels:
  slack:
    enabled: true
    mode: events
    bot_token: "${SLACK_BOT_TOKEN}"
    signing_secret: "${SLACK_SIGNING_SECRET}"
    events: { listen: "127.0.0.1:3999", path: /hooks/slack }
    api_url: http://127.0.0.1:9/api/
    reply_in_thread: always
    allow_users: [U111]
    allow_chats: [C222]
    ack_reaction: ""
    model: big
`
	cfg, err := Load(writeConfig(t, body), MapEnv(map[string]string{"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "shh"}))
	if err != nil {
		t.Fatal(err)
	}
	want := Slack{
		Enabled: true, Mode: SlackModeEvents, BotToken: "xoxb-1", SigningSecret: "shh",
		Events: SlackEvents{Listen: "127.0.0.1:3999", Path: "/hooks/slack"},
		APIURL: "http://127.0.0.1:9/api/", ReplyInThread: ReplyInThreadAlways,
		ChannelCommon: ChannelCommon{
			AllowUsers: []string{"U111"}, AllowChats: []string{"C222"}, Trigger: TriggerMention,
			Reactions: Reactions{Positive: []string{"+1", "heart", "tada", "fire"}, Negative: []string{"-1", "thumbsdown", "poop"}},
			Model:     "big", Access: AccessOpen, Streaming: StreamingEdit,
		},
	}
	if got := cfg.Channels.Slack; !reflect.DeepEqual(got, want) {
		t.Errorf("slack =\n%#v\nwant\n%#v", got, want)
	}
	// The defaults of every key the section leaves out.
	d := Default().Channels.Slack
	if d.Mode != SlackModeSocket || d.Events.Listen != "127.0.0.1:3000" || d.Events.Path != "/slack/events" || d.ReplyInThread != ReplyInThreadAuto || d.AckReaction != "eyes" {
		t.Errorf("defaults = %+v", d)
	}
}

// TestSlackTokensForTheMode: config check names the token the chosen mode
// is missing, and a token in the wrong key.
func TestSlackTokensForTheMode(t *testing.T) {
	tests := []struct {
		name string
		body string
		want []string // "" = valid
	}{
		{"socket with both tokens", "slack: { enabled: true, bot_token: xoxb-1, app_token: xapp-1 }", nil},
		{"socket without the app token", "slack: { enabled: true, bot_token: xoxb-1 }",
			[]string{"channels.slack.app_token: missing; mode socket needs an app-level token (xapp-"}},
		{"socket with a bot token as app token", "slack: { enabled: true, bot_token: xoxb-1, app_token: xoxb-2 }",
			[]string{"channels.slack.app_token: is not an app-level token: it must start with xapp-"}},
		{"tokens swapped", "slack: { enabled: true, bot_token: xapp-1, app_token: xapp-2 }",
			[]string{"channels.slack.bot_token: holds an app-level token (xapp-"}},
		{"events without the signing secret", "slack: { enabled: true, mode: events, bot_token: xoxb-1 }",
			[]string{"channels.slack.signing_secret: missing; mode events needs the app's signing secret"}},
		{"events needs no app token", "slack: { enabled: true, mode: events, bot_token: xoxb-1, signing_secret: s }", nil},
		{"events endpoint", "slack: { enabled: true, mode: events, bot_token: xoxb-1, signing_secret: s, events: { listen: nohost, path: slack } }",
			[]string{`channels.slack.events.listen: "nohost" is not host:port`, `channels.slack.events.path: "slack" must start with "/"`}},
		{"unknown mode and reply_in_thread", "slack: { enabled: true, mode: sockets, bot_token: xoxb-1, reply_in_thread: alway }",
			[]string{`channels.slack.mode: unknown mode "sockets" (did you mean "socket"?)`, `channels.slack.reply_in_thread: unknown value "alway" (did you mean "always"?)`}},
		{"bad api_url", "slack: { enabled: true, bot_token: xoxb-1, app_token: xapp-1, api_url: slack.com }",
			[]string{`channels.slack.api_url: "slack.com" is not an http(s) URL`}},
		{"disabled needs nothing", "slack: { enabled: false, mode: whatever }", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(writeConfig(t, minimal+"channels:\n  "+tt.body+"\n"), noEnv())
			if tt.want == nil {
				if err != nil {
					t.Fatalf("want a valid config, got %v", err)
				}
				return
			}
			ps := problemsOf(t, err)
			if len(ps) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(ps), len(tt.want), err)
			}
			for i, w := range tt.want {
				if !strings.Contains(ps[i].String(), w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, ps[i].String(), w)
				}
			}
		})
	}
}
