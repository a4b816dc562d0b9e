package core

import "context"

// WaitMarker is an optional capability of a QueueStore: it records
// whether a claimed item only waits for now (its LLM call waits for a
// provider's concurrency slot, llm.max_concurrent_*). A claim that takes
// back an item whose lease ran out while it waited counts no
// interruption against it: the poison-message guard gives up on what
// was running when the process died queue.max_attempts times, not on
// what waited behind it. Every claim clears the mark. A mark that could
// not be cleared (the write failed; logged) stays for that try: a crash
// in it is not counted either.
type WaitMarker interface {
	MarkWaiting(ctx context.Context, id, lease int64, waiting bool) error
}

type waitNoteKey struct{}

// WithWaitNote returns a context whose work tells note when it starts
// only waiting (true) and when it goes on (false); NoteWaiting calls it.
// note returns once the state is recorded.
func WithWaitNote(ctx context.Context, note func(waiting bool)) context.Context {
	return context.WithValue(ctx, waitNoteKey{}, note)
}

// NoteWaiting tells the note ctx carries (WithWaitNote), if any, that
// the work starts only waiting (true) or goes on (false). A caller calls
// it with false before it does anything a crash could be blamed on.
func NoteWaiting(ctx context.Context, waiting bool) {
	if note, _ := ctx.Value(waitNoteKey{}).(func(bool)); note != nil {
		note(waiting)
	}
}
