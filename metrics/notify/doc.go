// Package notify sends operator events (core.OpsEvent: a request failed
// for good, a channel down for longer than a minute, every credential of
// a provider cooling, the budget at 80% and 100%, a plugin in a restart
// loop, a Lua hook that failed) to the configured sinks: a webhook (POST
// JSON signed with HMAC-SHA256), a chat conversation on any channel, or
// a plugin implementing Notify. Events are deduplicated and rate-limited
// per kind so an outage does not flood, and each sink is sent to in the
// background with retries and backoff: Emit never blocks the caller.
//
// It also watches for the events no single call sees: a channel that
// stays down (Monitor) and a plugin that keeps restarting (PluginWatch).
//
// notify imports only core.
package notify
