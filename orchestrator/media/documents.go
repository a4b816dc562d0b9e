package media

import (
	"bytes"
	"errors"
	"fmt"
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

// plainText is data as text: invalid UTF-8 replaced, NULs dropped.
func plainText(data []byte) string {
	data = bytes.ReplaceAll(data, []byte{0}, nil)
	return strings.ToValidUTF8(string(data), "\uFFFD")
}

// pdfText extracts the text of a PDF page by page with
// github.com/ledongthuc/pdf (pure Go, no cgo, BSD-licensed, derived from
// rsc.io/pdf), stopping once max bytes are read. The library panics on
// some malformed files; that is an error here.
func pdfText(data []byte, max int) (text string, err error) {
	defer func() {
		if p := recover(); p != nil {
			text, err = "", fmt.Errorf("malformed PDF: %v", p)
		}
	}()
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return "", fmt.Errorf("not a readable PDF: %w", err)
	}
	var b strings.Builder
	for i := 1; i <= r.NumPage() && b.Len() <= max; i++ {
		p := r.Page(i)
		if p.V.IsNull() {
			continue
		}
		t, err := p.GetPlainText(nil)
		if err != nil {
			return "", fmt.Errorf("page %d: %w", i, err)
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(strings.TrimSpace(t))
	}
	if strings.TrimSpace(b.String()) == "" {
		return "", errors.New("the PDF has no text (a scan?)")
	}
	return strings.ToValidUTF8(b.String(), "\uFFFD"), nil
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
