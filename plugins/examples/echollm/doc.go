// Command echollm is an example LLM provider plugin
// (models.providers.<id>: { api: plugin, plugin: echollm }): it answers
// by rule, calls a tool when asked to ("use calc.evaluate 6*7"), streams
// its answer word by word, and reports a rate limit the way the router's
// failover expects.
package main
