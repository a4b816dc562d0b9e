package main

import (
	"crypto/hkdf"
	"crypto/sha256"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/store"
)

// sealKey is the AES-256 key the short-lived platform credentials are
// sealed under in the database (store.Options.SealKey): HKDF-SHA256 of
// state.seal_key, or, without it, of the enabled channels' own secrets —
// tokens every replica of one bot shares, the database never holds, and
// that are worth more than what they seal (anyone with the bot token can
// answer a command anyway). Changing them makes the credentials kept at
// that moment unreadable, which costs at most an answer posted in the
// channel instead of in place. nil when there is nothing to derive from
// (the console only): nothing is kept then.
func sealKey(cfg *config.Config) []byte {
	var ikm []byte
	info := "opentalon state.seal_key v1"
	if k := cfg.State.SealKey; k.IsSet() {
		ikm = []byte(k.Value())
	} else {
		info = "opentalon channel tokens v1"
		ch := cfg.Channels
		for _, s := range []config.Secret{ch.Telegram.Token, ch.Slack.BotToken, ch.Slack.SigningSecret, ch.Discord.Token} {
			// Each with its length, so no two sets of tokens run together
			// into the same bytes.
			ikm = append(ikm, byte(len(s.Value())>>8), byte(len(s.Value())))
			ikm = append(ikm, s.Value()...)
		}
		if len(ikm) == 8 {
			return nil
		}
	}
	key, err := hkdf.Key(sha256.New, ikm, nil, info, store.SealKeySize)
	if err != nil {
		return nil // only for a length SHA-256 cannot give
	}
	return key
}
