package media

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"io"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing"
)

// Store is what the reader keeps files in (store.DB).
type Store interface {
	MediaBySource(ctx context.Context, source string) (core.MediaFile, bool, error)
	StoreMedia(ctx context.Context, source, mime string, r io.Reader, limit int64) (core.MediaFile, error)
	SetMediaText(ctx context.Context, sha, text string) error
	ReadMedia(ctx context.Context, sha string) ([]byte, error)
}

// Models is what the reader asks of the router (routing.Router).
type Models interface {
	// Can says whether some catalog model has a capability ("vision").
	Can(capability string) bool
	// Transcribe turns audio into text with a model reference.
	Transcribe(ctx context.Context, ref string, a core.Attachment, conv core.ConversationKey, user string) (string, error)
}

// Options configure a Reader (the media block of the config).
type Options struct {
	Store  Store
	Models Models
	// MaxBytes bounds one file (media.max_bytes; default 20 MB).
	MaxBytes int64
	// Timeout bounds one download (media.download_timeout; default 60s).
	Timeout time.Duration
	// DocumentTokens bounds the text one document adds to a turn
	// (media.document_tokens; default 8000, about 32 KB of text).
	DocumentTokens int
	// TranscriptionModel is media.transcription.model ("" = voice notes
	// are not understood); Echo is media.transcription.echo.
	TranscriptionModel string
	Echo               bool
	// Extractor reads PDFs out of process (cmd/opentalon: PDFHelper);
	// nil answers a PDF with a sentence saying it cannot be read here.
	Extractor Extractor
	// Extractions bounds the PDFs read at once (default 2): each reader
	// process may take the helper's memory.
	Extractions int
	Logger      *slog.Logger
}

// Reader implements core.MediaReader.
type Reader struct {
	o   Options
	log *slog.Logger
	// extracting holds a token per PDF being read or image being
	// re-encoded.
	extracting chan struct{}
}

var _ core.MediaReader = (*Reader)(nil)

// DefaultMaxBytes is media.max_bytes's default.
const DefaultMaxBytes = 20 << 20

