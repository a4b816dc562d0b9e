// Package routing decides which model answers and makes sure one does.
//
// It owns the model catalog and aliases, the precedence of model choices
// (per request, per conversation pin, per chat or channel, per task pin,
// learned affinity, highest weight), the task classifier, implicit
// quality-signal detection and weights, affinity learning with time
// decay, and the choice rule built on them: priors from the catalog
// weights (arms.go), Thompson sampling with a cost penalty, a stop rule
// and a value-of-information test on what to explore, per-(task, model)
// and model-wide change detection (change.go, signals.go), targeted probe
// sequences within a budget (explore.go), the optional LLM judge
// (judge.go) and the sweep of answers left without a verdict
// (implicit.go). The learning state beside the affinity rows lives in
// the store behind LearningStore (state.go), so a restart continues what
// the router was noticing; Explain says why a task type gets its model.
// It also owns escalation after a rejection, auth profiles with
// round-robin selection and cooldowns, the two-stage failover (profiles,
// then fallback models), the local/cloud LLM semaphores, the cost ledger
// and the daily budget, and the in-chat /model, /models, /retry,
// /budget and /allowed commands (the last two change the budgets and the
// allowlist for admins: settings kept in the store that override the
// config, settings.go).
//
// The wire clients are in routing/provider; persistence is reached
// through the Store, LearningStore and SettingsStore interfaces, which store.DB
// implements. routing may import core, store and routing/provider only.
package routing
