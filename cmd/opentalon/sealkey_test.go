package main

import (
	"bytes"
	"testing"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/store"
)

// TestSealKey: the key comes from state.seal_key when set, else from the
// channel tokens; replicas with one config agree, another token or seal
// key gives another key, and with no secret at all nothing is sealed.
func TestSealKey(t *testing.T) {
	base := func() *config.Config {
		return config.Default()
	}
	if k := sealKey(base()); k != nil {
		t.Fatalf("no channel token and no seal_key gave a key %x", k)
	}
	slackA := base()
	slackA.Channels.Slack.BotToken = "xoxb-one"
	slackB := base()
	slackB.Channels.Slack.BotToken = "xoxb-two"
	discordA := base()
	discordA.Channels.Discord.Token = "xoxb-one" // same text, another channel's token
	withKey := base()
	withKey.Channels.Slack.BotToken = "xoxb-one"
	withKey.State.SealKey = "a-long-random-seal-key-for-tests"
	keys := map[string][]byte{"slack A": sealKey(slackA), "slack B": sealKey(slackB), "discord A": sealKey(discordA), "seal_key": sealKey(withKey)}
	for name, k := range keys {
		if len(k) != store.SealKeySize {
			t.Fatalf("%s: key of %d bytes", name, len(k))
		}
		for other, k2 := range keys {
			if other != name && bytes.Equal(k, k2) {
				t.Fatalf("%s and %s give the same key", name, other)
			}
		}
	}
	if again := sealKey(slackA); !bytes.Equal(again, keys["slack A"]) {
		t.Fatal("one config gave two keys: replicas would not open each other's credentials")
	}
}
