// Package toolkit holds the behaviour every chat platform adapter shares,
// so a platform package keeps only its wire protocol, its formatting and
// its ids:
//
//   - Access: the allow_users / allow_chats lists of the common channel
//     block (and any further list a platform adds, such as Discord guilds);
//   - Trigger: when a group or channel message is for the bot;
//   - Reactions: the emoji → polarity map with emoji variants folded, and
//     the old → new reaction diff turned into core.Reaction events;
//   - Pacer and Limiter: per-conversation token buckets and a limit across
//     all conversations, combined by Pace; a paced send waits in the
//     channel's Send, which the gateway calls outside its queue workers,
//     in line: answers first come, first served, notices after them, and
//     a sender that gives up leaves its turn to the next;
//   - Working: the typing indicator and ack reaction loop; Indicators
//     keeps them by chat so a send there quiets them first (no "typing…"
//     after the reply);
//   - Health: connected, last event received, last error, for /readyz
//     and /status;
//   - Scrubber: secrets removed from error texts;
//   - Recent: a bounded set of recently seen event ids (redeliveries);
//   - Liveness: a watchdog that recycles a connection that went quiet;
//     AckWatch: one whose heartbeats go unacknowledged;
//   - Retry: a send retried with backoff, Retry-After honoured;
//   - NewServer: an HTTP server whose clients cannot hold it open, and
//     Endpoint: a platform's webhook served with it until the context ends;
//   - Sleep: a context-aware wait.
//
// toolkit imports core and config only; platform packages import it.
package toolkit
