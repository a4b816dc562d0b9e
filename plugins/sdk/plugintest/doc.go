// Package plugintest plays the OpenTalon core for plugin tests, in the
// spirit of net/http/httptest: Build compiles a plugin, Start launches it
// through the same handshake as the core (with an in-memory state store),
// checks its capabilities, and Call runs actions through the real guard
// pipeline so a test sees exactly what the LLM would.
package plugintest
