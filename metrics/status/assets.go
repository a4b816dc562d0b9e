package status

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

//go:embed ui
var ui embed.FS

// asset is one embedded file, kept plain and gzipped.
type asset struct {
	body, gz []byte
	ctype    string
	etag     string
}

// loadAssets reads the embedded files. The page is served as one
// document: app.css and app.js are inlined into index.html (a phone
// makes one request less before it can ask for the data), and the
// Content-Security-Policy allows exactly those two inline blocks by
// their hashes, and nothing from another origin.
func loadAssets() (map[string]asset, string) {
	files := map[string][]byte{}
	entries, _ := fs.ReadDir(ui, "ui")
	for _, e := range entries {
		if b, err := ui.ReadFile("ui/" + e.Name()); err == nil {
			files[e.Name()] = b
		}
	}
	css, js := files["app.css"], files["app.js"]
	page := string(files["index.html"])
	page = strings.Replace(page, `<link rel="stylesheet" href="/ui/app.css">`, "<style>"+string(css)+"</style>", 1)
	page = strings.Replace(page, `<script src="/ui/app.js"></script>`, "<script>"+string(js)+"</script>", 1)
	files["index.html"] = []byte(page)
	csp := "default-src 'none'; script-src '" + hashOf(js) + "'; style-src '" + hashOf(css) +
		"'; img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	out := map[string]asset{}
	for name, b := range files {
		var gz bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
		zw.Write(b)
		zw.Close()
		sum := sha256.Sum256(b)
		ctype := mime.TypeByExtension(path.Ext(name))
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		out[name] = asset{body: b, gz: gz.Bytes(), ctype: ctype, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	return out, csp
}

// hashOf is a CSP source for an inline block with exactly this text.
func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

func (p *Page) serveAsset(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a, ok := p.assets[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.ctype)
		h.Set("Content-Security-Policy", p.csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		h.Add("Vary", "Accept-Encoding")
		if r.Header.Get("If-None-Match") == a.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		body := a.body
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			h.Set("Content-Encoding", "gzip")
			body = a.gz
		}
		w.Write(body)
	}
}
