// Package provider holds OpenTalon's LLM API clients: the OpenAI Chat
// Completions format (OpenAI, Ollama, vLLM and any compatible server) and
// the Anthropic Messages format, written on net/http, complete and
// streaming, with tool calls in both directions and errors classified into
// core error kinds. Routing, failover and credentials live above it in
// package routing.
package provider
