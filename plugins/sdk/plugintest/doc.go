// Package plugintest plays the OpenTalon core for plugin tests, in the
// spirit of net/http/httptest: Build compiles a plugin, Start launches it
// through the same handshake as the core (with an in-memory state store),
// checks its capabilities, and Call runs actions through the real guard
// pipeline so a test sees exactly what the LLM would. The extension
// points are driven the way the core drives them too: PreHook and
// PostHook (with the hook timeout and the sanitizer), HTTP and Injected
// (the core's route handler, API key included), Fire, Notify, Authorize,
// Blobs, Complete and Stream.
package plugintest
