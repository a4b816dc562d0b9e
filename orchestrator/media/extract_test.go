package media

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/metrics"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/orchestrator/media/mediatest"
	"github.com/opentalon/opentalon/plugins"
)

// The test binary doubles as the PDF helper when envPDFHelper is set,
// and as the image helper when its first argument is also "image-fit".
const envPDFHelper = "OPENTALON_TEST_PDF_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(envPDFHelper) == "1" {
		if len(os.Args) > 1 && os.Args[1] == "image-fit" {
			os.Exit(ServeImageFit(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
		}
		os.Exit(ServePDFText(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// testExtractor is the gateway's PDFHelper with the test binary.
func testExtractor(t testing.TB) Extractor {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	iso, err := plugins.NewIsolation(plugins.Sandbox{Landlock: true})
	if err != nil {
		t.Fatal(err)
	}
	// The helper's failures are logged with what it said, for a test
	// that fails to show.
	log := slog.New(slog.NewTextHandler(testLog{t}, nil))
	return PDFHelper{Isolation: iso, Path: exe, Args: []string{}, ImageArgs: []string{"image-fit"}, Env: []string{envPDFHelper + "=1"}, Logger: log}
}

// testLog writes a log to the test's output.
type testLog struct{ t testing.TB }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// allocated is the bytes the process allocated while fn ran.
func allocated(fn func()) uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	fn()
	metrics.Read(s)
	return s[0].Value.Uint64() - before
}

// leastAllocated is allocated's smallest figure over a few runs of fn:
// the counter is the whole process's, and a goroutine another test left
// behind (a server's cleanup, a reader's last read) may allocate while fn
// runs once; it cannot do so in every run, while fn's own allocations are
// in each.
func leastAllocated(fn func()) uint64 {
	least := allocated(fn)
	for i := 0; i < 4 && least > 0; i++ {
		least = min(least, allocated(fn))
	}
	return least
}

// A PDF of a few hundred KB whose one page expands to 256 MB is refused
// with a reason, and the gateway's own process allocates little while it
// is read (in-process, the library took 1.44 GB of heap for a 0.25 MB
// file, and a 1 MB one ended in a fatal out-of-memory error).
func TestPDFBombIsRefused(t *testing.T) {
	bomb := mediatest.PDF(mediatest.TextPage("the cover page"), mediatest.BombPage(256))
	if len(bomb) > 1<<20 {
		t.Fatalf("the bomb has %d bytes; it should be small", len(bomb))
	}
	r := newReader(t, Options{Extractor: testExtractor(t)})
	in := core.Inbound{Conversation: core.ConversationKey{Channel: "telegram", Chat: "1"},
		Files: []core.InboundFile{{ID: "bomb", Kind: core.MediaDocument, Name: "invoice.pdf", MIME: "application/pdf"}}}
	n := 0
	var mi core.MediaInput
	var err error
	alloc := allocated(func() {
		mi, err = r.Read(context.Background(), in, serve(map[string]string{"bomb": string(bomb)}, &n))
	})
	if err != nil || !strings.Contains(mi.Reply, "I could not read invoice.pdf: page 2") || !strings.Contains(mi.Reply, "expand to more than 64 MB") {
		t.Fatalf("Read = %+v, %v; want the bomb refused with its reason", mi, err)
	}
	if alloc > 64<<20 {
		t.Fatalf("the gateway allocated %d MB reading a %d KB PDF; want at most 64 MB", alloc>>20, len(bomb)>>10)
	}
}

// What the helper's own limits stop (memory, CPU time) is answered with
// a reason too; the helper is only a test double of itself here, so the
// limits are tried on bombs made for them.
func TestPDFHelperLimits(t *testing.T) {
	ex := testExtractor(t)
	// Deeply nested arrays make the library recurse until the stack
	// bound ends the helper.
	nested := mediatest.PDF(mediatest.Page{Content: strings.NewReader("BT (x) Tj ET"), Params: "/Nest " + strings.Repeat("[", 4<<20) + strings.Repeat("]", 4<<20)})
	_, err := ex.PDFText(context.Background(), nested, 1000)
	var u *Unreadable
	if !asUnreadable(err, &u) {
		t.Fatalf("nested arrays: %v; want an Unreadable", err)
	}
	// The bomb's stream is good zlib: under the inflate budget the page
	// is read whole.
	small := mediatest.PDF(mediatest.BombPage(2))
	if text, err := ex.PDFText(context.Background(), small, 1000); err != nil || len(text) != 1001 || strings.Trim(text, "A") != "" {
		t.Fatalf("a 2 MiB page = %d bytes %.20q, %v; want 1001 bytes of A", len(text), text, err)
	}
	// A PNG predictor with two billion columns makes the library allocate
	// two gigabytes for a row: the helper's memory limit ends it.
	predictor := mediatest.PDF(mediatest.Page{Content: strings.NewReader("BT (x) Tj ET"), Flate: true, Params: "/DecodeParms << /Predictor 12 /Columns 2000000000 >>"})
	_, err = ex.PDFText(context.Background(), predictor, 1000)
	if !asUnreadable(err, &u) || !strings.Contains(u.Reason, "more memory") {
		t.Fatalf("predictor bomb: %v; want the memory limit as the reason", err)
	}
	// A good PDF still reads.
	text, err := ex.PDFText(context.Background(), mediatest.PDF(mediatest.TextPage("hello", "world")), 1000)
	if err != nil || text != "hello\nworld" {
		t.Fatalf("PDFText = %q, %v", text, err)
	}
	// The text is cut at max+1 bytes.
	long := mediatest.PDF(mediatest.TextPage(strings.Repeat("word ", 1000)))
	if text, err := ex.PDFText(context.Background(), long, 100); err != nil || len(text) != 101 {
		t.Fatalf("PDFText(max 100) = %d bytes, %v; want 101", len(text), err)
	}
}

func asUnreadable(err error, u **Unreadable) bool { return errors.As(err, u) }

// The text of a plain document is decoded only as far as the turn takes
// it: a 20 MB file does not allocate 20 MB more.
func TestPlainTextIsBounded(t *testing.T) {
	data := []byte(strings.Repeat("a\x00b\xff", 5<<20))
	var text string
	alloc := leastAllocated(func() { text = plainText(data, 1000) })
	if len(text) != 1001 || strings.Contains(text, "\x00") || alloc > 64<<10 {
		t.Fatalf("plainText = %d bytes (NUL: %v), allocated %d bytes; want 1001 bytes, no NUL, little allocated", len(text), strings.Contains(text, "\x00"), alloc)
	}
	if got := plainText([]byte("x\x00y"), 10); got != "xy" {
		t.Fatalf("plainText = %q", got)
	}
}

// FuzzPlainText: a document's text is valid UTF-8 without NUL, at most
// max+1 bytes, and costs at most a few times what it returns.
func FuzzPlainText(f *testing.F) {
	f.Add([]byte("hello\x00world\xff\xfe"), 10)
	f.Add([]byte(strings.Repeat("a\x00", 1000)), 100)
	f.Add([]byte("\xe2\x82"), 1)
	f.Fuzz(func(t *testing.T, data []byte, max int) {
		if max < 1 || max > 1<<20 {
			return
		}
		var text string
		alloc := leastAllocated(func() { text = plainText(data, max) })
		if len(text) > max+1 || !utf8.ValidString(text) || strings.ContainsRune(text, 0) {
			t.Fatalf("plainText(%d bytes, %d) = %d bytes %q", len(data), max, len(text), text)
		}
		if alloc > 8*uint64(max)+64<<10 {
			t.Fatalf("plainText(%d bytes, %d) allocated %d", len(data), max, alloc)
		}
	})
}

// Corrupt and hostile PDFs are answered with a reason or read; the
// reader never fails on the gateway's side, and the gateway's own process
// allocates little whatever the file.
func TestCorruptPDFsAreRefusedWithAReason(t *testing.T) {
	ex := testExtractor(t)
	good := mediatest.PDF(mediatest.TextPage("alpha beta"), mediatest.TextPage("gamma"))
	xref := bytes.LastIndex(good, []byte("xref"))
	cases := map[string][]byte{
		"truncated":          good[:len(good)/2],
		"no trailer":         good[:xref],
		"empty":              {},
		"not a pdf":          []byte("GIF89a\x01\x00"),
		"huge page count":    bytes.Replace(good, []byte("/Count 2"), []byte("/Count 2000000000"), 1),
		"huge length":        bytes.Replace(good, []byte("/Length "), []byte("/Length 99999999999"), 1),
		"a page refers back": bytes.Replace(good, []byte("/Parent 2 0 R"), []byte("/Parent 5 0 R"), 1),
		"unknown filter":     bytes.Replace(good, []byte("<< /Length"), []byte("<< /Filter /Nope /Length"), 1),
	}
	for i := 0; i < 8; i++ {
		b := bytes.Clone(good)
		for j := 0; j < 20; j++ {
			b[(i*7919+j*104729)%len(b)] ^= byte(1 + j)
		}
		cases[fmt.Sprintf("bit flips %d", i)] = b
	}
	for name, pdf := range cases {
		var err error
		alloc := allocated(func() { _, err = ex.PDFText(context.Background(), pdf, 1000) })
		var u *Unreadable
		if err != nil && !errors.As(err, &u) {
			t.Errorf("%s: %v; want the text or a reason for the user", name, err)
		}
		if alloc > 16<<20 {
			t.Errorf("%s: the gateway allocated %d MB", name, alloc>>20)
		}
	}
}
