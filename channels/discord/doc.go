// Package discord is the Discord bot channel, built on
// bwmarrin/discordgo: the gateway websocket for events, REST for replies.
//
// People talk to the bot by @mention in guild channels and threads, or in
// DMs; the in-chat commands are registered as application commands
// (/model, /models, /new, /status, /help, /retry) and answered through
// the same queue as messages, after a deferred response within Discord's
// 3-second window; as on Slack, the answer only its user sees, but for
// /retry's. Reactions on the bot's messages become quality
// signals. Replies reference the user's message, may ping only the user
// they reply to, and are split under 2,000 characters with code fences
// closed and reopened across parts.
//
// The files follow the path of an event: discord.go (construction,
// format, health), transport.go (api_url: the REST transport and the
// gateway dialer), gateway.go (connect, resume or identify afresh, close
// codes, the heartbeat watchdog), handlers.go (gateway events → core),
// interactions.go (application commands and their registration), send.go
// (replies, typing and the ack reaction).
//
// What every platform does alike (allowlists, trigger, reactions, retry,
// the heartbeat watch, health, secret scrubbing) is in channels/toolkit;
// Discord Markdown in channels/textfmt. discordtest is a fake Discord for
// tests.
package discord
