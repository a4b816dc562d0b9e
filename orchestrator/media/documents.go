package media

import (
	"bytes"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/ledongthuc/pdf"
)

// textTypes are the media types read as plain text besides text/*.
var textTypes = map[string]bool{
	"application/json": true, "application/xml": true, "application/x-yaml": true, "application/yaml": true,
	"application/toml": true, "application/javascript": true, "application/x-javascript": true,
	"application/x-sh": true, "application/sql": true, "application/x-python": true, "application/csv": true,
	"application/ld+json": true, "application/x-ndjson": true,
}

// textExts are file extensions read as plain text whatever the type the
// platform gives (platforms often say application/octet-stream for code).
var textExts = map[string]bool{
	".txt": true, ".md": true, ".markdown": true, ".csv": true, ".tsv": true, ".json": true, ".yaml": true, ".yml": true,
	".toml": true, ".xml": true, ".html": true, ".css": true, ".log": true, ".ini": true, ".cfg": true, ".conf": true,
	".go": true, ".py": true, ".js": true, ".ts": true, ".tsx": true, ".jsx": true, ".java": true, ".kt": true, ".c": true,
	".h": true, ".cpp": true, ".hpp": true, ".cs": true, ".rb": true, ".rs": true, ".php": true, ".swift": true,
	".sh": true, ".bash": true, ".sql": true, ".lua": true, ".r": true, ".scala": true, ".proto": true, ".tex": true,
}

// readable says whether a document of this type or name can be read.
func readable(mime, name string) bool {
	mime = strings.ToLower(mime)
	switch {
	case strings.HasPrefix(mime, "text/"), textTypes[mime], isPDF(mime, name):
		return true
	}
	return textExts[strings.ToLower(path.Ext(name))]
}

func isPDF(mime, name string) bool {
	return strings.EqualFold(mime, "application/pdf") || strings.EqualFold(path.Ext(name), ".pdf")
}

// plainText is data as text: NULs dropped, invalid UTF-8 replaced, and
// at most max+1 bytes (one more than max says there was more). Only
// what it returns is copied, whatever the size of data.
func plainText(data []byte, max int) string {
	b := make([]byte, 0, min(len(data), max+4))
	for len(data) > 0 && len(b) <= max+3 {
		i := bytes.IndexByte(data, 0)
		if i < 0 {
			i = len(data)
		}
		n := min(i, max+4-len(b))
		b = append(b, data[:n]...)
		data = data[n:]
		if n == i && len(data) > 0 {
			data = data[1:] // the NUL
		}
	}
	return truncateUTF8(strings.ToValidUTF8(string(b), "\uFFFD"), max+1)
}

// Bounds of one PDF's extraction (in the helper process).
const (
	// maxPDFPages is how many pages are looked at.
	maxPDFPages = 10000
	// maxInflate bounds the bytes the compressed streams text extraction
	// reads (pages' contents, fonts' character maps) may expand to, all
	// together.
	maxInflate = 64 << 20
)

// unreadable is a file's own fault, with the reason for the user.
func unreadable(format string, a ...any) error {
	return &Unreadable{Reason: fmt.Sprintf(format, a...)}
}

// pdfText extracts the text of a PDF page by page with
// github.com/ledongthuc/pdf (pure Go, no cgo, BSD-licensed, derived from
// rsc.io/pdf), stopping once more than max bytes are read; the result is
// at most max+1 bytes. Every compressed stream a page's text is read
// from is first inflated into nothing, counting, so a page that would
// expand past maxInflate is refused before the library holds it. The
// library panics on some malformed files; that is an error here. It runs
// in the helper process (ServePDFText), whose memory and CPU time are
// bounded too.
func pdfText(data []byte, max int) (text string, err error) {
	defer func() {
		if p := recover(); p != nil {
			text, err = "", unreadable("it is a malformed PDF (%v)", p)
		}
	}()
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return "", unreadable("it is not a readable PDF (%v)", err)
	}
	var b strings.Builder
	budget := int64(maxInflate)
	for i := 1; i <= min(r.NumPage(), maxPDFPages) && b.Len() <= max; i++ {
		p := r.Page(i)
		if p.V.IsNull() {
			continue
		}
		if err := inflated(p, &budget); err != nil {
			return "", unreadable("page %d: %v", i, err)
		}
		t, err := p.GetPlainText(nil)
		if err != nil {
			return "", unreadable("page %d cannot be read (%v)", i, err)
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(strings.TrimSpace(t))
	}
	if strings.TrimSpace(b.String()) == "" {
		return "", unreadable("the PDF has no text (a scan?)")
	}
	return truncateUTF8(strings.ToValidUTF8(b.String(), "\uFFFD"), max+1), nil
}

// inflated decompresses, into nothing, the streams GetPlainText reads of
// page p (its contents and its fonts' character maps) and takes their
// size from budget; it fails once the budget is spent.
func inflated(p pdf.Page, budget *int64) error {
	streams := []pdf.Value{}
	c := p.V.Key("Contents")
	if c.Kind() == pdf.Array {
		for i := 0; i < c.Len(); i++ {
			streams = append(streams, c.Index(i))
		}
	} else {
		streams = append(streams, c)
	}
	for _, name := range p.Fonts() {
		streams = append(streams, p.Font(name).V.Key("ToUnicode"))
	}
	for _, s := range streams {
		if s.Kind() != pdf.Stream {
			continue
		}
		rd := s.Reader()
		n, err := io.Copy(io.Discard, io.LimitReader(rd, *budget+1))
		rd.Close()
		*budget -= n
		if *budget < 0 {
			return fmt.Errorf("its compressed streams expand to more than %d MB", maxInflate>>20)
		}
		if err != nil {
			return fmt.Errorf("a compressed stream is broken: %w", err)
		}
	}
	return nil
}

// truncateUTF8 cuts s to at most n bytes at a rune boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
