package core

import "time"

// The records below are what the router learns and spends; they are typed
// here so the store implements the router's persistence without the
// router depending on the store's own types.

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
