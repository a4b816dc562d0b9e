// Package guard owns the pipeline every plugin result passes before the
// LLM sees it, in this order: validate the call against the registry →
// deadline (context.WithTimeout) → execute → size limit (truncate on a
// UTF-8 boundary with a notice) → encoding (invalid UTF-8, NUL or binary
// output is rejected with a generic error) → clean (C0 controls, bidi
// overrides and isolates, tag characters stripped) → sanitize → exactly
// one [plugin_output] block around the plugin's text.
//
// The sanitizer judges text the way the model reads it (view.go): HTML
// entities, JSON and \x escapes and percent-encoding decoded, NFKC
// compatibility folding, default-ignorable and format characters
// removed, Cyrillic and Greek look-alikes folded to Latin, whitespace
// inside a keyword ignored. It matches the forbidden shapes (shapes.go:
// tool-call tags and tokens, OpenAI/Anthropic/Gemini JSON, ReAct lines,
// chat-template role tokens, JSON role messages, the wrapper's own
// markers and look-alikes) on that view and neutralizes exactly the
// original characters that spell each match. Every step is linear in
// the text.
//
// The same sanitizer bounds plugin-controlled text outside results
// (OneLine for descriptions, Prompt for post_process prompts), and
// CheckOutput passes post_process output through the result steps.
//
// Each step is a small exported function testable alone; Pipeline chains
// them. guard imports only core; it learns about plugins through the
// Resolver interface it owns.
package guard
