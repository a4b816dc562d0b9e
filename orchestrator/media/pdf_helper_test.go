package media

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"io"
	"strings"
	"testing"
)

// pdfPage is one page of a test PDF: its content stream, written as is
// or (flate) compressed.
type pdfPage struct {
	content io.Reader
	flate   bool
}

// textPage is a page showing lines of text.
func textPage(lines ...string) pdfPage {
	var b strings.Builder
	b.WriteString("BT /F1 12 Tf 72 720 Td 14 TL\n")
	for _, l := range lines {
		fmt.Fprintf(&b, "(%s) Tj T*\n", strings.NewReplacer(`\`, `\\`, "(", `\(`, ")", `\)`).Replace(l))
	}
	b.WriteString("ET\n")
	return pdfPage{content: strings.NewReader(b.String())}
}

// bombPage is a page whose compressed content stream shows one string
// of n bytes: a few hundred KB that expand to n.
func bombPage(n int64) pdfPage {
	return pdfPage{content: io.MultiReader(strings.NewReader("BT /F1 12 Tf ("), io.LimitReader(repeatReader('A'), n), strings.NewReader(") Tj ET\n")), flate: true}
}

type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// buildPDF writes a PDF 1.4 file with a correct cross-reference table:
// a catalog, a page tree, one Helvetica font and the pages.
func buildPDF(t testing.TB, pages ...pdfPage) []byte {
	t.Helper()
	var out bytes.Buffer
	var offsets []int
	obj := func(body string) int {
		offsets = append(offsets, out.Len())
		n := len(offsets)
		fmt.Fprintf(&out, "%d 0 obj\n%s\nendobj\n", n, body)
		return n
	}
	out.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
	// 1 catalog, 2 pages, 3 font; then per page: content, page.
	kids := make([]string, len(pages))
	for i := range pages {
		kids[i] = fmt.Sprintf("%d 0 R", 5+2*i)
	}
	obj("<< /Type /Catalog /Pages 2 0 R >>")
	obj(fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(pages)))
	obj("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	for _, p := range pages {
		var data bytes.Buffer
		filter := ""
		if p.flate {
			zw, _ := zlib.NewWriterLevel(&data, zlib.BestCompression)
			if _, err := io.Copy(zw, p.content); err != nil {
				t.Fatal(err)
			}
			zw.Close()
			filter = " /Filter /FlateDecode"
		} else if _, err := io.Copy(&data, p.content); err != nil {
			t.Fatal(err)
		}
		obj(fmt.Sprintf("<< /Length %d%s >>\nstream\n%s\nendstream", data.Len(), filter, data.Bytes()))
		obj(fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", len(offsets)))
	}
	xref := out.Len()
	fmt.Fprintf(&out, "xref\n0 %d\n0000000000 65535 f \n", len(offsets)+1)
	for _, o := range offsets {
		fmt.Fprintf(&out, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&out, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(offsets)+1, xref)
	return out.Bytes()
}
