// Package channeltest is the conformance suite every channel adapter
// passes against its own fake platform server, in the spirit of
// net/http/httptest: an adapter's test implements Platform (start the
// channel against a fake, make the fake deliver a message or a reaction,
// tell whether the fake saw an event acknowledged) and calls Run.
//
// Run drives the adapter through a real gateway.Gateway over a real store
// (the caller opens it, so this package needs only core, core/gateway
// and the shared channel packages) and
// checks the contract of core.Channel: an event is acknowledged only after
// its row is committed; the same event delivered twice makes one queue
// row; a reaction on a bot message becomes the right polarity on the right
// reply; Send returns ids that map back to the reply; every part is
// within the platform's limit; a user outside the allowlist is ignored;
// Run returns promptly when its context ends and Close is idempotent.
package channeltest
