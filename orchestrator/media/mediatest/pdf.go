package mediatest

import (
	"bytes"
	"compress/flate"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
)

// Page is one page of a test PDF: its content stream, written as is or
// (Flate) compressed.
type Page struct {
	Content io.Reader
	Flate   bool
	// Raw is the stream's bytes as stored (already compressed).
	Raw []byte
	// Params are more entries of the stream's dictionary.
	Params string
}

// TextPage is a page showing lines of text (Helvetica).
func TextPage(lines ...string) Page {
	var b strings.Builder
	b.WriteString("BT /F1 12 Tf 72 720 Td 14 TL\n")
	for _, l := range lines {
		fmt.Fprintf(&b, "(%s) Tj T*\n", strings.NewReplacer(`\`, `\\`, "(", `\(`, ")", `\)`).Replace(l))
	}
	b.WriteString("ET\n")
	return Page{Content: strings.NewReader(b.String())}
}

// BombPage is a page whose compressed content stream shows one string of
// n MiB of "A": about n KB that expand to n MiB.
func BombPage(n int) Page {
	return Page{Raw: inflateBomb("BT /F1 12 Tf (", 'A', n, ") Tj ET\n"), Flate: true}
}

// inflateBomb is a zlib stream of head, n MiB of c and tail, made
// without compressing n MiB: one MiB of c is compressed after a sync
// flush (so it is byte-aligned, and its references reach only bytes that
// are c) and its blocks are repeated n times.
func inflateBomb(head string, c byte, n int, tail string) []byte {
	var out bytes.Buffer
	out.Write([]byte{0x78, 0xda}) // zlib header: deflate, best compression
	fw, _ := flate.NewWriter(&out, flate.BestCompression)
	mib := bytes.Repeat([]byte{c}, 1<<20)
	fw.Write([]byte(head))
	fw.Write(mib[:64<<10])
	fw.Flush()
	start := out.Len()
	fw.Write(mib)
	fw.Flush()
	block := append([]byte(nil), out.Bytes()[start:]...)
	for range n - 1 {
		out.Write(block)
	}
	// The window is c all along, so the writer goes on as if it wrote
	// all of them.
	fw.Write([]byte(tail))
	fw.Close()
	// Adler-32 of head, 64 KiB + n MiB of c, tail.
	const mod = 65521
	a, b := uint64(1), uint64(0)
	add := func(p []byte) {
		for _, x := range p {
			a = (a + uint64(x)) % mod
			b = (b + a) % mod
		}
	}
	add([]byte(head))
	// k bytes of c: a grows by k*c, b by k*a + c*k*(k+1)/2.
	k := uint64(64<<10 + n<<20)
	b = (b + k%mod*a + uint64(c)*(k*(k+1)/2%mod)) % mod
	a = (a + k%mod*uint64(c)) % mod
	add([]byte(tail))
	return binary.BigEndian.AppendUint32(out.Bytes(), uint32(b<<16|a))
}

// PDF writes a PDF 1.4 file with a correct cross-reference table: a
// catalog, a page tree, one Helvetica font (F1) and the pages.
func PDF(pages ...Page) []byte {
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
		switch {
		case p.Raw != nil:
			data.Write(p.Raw)
			filter = " /Filter /FlateDecode"
		case p.Flate:
			zw, _ := zlib.NewWriterLevel(&data, zlib.BestCompression)
			must(io.Copy(zw, p.Content))
			zw.Close()
			filter = " /Filter /FlateDecode"
		default:
			must(io.Copy(&data, p.Content))
		}
		obj(fmt.Sprintf("<< /Length %d%s %s >>\nstream\n%s\nendstream", data.Len(), filter, p.Params, data.Bytes()))
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

func must(_ int64, err error) {
	if err != nil {
		panic(err)
	}
}
