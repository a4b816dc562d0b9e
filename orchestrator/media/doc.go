// Package media reads the files users send so the agent can answer them:
// it downloads each through its channel (within media.max_bytes and
// media.download_timeout, from the platform's own file host only), keeps
// it in the media store by content hash (a retried message is not
// downloaded again), and turns it into the turn's input: images for a
// model that sees, the text of documents (plain text, Markdown, code,
// CSV, JSON, PDF), the transcript of a voice note. What cannot be read
// is answered with one clear sentence and no LLM call.
//
// It implements core.MediaReader; it imports core and routing
// (the vision capability).
package media
