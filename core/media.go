package core

import (
	"context"
	"io"
)

// FetchFunc downloads one file of the message being answered into w, at
// most limit bytes (the channel's Fetch).
type FetchFunc func(ctx context.Context, f InboundFile, w io.Writer, limit int64) error

// MediaReader turns the files a message carries into what the agent
// takes: images for a model that sees, the text of documents, the
// transcript of a voice note. It decides; the gateway acts on its answer.
// Safe for concurrent use.
type MediaReader interface {
	// Read fetches (or finds already stored) every file of in and reads
	// it. An error is a failure to retry (a download or a transcription
	// that failed); what cannot be read at all is MediaInput.Reply.
	Read(ctx context.Context, in Inbound, fetch FetchFunc) (MediaInput, error)
}

// MediaInput is what a message's files add to its turn.
type MediaInput struct {
	// Text goes after the message's own text: the contents of documents,
	// a voice note's transcript.
	Text string
	// Attachments are the images, for a model that can see them.
	Attachments []Attachment
	// Reply, when set, answers the message instead of the agent (a file
	// that cannot be read, one too large, an image with no model that
	// sees); no LLM is called.
	Reply string
	// Echo is shown to the user ahead of the answer (a voice note's
	// transcript, when media.transcription.echo is on).
	Echo string
}

// MediaFile is a stored file as the media store knows it: what the media
// reader (orchestrator/media) gets back when it stores or finds a file.
type MediaFile struct {
	SHA256 string
	MIME   string
	Size   int64
	// Text is what was read from it (a document's text, a transcript);
	// HasText says it was read.
	Text    string
	HasText bool
}
