// Package orchestrator is the agent loop: it builds the system prompt
// (built-in safety rules, the operator's custom rules, tool capabilities),
// loads the session history, trims it to the model's context window, asks
// the routed LLM, runs the tool calls it requests through the guard, and
// returns the answer with the turn's new history entries for the gateway
// to persist.
package orchestrator
