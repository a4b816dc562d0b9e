// Package guard owns the pipeline every plugin result passes before the
// LLM sees it, in this order: validate the call against the registry →
// deadline (context.WithTimeout) → execute → size limit (truncate on a
// UTF-8 boundary with a notice) → sanitize (strip tool-call-looking text)
// → validate the result (call id, UTF-8, no binary) → wrap in a
// [plugin_output] block whose inner markers are escaped.
//
// Each step is a small exported function testable alone; Pipeline chains
// them. guard imports only core; it learns about plugins through the
// Resolver interface it owns.
package guard
