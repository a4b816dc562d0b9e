// Package metrics is OpenTalon's Prometheus metrics: one registry per
// gateway, served at GET /metrics.
//
// Events on the path of a message are counted through the small observer
// interfaces of the packages that emit them (core.Observer,
// routing.Observer, guard.Observer, the plugin manager's OnEvent), which
// Metrics implements; cmd/opentalon wires it. State is read when scraped,
// not counted along the way: the queue's depth and oldest item from the
// store, tokens and cost from the usage ledger, cooldowns from the
// router's profile states, channel liveness from the gateway.
//
// Label values are bounded: channel names, stages, outcomes, model and
// provider references from the config, plugin names; never a chat or
// user id.
//
// The subpackage status serves the read-only status page and its JSON
// API.
//
// metrics imports core only; cmd/opentalon imports it.
package metrics
