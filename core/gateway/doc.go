// Package gateway is OpenTalon's engine: the Gateway, the durable,
// per-conversation ordered request pipeline that turns an accepted
// platform event into a delivered reply, in core's words.
//
// Its files follow the path of an event: intake.go (decide access and
// commit a message or reaction to the queue), inject.go and firing.go
// (a plugin's message and a schedule's firing into the same queue),
// access.go (open, allowlist, pairing, admins, then an auth provider's
// Authorizer; /pair), dispatch.go (claim, workers, the outcome of each
// attempt: retry, wait for a cooling provider, give up), pipeline.go
// (interceptors, in-chat commands, the files a message carries, then
// pre-hooks → agent → post-hooks: the one path of every answer),
// stream.go (an answer shown while it is written), delivery.go (store
// the reply, send its parts and files), reactions.go (a reaction on one
// of the bot's answers), supervise.go (the channels' lifecycles) and
// hooks.go (OrderedHooks: the hooks of several sources, interleaved by
// their order). It tells a core.Observer what happens on the way.
//
// gateway imports core and nothing that imports it back; cmd/opentalon
// builds it, and channel conformance tests run over it.
package gateway
