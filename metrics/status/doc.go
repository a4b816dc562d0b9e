// Package status serves OpenTalon's read-only status page at GET / and
// the JSON API behind it (docs/status.md): channels and their liveness,
// the queue and its recent failures, usage and cost over time, the
// affinity the router learned, credentials and their cooldowns, plugins
// and Lua scripts.
//
// The page's assets are embedded in the binary (no CDN; it works
// offline). The JSON endpoints, and whatever else Protect wraps, need
// server.api_key unless the server listens on loopback only.
//
// status imports core only (its Store speaks core's records);
// cmd/opentalon wires it.
package status
