package guard

import (
	"bytes"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/core"
)

func pngBytes(t *testing.T) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestCheckKeepsSafeFiles(t *testing.T) {
	p := New(fakeResolver{}, nil, nil)
	call := core.ToolCall{ID: "c1", Plugin: "chart", Action: "bars"}
	img := pngBytes(t)
	res := core.ToolResult{CallID: "c1", Content: "drawn", Files: []core.Attachment{
		{Name: "../../etc/chart.png", MIME: "image/png", Data: img},
		{Name: "evil\x1b[31m.txt", MIME: "not a type", Data: []byte("plain text")},
		{Name: "fake.png", MIME: "image/png", Data: []byte("#!/bin/sh\necho not an image")},
		{Name: "empty.bin", MIME: "application/octet-stream"},
	}}
	out := p.Check(call, res, 0)
	if len(out.Files) != 3 {
		t.Fatalf("%d files kept; want 3 (the empty one dropped)", len(out.Files))
	}
	if f := out.Files[0]; f.Name != "chart.png" || f.MIME != "image/png" || f.Kind != core.MediaImage || !bytes.Equal(f.Data, img) || f.Size != int64(len(img)) {
		t.Fatalf("file 1 = %+v; want chart.png, image/png, its bytes", f)
	}
	if f := out.Files[1]; strings.ContainsAny(f.Name, "\x1b") || !strings.HasPrefix(f.MIME, "text/plain") {
		t.Fatalf("file 2 = %q %q; want a clean name and the type sniffed from the content", f.Name, f.MIME)
	}
	if f := out.Files[2]; f.MIME == "image/png" || f.Kind == core.MediaImage {
		t.Fatalf("a script declared as image/png kept type %q; want the sniffed type", f.MIME)
	}
	if !strings.Contains(out.Content, "chart.png (image/png") || !strings.HasPrefix(out.Content, "[plugin_output]") {
		t.Fatalf("content %q; want the files named inside the plugin_output block", out.Content)
	}
	res.Error = "failed"
	if out := p.Check(call, res, 0); len(out.Files) != 0 {
		t.Fatal("a failed call's files were kept")
	}
	many := core.ToolResult{CallID: "c1"}
	for i := 0; i < MaxFiles+3; i++ {
		many.Files = append(many.Files, core.Attachment{Name: "f.png", MIME: "image/png", Data: img})
	}
	if out := p.Check(call, many, 0); len(out.Files) != MaxFiles {
		t.Fatalf("%d files kept; want at most %d", len(out.Files), MaxFiles)
	}
}
