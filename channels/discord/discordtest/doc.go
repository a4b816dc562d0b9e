// Package discordtest is a fake Discord for tests, in the style of
// net/http/httptest. It listens on 127.0.0.1 and speaks Discord's wire
// protocol closely enough for bwmarrin/discordgo:
//
//   - REST under /api/v9/...: GET /gateway and /gateway/bot, channels,
//     messages (with message_reference and allowed_mentions recorded),
//     reactions, typing, application commands (global and per guild), the
//     interaction callback and its webhook follow-ups; every call except
//     gateway discovery and the interaction webhooks needs the bot token;
//   - a gateway websocket that sends HELLO, checks IDENTIFY (the token,
//     the intents) or RESUME, answers READY or RESUMED, replays what a
//     resumed session missed, acknowledges heartbeats and dispatches the
//     events a test asks for;
//   - knobs for what goes wrong: close codes (4004 for a refused token,
//     4014 for a privileged intent not enabled), heartbeats left
//     unacknowledged, resumes refused, upgrades refused, injected REST
//     failures, expired interaction tokens.
//
// Only tests use it.
package discordtest
