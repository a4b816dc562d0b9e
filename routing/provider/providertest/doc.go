// Package providertest starts fake LLM servers for tests, in the spirit of
// net/http/httptest: NewOpenAI speaks the OpenAI Chat Completions wire
// format and NewAnthropic the Anthropic Messages format, both complete and
// SSE streaming, on 127.0.0.1.
//
// A Server records every request it receives (decoded back into core's
// vocabulary: model, system prompt, messages, tools, the credential seen),
// answers from a queue of canned Scripts, then from a reply function, then
// with a deterministic default ("echo: <last user message>"), and can
// inject errors (status, body, headers), answer with tool calls, and hold
// requests until released so tests can exercise crashes and concurrency.
//
// It imports only core and the standard library, so any package's tests
// may use it. Nothing here sleeps or reaches the network beyond loopback.
package providertest
