// Package orchestrator is the agent loop: it builds the system prompt
// (built-in safety rules, the operator's custom rules, tool capabilities,
// the active orchestration step, recalled memories and past workflows),
// loads the session history, fits it to the context window of the model
// the router chose (compacting the oldest turns into a summary through
// core.Generator when it would overflow), asks the routed LLM, runs the
// tool calls it requests (plugin actions through the guard, the built-in
// memory tools itself), records multi-step plans as workflows, keeps the
// session's orchestration state, and returns the answer with the turn's
// new history entries for the gateway to persist.
//
// Files: orchestrator.go (Answer), tools.go (the tool loop), steps.go
// (orchestrator.steps), compact.go (compaction, /compact), memory.go (the
// memory tools and recall), workflow.go (workflow memory), state.go
// (session state, /status), commands.go (/compact, /memory, /forget),
// rules.go (the system prompt).
package orchestrator
