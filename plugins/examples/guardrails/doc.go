// Command guardrails is an example request/response hook plugin: its pre
// hook redacts e-mail addresses and card-like numbers before the LLM
// sees a message (and answers "ping" itself), its post hook adds a note
// to answers that give medical or legal advice.
package main
