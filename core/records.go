package core

import (
	"errors"
	"time"
)

// The records a store keeps for the packages that consume it, typed here
// so a store implements each consumer's own interface (routing.Store,
// orchestrator.Store, media.Store, status.Store, plugins.StateStore and
// BindingStore) without the consumer depending on any store's own types.
// The memory records are in memories.go, MediaFile in media.go.

// What the router learns and spends.

// Affinity is the decayed record of quality signals for one (task type,
// model) pair. Pos and Neg are decayed signal weights as of UpdatedAt;
// Positives and Negatives count the raw signals ever recorded.
type Affinity struct {
	Task, Model          string
	Pos, Neg             float64
	Positives, Negatives int
	LastSignal           time.Time
	UpdatedAt            time.Time
}

// ProfileState is the usage and cooldown state of one auth profile. The
// credential itself is never stored.
type ProfileState struct {
	Provider, ID    string
	Uses            int64
	LastUsed        time.Time
	CooldownUntil   time.Time
	LastProbe       time.Time
	Failures        int // consecutive non-billing failures
	BillingFailures int // consecutive billing/quota failures
	LastError       string
	// RetryAfter is the server's own Retry-After of the failure that set
	// the cooldown (0: it gave none): the credential is probed that often
	// when it is sooner than cooldowns.initial, after a restart too and
	// on every replica.
	RetryAfter time.Duration
}

// UsageRecord is one LLM call in the cost ledger.
type UsageRecord struct {
	At           time.Time
	SessionID    int64
	Conversation string
	UserID       string
	Model        string
	// Purpose is "chat", "plugin", "post_process", "lua", "compaction",
	// "explore", ...
	Purpose      string
	InputTokens  int
	OutputTokens int
	CostUSD      float64
}

// UsageTotal sums the ledger for one group (a model, chat or user).
type UsageTotal struct {
	Key          string
	Calls        int
	InputTokens  int64
	OutputTokens int64
	CostUSD      float64
}

// EscalationState is what the escalator remembers of a session: the
// latest rejected question and the models that already answered it (the
// last one wrote the answer being judged).
type EscalationState struct {
	Question string
	Models   []string
}

// FollowUp is what judging a message as a verdict on the session's last
// answer reads, in one round trip: that answer (Last; nil when the
// session has none written by a model), the question it answered (the
// session's newest user message), the session's escalation state, and
// whether a verdict on the answer was recorded already (Judged: a signal
// other than an explicit model choice, a positive reaction or an
// abandonment). Asker is who sent the request Last answers, as its queue
// item says (its user, whether the chat is private, its origin); nil
// when that is unknown (the item was pruned): in a group, only the
// asker's next message is a verdict on their answer.
type FollowUp struct {
	Last       *Reply
	Question   string
	Escalation EscalationState
	Judged     bool
	Asker      *Inbound
}

// What operators read (the status page).

// UsagePoint is the ledger of one group in one time bucket.
type UsagePoint struct {
	// Bucket is the start of the bucket.
	Bucket       time.Time
	Key          string
	Calls        int
	InputTokens  int64
	OutputTokens int64
	CostUSD      float64
}

// QueueFailure is a request that failed for good.
type QueueFailure struct {
	ID      int64
	Channel string
	Kind    string
	Reason  string
	At      time.Time
}

// What the plugin manager keeps.

// PluginStateQuota bounds one plugin's namespace (plugins.tools.state);
// 0 = no bound.
type PluginStateQuota struct {
	MaxKeys  int
	MaxBytes int64 // keys and values together
}

// ErrPluginStateQuota is returned (wrapped) by a plugin state store's
// PluginStatePut when a write would take a namespace past its quota.
var ErrPluginStateQuota = errors.New("plugin state quota reached")

// ErrLuaKVQuota is returned (wrapped) by a Lua KV store when a ctx.kv_set
// would take a script's namespace past plugins.lua.limits.kv_max_keys or
// kv_max_bytes (bounded by a PluginStateQuota too).
var ErrLuaKVQuota = errors.New("lua kv quota reached")

// PluginBinding is the binary a plugin name belongs to.
type PluginBinding struct {
	Name, Path, SHA256 string
	BoundAt            time.Time
}

// Setting is a value an admin set in chat (/budget, /allowed) that
// overrides the config key it is named after (routing.budget.daily_usd,
// routing.allowed …) until it is dropped. UpdatedBy says who set it
// ("telegram:42"); UpdatedAt when.
type Setting struct {
	Key, Value string
	UpdatedAt  time.Time
	UpdatedBy  string
}
