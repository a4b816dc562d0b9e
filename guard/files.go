package guard

import (
	"fmt"
	"mime"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/opentalon/opentalon/core"
)

// MaxFiles bounds the files one tool result may carry; MaxFileBytes
// their total size (the platforms' own limits are checked when they are
// sent).
const (
	MaxFiles     = 10
	MaxFileBytes = 25 << 20
)

// checkFiles keeps the files of a result that are safe to send: a plain
// file name (no path, no control characters, at most 100 characters), a
// well-formed media type that matches the content for images, within
// MaxFiles and MaxFileBytes. It returns the kept files and a line naming
// them for the LLM ("" when none).
func (p *Pipeline) checkFiles(call core.ToolCall, in []core.Attachment) ([]core.Attachment, string) {
	var out []core.Attachment
	var names []string
	total := 0
	for i, f := range in {
		if i >= MaxFiles {
			p.log.Warn("plugin result carries too many files; the rest are dropped", "plugin", call.Plugin, "max", MaxFiles)
			break
		}
		if len(f.Data) == 0 {
			continue
		}
		if total+len(f.Data) > MaxFileBytes {
			p.log.Warn("plugin files over the size limit are dropped", "plugin", call.Plugin, "file", i, "limit", MaxFileBytes)
			p.removed("truncated")
			continue
		}
		total += len(f.Data)
		f.Name = fileName(p.sanitizer, f.Name, i)
		f.MIME = mediaType(f.MIME, f.Data)
		f.Kind = core.KindOfMIME(f.MIME)
		f.Size = int64(len(f.Data))
		f.SHA256 = ""
		out = append(out, f)
		names = append(names, fmt.Sprintf("%s (%s, %d bytes)", f.Name, f.MIME, f.Size))
	}
	if len(names) == 0 {
		return nil, ""
	}
	return out, "Files sent to the user with the answer: " + strings.Join(names, ", ")
}

// fileName makes a plugin's file name safe to show and to send.
func fileName(s *Sanitizer, name string, i int) string {
	name = strings.ReplaceAll(name, "\\", "/")
	name = path.Base(name)
	name, err := cleanText(name)
	if err != nil {
		name = ""
	}
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '"' || r == '<' || r == '>' {
			return -1
		}
		return r
	}, s.OneLine(name, 100))
	name = strings.TrimSpace(name)
	if name == "" || name == "." || name == "/" || strings.HasPrefix(name, ".") {
		name = fmt.Sprintf("file-%d%s", i+1, strings.TrimPrefix(name, "."))
	}
	for !utf8.ValidString(name) {
		name = name[:len(name)-1]
	}
	return name
}

// mediaType is the declared type when it is well-formed and, for an
// image, matches the content; else what the content looks like.
func mediaType(declared string, data []byte) string {
	sniffed, _, _ := strings.Cut(http.DetectContentType(data), ";")
	mt, _, err := mime.ParseMediaType(declared)
	if err != nil || !strings.Contains(mt, "/") {
		return sniffed
	}
	if strings.HasPrefix(mt, "image/") && mt != sniffed && mt != "image/svg+xml" {
		return sniffed
	}
	return mt
}
