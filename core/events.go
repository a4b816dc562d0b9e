package core

import "time"

// OpsEvent is something the operator should hear about, sent to the
// notification sinks (notifications.sinks).
type OpsEvent struct {
	// Kind is one of the Event* kinds.
	Kind string
	// Subject is what the event is about (a channel, a provider, a
	// plugin, a script): events of one kind and subject are deduplicated.
	Subject string
	// Message is one line for a human.
	Message string
	At      time.Time
	// Details are extra fields (never a secret).
	Details map[string]string
	// Once, when set, makes the event a fact told once for the whole
	// cluster (a budget's 80% on one day): the notifier sends it only
	// when no replica claimed this key in the last two days.
	Once string `json:",omitempty"`
}

// Operator event kinds.
const (
	// EventRequestFailed: a request failed for good (its user got the
	// apology). Subject: the channel.
	EventRequestFailed = "request_failed"
	// EventChannelDown: a channel has been down for longer than
	// notifications.channel_down_after. Subject: the channel.
	EventChannelDown = "channel_down"
	// EventProviderCooling: every credential of a provider is cooling
	// down. Subject: the provider.
	EventProviderCooling = "provider_cooling"
	// EventBudgetWarning and EventBudgetExhausted: a daily budget reached
	// 80% and 100%. Subject: the budget's config key.
	EventBudgetWarning   = "budget_warning"
	EventBudgetExhausted = "budget_exhausted"
	// EventPluginRestartLoop: a plugin keeps crashing (or was given up).
	// Subject: the plugin.
	EventPluginRestartLoop = "plugin_restart_loop"
	// EventLuaHookFailed: a run of a Lua hook failed; Details say whether
	// the script failed closed (the message or answer was stopped) or
	// open. Subject: the script's file.
	EventLuaHookFailed = "lua_hook_failed"
	// EventLuaScriptDisabled is no longer emitted (a failing script is no
	// longer disabled for everyone); a sink listing it receives
	// EventLuaHookFailed.
	EventLuaScriptDisabled = "lua_script_disabled"
	// EventModelRefused: a model refused a request (an HTTP 400 other
	// than a too-long context: a parameter it does not take, an id its
	// provider does not know); routing avoids it for a while. Subject:
	// the model.
	EventModelRefused = "model_refused"
	// EventPairingRequested: an unknown user asked to talk to the bot on
	// a channel in pairing mode (they got a new code); the message says
	// how to approve it. Subject: "<channel> <code>", so each request is
	// told once.
	EventPairingRequested = "pairing_requested"
)

// EventKinds lists every operator event kind.
var EventKinds = []string{EventRequestFailed, EventChannelDown, EventProviderCooling, EventBudgetWarning,
	EventBudgetExhausted, EventPluginRestartLoop, EventLuaHookFailed, EventLuaScriptDisabled, EventModelRefused, EventPairingRequested}

// OpsEvents receives operator events. Emit must return at once (queue,
// don't send) and is safe for concurrent use.
type OpsEvents interface {
	Emit(e OpsEvent)
}
