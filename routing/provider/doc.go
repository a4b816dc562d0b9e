// Package provider holds OpenTalon's LLM API clients: the OpenAI Chat
// Completions format (OpenAI, Ollama, vLLM and any compatible server) and
// the Anthropic Messages format, written on net/http, complete and
// streaming, with tool calls in both directions and errors classified into
// core error kinds. Routing, failover and credentials live above it in
// package routing.
//
// Entry points: NewOpenAI(Options) for api: openai-completions and
// NewAnthropic(Options) for api: anthropic-messages; both return a
// Provider. Every error a call returns is a *core.Error (rate limited with
// RetryAfter, auth, billing, unavailable, timeout, context too long, bad
// request, malformed) except the caller's own cancellation, which wraps
// context.Canceled. Keys never appear in errors or logs.
//
// Tools travel as "<plugin>__<action>" (ToolName, SplitToolName) with a
// JSON-schema parameters object; the arguments an LLM sends back are
// decoded into map[string]string, non-string values as their JSON text.
//
// Tests use the fake servers of package providertest.
package provider
