package core

import (
	"context"
	"time"
)

// EventKind says what a queued event is.
type EventKind string

// Event kinds.
const (
	EventMessage  EventKind = "message"
	EventReaction EventKind = "reaction"
	// EventScheduled is a schedule's firing (QueueItem.Firing).
	EventScheduled EventKind = "schedule"
)

// QueueItem is one accepted event in the durable queue.
type QueueItem struct {
	ID           int64
	Kind         EventKind
	Conversation ConversationKey
	// DedupeKey is unique across the queue: channel + platform id.
	DedupeKey string
	Message   *Inbound  `json:",omitempty"`
	Reaction  *Reaction `json:",omitempty"`
	Firing    *Firing   `json:",omitempty"`
	// Attempts counts the attempts that ended in a failure; Interruptions
	// the attempts cut short by a crash or kill (the poison-message guard).
	Attempts      int
	Interruptions int
	// Notified says the user was told the answer is delayed.
	Notified  bool
	NotBefore time.Time
	CreatedAt time.Time
	// Lease is the fencing token of the claim that returned the item:
	// renewing, finishing, retrying, deferring or releasing it names the
	// token, and a claimer whose lease was taken back changes nothing.
	Lease int64 `json:"-"`
	// NoReply is set by a claim that saw no reply stored for the item
	// (so ReplyForRequest need not be asked); false says nothing.
	NoReply bool `json:"-"`
	// Durable, when not nil, is closed once the enqueue that claimed the
	// item has flushed it to the disk (core.EnqueueClaimer): the work may
	// start before, but nothing the user sees is sent until then.
	Durable <-chan struct{} `json:"-"`
	// Behind is set by ClaimAside: the earlier items of the conversation
	// the item was claimed beside. It is not stored.
	Behind *Behind `json:"-"`
	// MaxPending, when > 0, makes Enqueue refuse a message with
	// ErrConversationFull while its conversation already has that many
	// unfinished items. It is not stored.
	MaxPending int `json:"-"`
}

// ErrConversationFull is returned by Enqueue when a conversation already
// has QueueItem.MaxPending unfinished items.
var ErrConversationFull = &Error{Kind: KindRateLimited, Msg: "this conversation already has too many messages waiting"}

// ErrLeaseLost is returned by the queue's settling calls when the claim
// they name no longer holds the item: its lease expired and another
// claimer took it back (or it was settled already). Nothing was changed;
// the work done under the lost lease must stop.
var ErrLeaseLost = &Error{Kind: KindUnavailable, Msg: "the queue item's lease was lost: another claimer took it back"}

// Queue statuses.
const (
	StatusQueued  = "queued"
	StatusRunning = "running"
	StatusDone    = "done"
	StatusFailed  = "failed"
)

// QueueStore is the durable request queue. All methods are safe for
// concurrent use, by several claimers too (replicas over one database): a
// claim is a lease the claimer renews while it works, and the calls that
// settle an item name the claim's token (QueueItem.Lease); a claimer
// whose lease was taken back gets ErrLeaseLost and changes nothing.
type QueueStore interface {
	// Enqueue commits item; a second item with the same DedupeKey is
	// dropped and reported with dup=true.
	Enqueue(ctx context.Context, item QueueItem) (id int64, dup bool, err error)
	// EditQueued replaces the text of a still-queued message.
	EditQueued(ctx context.Context, dedupeKey, text string) (bool, error)
	// Release puts a running item back in the queue as it was (a graceful
	// shutdown).
	Release(ctx context.Context, id, lease int64) error
	// Claim marks as running, under a lease of this claimer, and returns
	// up to n items that are the oldest unfinished item of their
	// conversation and due at now: queued and past their NotBefore, or
	// running under a lease that ran out (taken back: an interruption).
	// next is the earliest time a head not yet due becomes due (zero if
	// none).
	Claim(ctx context.Context, n int, now time.Time) (items []QueueItem, next time.Time, err error)
	// Renew extends the lease of a claimed item.
	Renew(ctx context.Context, id, lease int64) error
	// Retry puts a running item back with attempts+1, due at notBefore.
	Retry(ctx context.Context, id, lease int64, notBefore time.Time, cause string) error
	// Defer puts a running item back due at notBefore without counting an
	// attempt (it waits for a cooling provider); notified records that the
	// user was told.
	Defer(ctx context.Context, id, lease int64, notBefore time.Time, cause string, notified bool) error
	// Finish ends an item with StatusDone or StatusFailed.
	Finish(ctx context.Context, id, lease int64, status, cause string) error
}

// EnqueueClaimer is an optional capability of a QueueStore: Enqueue that
// also claims the item for this claimer in the same write, when it is
// due at now and nothing else of its conversation is unfinished (it
// would be the next thing Claim returns). A claimed item is handed to
// start, under its lease as Claim returns it, as soon as it is committed
// and before the commit is flushed to the disk; its Durable is closed
// once the flush is over, and EnqueueClaim returns then (claimed=true,
// and the flush's error if it failed: the platform is not acknowledged,
// and its redelivery is a duplicate of the item being worked on). The
// caller must have a worker free for a claimed item: its lease runs
// from now.
type EnqueueClaimer interface {
	// ClaimsAtEnqueue says EnqueueClaim may claim (false: it only
	// enqueues, and no worker need be kept free for it).
	ClaimsAtEnqueue() bool
	EnqueueClaim(ctx context.Context, item QueueItem, now time.Time, start func(QueueItem)) (claimed, dup bool, err error)
}

