// Package gateway is OpenTalon's engine: the Gateway, the durable,
// per-conversation ordered request pipeline that turns an accepted
// platform event into a delivered reply, in core's words.
//
// Its files follow the path of an event: intake.go (decide access and
// commit a message or reaction; enqueue, the one way into the queue,
// which inject.go and firing.go use too for a plugin's message and a
// schedule's firing), access.go (open, allowlist, pairing, admins, then
// an auth provider's Authorizer; /pair), dispatch.go (claim, workers, the
// outcome of each attempt: retry, wait for a cooling provider, give up),
// serve.go (the one skeleton every item runs through: a stored reply is
// only delivered again, else the item's producer makes the answer, which
// is stored, the worker slot released, and the answer delivered; the
// producers are serve.go's for a message, reactions.go's for a reaction
// on one of the bot's answers, firing.go's for a firing), pipeline.go
// (interceptors, in-chat commands, the files a message carries, then
// pre-hooks → agent → post-hooks: the one path of every answer the agent
// gives), stream.go (an answer shown while it is written), delivery.go
// (store the reply, send its parts and files), supervise.go (the
// channels' lifecycles), ledger.go (what a channel may ask the store
// through the Sink: whether the bot answered in a conversation, and the
// sealed short-lived credentials) and hooks.go (OrderedHooks: the hooks of several
// sources, interleaved by their order). It tells a core.Observer what
// happens on the way.
//
// gateway imports core and nothing that imports it back; cmd/opentalon
// builds it, and channel conformance tests run over it.
package gateway
