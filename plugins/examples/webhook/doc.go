// Command webhook is an example plugin with HTTP routes and a schedule: a
// GitHub webhook (a public route that checks GitHub's HMAC signature
// itself) starts a conversation in a chat about each new issue or pull
// request, GET stats (behind the gateway's API key) counts what came in,
// and a daily digest posts the count. Its settings are in webhook.json
// next to the binary.
package main