// AsideClaimer is an optional capability of a QueueStore: it claims an
// item out of its conversation's order (an aside command,
// Command.Aside) when every earlier unfinished item of the conversation
// only waits: the oldest is queued and not due at now. ok is false when
// the item is not claimable so (one of them runs or is due, or the item
// is taken or settled); it then runs in order.
type AsideClaimer interface {
	ClaimAside(ctx context.Context, id int64, now time.Time) (it QueueItem, ok bool, err error)
	// QueuedIn returns the queued items of conv, oldest first, at most
	// limit.
	QueuedIn(ctx context.Context, conv ConversationKey, limit int) ([]QueueItem, error)
}

// SessionStore keeps one active session per conversation.
type SessionStore interface {
	// ActiveSession returns the conversation's session, creating it if
	// there is none (or the last one expired), and touches its last access.
	ActiveSession(ctx context.Context, conv ConversationKey) (Session, error)
	// NewSession ends the active session and starts a fresh one.
	NewSession(ctx context.Context, conv ConversationKey) (Session, error)
	// MessageCount counts a session's history entries.
	MessageCount(ctx context.Context, sessionID int64) (int, error)
}

// FollowUpSessions is an optional capability of a SessionStore: the
// active session (as ActiveSession) together with what the interceptors
// read to judge a message of it (the last answer, its question, the
// escalation state, whether it was judged), in one round trip. The
// follow-up is nil when the store could not read it with the session.
type FollowUpSessions interface {
	ActiveSessionFollowUp(ctx context.Context, conv ConversationKey) (Session, *FollowUp, error)
}

// ReplyStore keeps answers and their delivery.
type ReplyStore interface {
	// SaveReply atomically appends msgs to the reply's session, adds the
	// reply's usage to the session and stores the reply (its text, parts
	// and files). It returns the reply id. Saving a second reply for one
	// request returns the first, unless that one is a streaming draft:
	// the draft is then filled in (its messages stay recorded).
	SaveReply(ctx context.Context, r *Reply, msgs []ChatMessage) (int64, error)
	// BeginReply stores the draft of a reply being streamed (its request,
	// session and conversation; no text yet) and returns its id; the reply
	// that already exists for the request is returned instead.
	BeginReply(ctx context.Context, r *Reply) (int64, error)
	// MarkDraft records the platform id of a message that shows part of a
	// streamed draft (to be edited to its final part).
	MarkDraft(ctx context.Context, replyID int64, part int, platformID string) error
	// ForgetPart removes the record of a part whose message was deleted.
	ForgetPart(ctx context.Context, replyID int64, part int) error
	// ReplyForRequest returns the reply stored for a request of conv, if
	// any; a reply of another conversation is never returned.
	ReplyForRequest(ctx context.Context, requestID int64, conv ConversationKey) (*Reply, error)
	// MarkSent records the platform id of a sent part.
	MarkSent(ctx context.Context, replyID int64, part int, platformID string) error
	// ReplyByPlatformID finds the reply one of whose parts has that id.
	ReplyByPlatformID(ctx context.Context, channel, platformID string) (*Reply, error)
}

// SentFinisher is an optional capability of a Store: Finish together
// with the record of the reply's last sent part (MarkSent), in one write
// instead of two. The part is recorded even when the lease was lost (it
// was sent); the error is then ErrLeaseLost.
type SentFinisher interface {
	FinishSent(ctx context.Context, id, lease int64, sent PartSent) error
}

// PartSent is the record of one sent part of a reply (ReplyStore.MarkSent).
type PartSent struct {
	ReplyID    int64
	Part       int
	Channel    string
	PlatformID string
}

// QueueWaker is an optional capability of a QueueStore shared by several
// gateways: the channel receives when another gateway may have given a
// conversation new work (PostgreSQL's LISTEN/NOTIFY). The dispatcher's
// timer stays the fallback.
type QueueWaker interface {
	QueueWake() <-chan struct{}
}

// StopCause is the recorded cause of a queue item whose answer /stop
// ended.
const StopCause = "stopped by the user (/stop)"

// Stopper is an optional capability of a QueueStore shared by several
// gateways: /stop reaches the replica writing the answer it stops.
type Stopper interface {
	// RequestStop asks every gateway on the database to stop the work
	// under way for conv.
	RequestStop(ctx context.Context, conv ConversationKey) error
	// StopRequests receives the conversations other gateways asked to
	// stop (nil for a gateway alone on its database).
	StopRequests() <-chan ConversationKey
}

// MediaStore keeps file content by its SHA-256 (<data_dir>/media).
type MediaStore interface {
	// PutMedia stores data and returns its hex digest.
	PutMedia(ctx context.Context, data []byte, mime string) (string, error)
	// ReadMedia returns the content stored under a digest; an error of
	// kind KindNotFound when it is gone (past media.retention).
	ReadMedia(ctx context.Context, sha string) ([]byte, error)
}

// Store is what the Gateway needs from persistence.
type Store interface {
	QueueStore
	SessionStore
	ReplyStore
	MediaStore
}
