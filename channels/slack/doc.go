// Package slack owns the Slack channel: it receives events by Socket Mode
// (slack-go's socketmode, each envelope acknowledged only after the
// gateway committed it, a quiet connection recycled) or on an Events API
// endpoint (signature and timestamp verified, redeliveries dropped by
// X-Slack-Retry-Num and event id), turns app mentions, direct messages,
// follow-ups in threads the bot answered, slash commands and reactions
// into core.Inbound and core.Reaction for the gateway, and posts replies
// as Slack mrkdwn with chat.postMessage in the thread reply_in_thread
// chooses, with the ack reaction, per-channel pacing, 429 handling and
// ephemeral answers to slash commands.
//
// It imports core, config and the shared channel packages only. The fake
// Slack for tests is in slacktest.
package slack
