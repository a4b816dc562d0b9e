// Package routing decides which model answers and makes sure one does.
//
// It owns the model catalog and aliases, the precedence of model choices
// (per request, per conversation pin, per chat or channel, per task pin,
// learned affinity, highest weight), the task classifier, implicit
// quality-signal detection and weights, affinity learning with time
// decay, per-(task, model) change detection, the choice rule built on
// them with settled models and budgeted re-exploration probes, escalation after a rejection, auth profiles
// with round-robin selection and cooldowns, the two-stage failover
// (profiles, then fallback models), the local/cloud LLM semaphores, the
// cost ledger and the daily budget. The in-chat /model, /models and
// /retry commands live here too.
//
// The wire clients are in routing/provider; persistence is reached
// through the Store interface, which store.DB implements. routing may
// import core, store and routing/provider only.
package routing
