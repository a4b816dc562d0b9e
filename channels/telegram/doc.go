// Package telegram owns the Telegram bot channel: it receives updates by
// long polling (its own getUpdates loop, so the offset only advances after
// the gateway committed an update) or by webhook, turns them into
// core.Inbound and core.Reaction for the gateway (an album, or a long
// paste the client split into several messages, as one), and sends
// replies as Telegram HTML through github.com/go-telegram/bot, with reply
// quoting, forum topics and private chats' topics, typing indicator, ack
// reaction, 429 handling, per-chat pacing and a plain-text fallback when
// Telegram rejects the markup.
//
// It imports core, config and channels/textfmt only. The fake Bot API
// server for tests is in telegramtest.
package telegram