// New builds a Reader.
func New(o Options) *Reader {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.DocumentTokens <= 0 {
		o.DocumentTokens = 8000
	}
	if o.Extractions <= 0 {
		o.Extractions = 2
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Reader{o: o, log: o.Logger.With("component", "media"), extracting: make(chan struct{}, o.Extractions)}
}

// The sentences a user gets instead of an answer.
const (
	noVision     = "Sorry, none of my models can look at images (none has the vision capability), so I cannot see this picture."
	noListening  = "Sorry, I cannot listen to voice messages here; please write your message instead."
	imageFormats = "image/jpeg image/png image/gif image/webp"
)

// Read implements core.MediaReader: every refusal is decided before
// anything is downloaded; then each file is fetched (or found in the
// media store from an earlier attempt), and read.
func (r *Reader) Read(ctx context.Context, in core.Inbound, fetch core.FetchFunc) (core.MediaInput, error) {
	if reply := r.refuse(in); reply != "" {
		return core.MediaInput{Reply: reply}, nil
	}
	var mi core.MediaInput
	var texts []string
	for _, f := range in.Files {
		mf, err := r.get(ctx, in.Conversation.Channel, f, fetch)
		if errors.Is(err, core.ErrTooLarge) {
			return core.MediaInput{Reply: tooLargeFor(f, r.o.MaxBytes, err)}, nil
		}
		if err != nil {
			return core.MediaInput{}, err
		}
		a := core.Attachment{Kind: f.Kind, Name: f.Name, MIME: mf.MIME, Size: mf.Size, SHA256: mf.SHA256}
		if a.Kind == core.MediaDocument {
			// A file the platform gave no type is what its bytes say: an
			// image or a voice note is read as one, with its own refusals.
			if k := core.KindOfMIME(a.MIME); k != core.MediaDocument {
				a.Kind = k
				if reply := r.refuse(core.Inbound{Conversation: in.Conversation, Files: []core.InboundFile{{Kind: k, MIME: a.MIME, Name: f.Name}}}); reply != "" {
					return core.MediaInput{Reply: reply}, nil
				}
			}
		}
		switch a.Kind {
		case core.MediaImage:
			if !strings.Contains(imageFormats, a.MIME) {
				return core.MediaInput{Reply: fmt.Sprintf("I cannot read this kind of image (%s); please send it as JPEG, PNG, GIF or WebP.", a.MIME)}, nil
			}
			a, why, err := r.fit(ctx, in.Conversation.Channel+":"+f.ID, a)
			if err != nil {
				return core.MediaInput{}, err
			}
			if why != "" {
				return core.MediaInput{Reply: why}, nil
			}
			mi.Attachments = append(mi.Attachments, a)
		case core.MediaAudio:
			text, err := r.transcribe(ctx, in, a, mf)
			if err != nil {
				return core.MediaInput{}, err
			}
			texts = append(texts, "(voice message, transcribed:) "+text)
			if r.o.Echo {
				mi.Echo = joinLines(mi.Echo, text)
			}
		default:
			text, why, err := r.document(ctx, a, mf)
			if err != nil {
				return core.MediaInput{}, err
			}
			if why != "" {
				return core.MediaInput{Reply: why}, nil
			}
			texts = append(texts, text)
		}
	}
	mi.Text = strings.Join(texts, "\n\n")
	return mi, nil
}

// refuse decides, from what the platform says of the files, what cannot
// be answered at all: a file over the limit, an image with no model that
// sees, a voice note with no transcription, a document of a kind that
// cannot be read.
func (r *Reader) refuse(in core.Inbound) string {
	for _, f := range in.Files {
		switch {
		case f.Size > r.o.MaxBytes:
			return tooLarge(f, r.o.MaxBytes)
		case f.Kind == core.MediaImage && !r.o.Models.Can(routing.CapVision):
			r.log.Info("an image arrived but no model in models.catalog has capabilities: [vision]", "conv", in.Conversation.String())
			return noVision
		case f.Kind == core.MediaAudio && r.o.TranscriptionModel == "":
			r.log.Info("a voice message arrived but media.transcription.model is not set", "conv", in.Conversation.String())
			return noListening
		case f.Kind == core.MediaDocument && f.MIME != "" && f.MIME != "application/octet-stream" && !readable(f.MIME, f.Name):
			return cannotRead(core.Attachment{Name: f.Name, MIME: f.MIME})
		}
	}
	return ""
}

// get returns the stored content of f, downloading it the first time.
func (r *Reader) get(ctx context.Context, channel string, f core.InboundFile, fetch core.FetchFunc) (core.MediaFile, error) {
	source := channel + ":" + f.ID
	if mf, ok, err := r.o.Store.MediaBySource(ctx, source); err != nil || ok {
		return mf, err
	}
	dctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	pr, pw := io.Pipe()
	fetched := make(chan error, 1)
	go func() {
		err := fetch(dctx, f, pw, r.o.MaxBytes)
		pw.CloseWithError(err)
		fetched <- err
	}()
	// The first bytes name the type the platform does not, and an
	// image's actual format (a platform may call every photo JPEG); it is
	// decided before the file is stored, so the store keeps it for a retry.
	body := bufio.NewReaderSize(pr, sniffLen)
	sniffed := ""
	if head, _ := body.Peek(sniffLen); len(head) > 0 {
		sniffed, _, _ = strings.Cut(http.DetectContentType(head), ";")
	}
	mime := storedMIME(f.MIME, sniffed)
	mf, err := r.o.Store.StoreMedia(ctx, source, mime, body, r.o.MaxBytes)
	pr.CloseWithError(errStoreStopped)
	cancel()
	fetchErr := <-fetched // the download has stopped: the pipe and its context are closed
	if err != nil {
		if errors.Is(err, core.ErrTooLarge) {
			return mf, err // a platform's own limit says which
		}
		if ctx.Err() != nil || fetchErr == nil || errors.Is(fetchErr, errStoreStopped) || errors.Is(fetchErr, context.Canceled) {
			return mf, err // given up, or the store's own failure (which stopped the download)
		}
		if errors.Is(fetchErr, context.DeadlineExceeded) {
			err = &core.Error{Kind: core.KindTimeout, Msg: fmt.Sprintf("downloading %s took longer than media.download_timeout (%s)", displayName(f.Name), r.o.Timeout), Err: err}
		}
		name := ""
		if f.Name != "" {
			name = path.Base(f.Name)
		}
		return mf, &core.DownloadError{Name: name, Platform: channel, Err: err}
	}
	mf.MIME = mime
	return mf, nil
}

// fit returns image a as a model takes it: as it is when small enough,
// else re-encoded by fitImage in the helper process (Extractor), kept
// in the media store under source+"#fit" (a retry finds it there). why is the sentence for the
// user when it cannot be shown.
func (r *Reader) fit(ctx context.Context, source string, a core.Attachment) (core.Attachment, string, error) {
	if a.MIME == "image/webp" {
		// No WebP decoder here: a sticker is small; a large WebP would
		// be refused by the provider (a 400 that counts against the
		// model), so the user is asked for another format instead.
		if a.Size > maxImageBytes {
			return a, fmt.Sprintf("The image %s is too large for me to look at as WebP (%s); please send it as a JPEG or PNG.", displayName(a.Name), mb(a.Size)), nil
		}
		return a, "", nil
	}
	source += "#fit"
	if mf, ok, err := r.o.Store.MediaBySource(ctx, source); err != nil || ok {
		a.SHA256, a.MIME, a.Size = mf.SHA256, mf.MIME, mf.Size
		return a, "", err
	}
	data, err := r.o.Store.ReadMedia(ctx, a.SHA256)
	if err != nil {
		return a, "", err
	}
	// Only the header is read here: decoding the image (which allocates
	// it whole) is the helper process's work.
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err == nil && !needsFit(a.Size, cfg) || err != nil && a.Size <= maxImageBytes {
		return a, "", nil
	}
	if err != nil {
		return a, fmt.Sprintf("I could not read the image %s: it is not a valid JPEG, PNG or GIF file.", displayName(a.Name)), nil
	}
	if decodeBytes(cfg) > maxDecodeBytes {
		return a, fmt.Sprintf("The image %s is too large for me to look at (%d×%d pixels); please send a smaller one.", displayName(a.Name), cfg.Width, cfg.Height), nil
	}
	if r.o.Extractor == nil {
		return a, fmt.Sprintf("The image %s is too large for me to look at (%d×%d pixels, %s), and I cannot re-encode images here; please send a smaller one.", displayName(a.Name), cfg.Width, cfg.Height, mb(a.Size)), nil
	}
	select {
	case r.extracting <- struct{}{}: // decoding takes memory, as reading a PDF does
		defer func() { <-r.extracting }()
	case <-ctx.Done():
		return a, "", ctx.Err()
	}
	out, err := r.o.Extractor.FitImage(ctx, data)
	var u *Unreadable
	switch {
	case errors.As(err, &u):
		r.log.Info("an image could not be re-encoded", "name", a.Name, "reason", u.Reason)
		return a, fmt.Sprintf("I could not read the image %s: %s. Please send a smaller one.", displayName(a.Name), u.Reason), nil
	case err != nil && ctx.Err() != nil:
		return a, "", err
	case err != nil:
		r.log.Error("re-encoding an image failed on the gateway's side", "name", a.Name, "err", err)
		return a, fmt.Sprintf("I could not read the image %s: re-encoding images failed on my side. Please send a smaller one.", displayName(a.Name)), nil
	}
	mf, err := r.o.Store.StoreMedia(ctx, source, "image/jpeg", bytes.NewReader(out), r.o.MaxBytes)
	if err != nil {
		return a, "", fmt.Errorf("keep the re-encoded image %s: %w", displayName(a.Name), err)
	}
	r.log.Info("an image too large for a model was re-encoded", "name", a.Name, "bytes", a.Size, "width", cfg.Width, "height", cfg.Height, "re_encoded_bytes", mf.Size)
	a.SHA256, a.MIME, a.Size = mf.SHA256, "image/jpeg", mf.Size
	return a, "", nil
}

// errStoreStopped ends a download whose file the media store stopped
// reading (it failed, or the file is over the limit).
var errStoreStopped = errors.New("media store stopped reading")

// storedMIME is the type a file is kept under: the platform's, unless
// it names none (then what its first bytes say), or both say image and
// disagree (the bytes are what a model decodes).
func storedMIME(declared, sniffed string) string {
	switch {
	case declared == "" || declared == "application/octet-stream":
		if sniffed == "" {
			return "application/octet-stream"
		}
		return sniffed
	case strings.HasPrefix(declared, "image/") && strings.HasPrefix(sniffed, "image/"):
		return sniffed
	}
	return declared
}

// sniffLen is how many first bytes name a file's type
// (http.DetectContentType reads at most 512).
const sniffLen = 512

// transcribe returns the transcript of a voice note, made once and kept.
func (r *Reader) transcribe(ctx context.Context, in core.Inbound, a core.Attachment, mf core.MediaFile) (string, error) {
	if mf.HasText {
		return mf.Text, nil
	}
	data, err := r.o.Store.ReadMedia(ctx, a.SHA256)
	if err != nil {
		return "", err
	}
	a.Data = data
	text, err := r.o.Models.Transcribe(ctx, r.o.TranscriptionModel, a, in.Conversation, in.UserID)
	if err != nil {
		return "", err
	}
	if err := r.o.Store.SetMediaText(ctx, a.SHA256, text); err != nil {
		r.log.Warn("keep a transcript", "err", err)
	}
	return text, nil
}

// document returns the text a document adds to the turn, bounded by
// DocumentTokens, or the sentence that answers a document that cannot be
// read. The text kept with the file is bounded too (one byte more than
// the turn takes, so the cut is known).
func (r *Reader) document(ctx context.Context, a core.Attachment, mf core.MediaFile) (text, why string, err error) {
	if !readable(a.MIME, a.Name) {
		return "", cannotRead(a), nil
	}
	max := r.o.DocumentTokens * 4
	text, has := mf.Text, mf.HasText
	if !has {
		data, err := r.o.Store.ReadMedia(ctx, a.SHA256)
		if err != nil {
			return "", "", err
		}
		if isPDF(a.MIME, a.Name) {
			text, err = r.pdfText(ctx, data, max)
			var u *Unreadable
			switch {
			case errors.As(err, &u):
				r.log.Info("a PDF could not be read", "name", a.Name, "reason", u.Reason)
				return "", fmt.Sprintf("I could not read %s: %s. Please send its text instead.", displayName(a.Name), u.Reason), nil
			case err != nil && ctx.Err() != nil:
				return "", "", err
			case err != nil:
				r.log.Error("reading a PDF failed on the gateway's side", "name", a.Name, "err", err)
				return "", fmt.Sprintf("I could not read %s: reading PDFs failed on my side. Please send its text instead.", displayName(a.Name)), nil
			}
		} else {
			text = plainText(data, max)
		}
		if err := r.o.Store.SetMediaText(ctx, a.SHA256, text); err != nil {
			r.log.Warn("keep a document's text", "err", err)
		}
	}
	return bounded(displayName(a.Name), text, max), "", nil
}

// pdfText reads a PDF's text through the Extractor, at most Extractions
// at a time.
func (r *Reader) pdfText(ctx context.Context, data []byte, max int) (string, error) {
	if r.o.Extractor == nil {
		return "", &Unreadable{"PDFs cannot be read here"}
	}
	select {
	case r.extracting <- struct{}{}:
		defer func() { <-r.extracting }()
	case <-ctx.Done():
		return "", ctx.Err()
	}
	text, err := r.o.Extractor.PDFText(ctx, data, max)
	if err != nil {
		return "", err
	}
	return truncateUTF8(strings.ToValidUTF8(text, "\uFFFD"), max+1), nil
}

// bounded frames a document's text for the model, cut at max bytes with
// a note.
func bounded(name, text string, max int) string {
	cut := ""
	if len(text) > max {
		text = truncateUTF8(text, max)
		cut = fmt.Sprintf("\n[… the rest of %s is left out: it is longer than media.document_tokens allows]", name)
	}
	return fmt.Sprintf("Attached file %q:\n<<<\n%s\n>>>%s", name, strings.TrimSpace(text), cut)
}

func joinLines(a, b string) string {
	if a == "" {
		return b
	}
	return a + "\n" + b
}

func displayName(name string) string {
	if name == "" {
		return "the file"
	}
	return path.Base(name)
}

func tooLarge(f core.InboundFile, max int64) string {
	return fmt.Sprintf("%s is too large: it is larger than the %s limit I accept, so I did not download it. Please send a smaller file.", theFile(f), mb(max))
}

// theFile names f in a refusal: "The file x.pdf (30 MB)".
func theFile(f core.InboundFile) string {
	what := "That file"
	if f.Name != "" {
		what = "The file " + path.Base(f.Name)
	}
	if f.Size > 0 {
		what += fmt.Sprintf(" (%s)", mb(f.Size))
	}
	return what
}

// tooLargeFor is the refusal of a download that failed for its size:
// the platform's own limit when it is what refused (err a
// core.PlatformLimit), else media.max_bytes.
func tooLargeFor(f core.InboundFile, max int64, err error) string {
	var pl *core.PlatformLimit
	if !errors.As(err, &pl) {
		return tooLarge(f, max)
	}
	return fmt.Sprintf("%s is too large: %s lets bots download files of at most %s, so I could not download it. Please send a smaller file.", theFile(f), pl.Platform, mb(pl.Max))
}

func cannotRead(a core.Attachment) string {
	kind := a.MIME
	if kind == "" {
		kind = "unknown type"
	}
	return fmt.Sprintf("I cannot read this kind of file (%s, %s): I read plain text, Markdown, code, CSV, JSON and PDF documents, images and voice messages.", displayName(a.Name), kind)
}

func mb(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%d MB", (n+(1<<19))>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%d KB", (n+(1<<9))>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
