package media

import (
	"context"
	"errors"
	"os"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/orchestrator/media/mediatest"
	"github.com/opentalon/opentalon/plugins"
)

// The test binary doubles as the PDF helper when envPDFHelper is set.
const envPDFHelper = "OPENTALON_TEST_PDF_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(envPDFHelper) == "1" {
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
	return PDFHelper{Isolation: iso, Path: exe, Args: []string{}, Env: []string{envPDFHelper + "=1"}}
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
	alloc := allocated(func() { text = plainText(data, 1000) })
	if len(text) != 1001 || strings.Contains(text, "\x00") || alloc > 64<<10 {
		t.Fatalf("plainText = %d bytes (NUL: %v), allocated %d bytes; want 1001 bytes, no NUL, little allocated", len(text), strings.Contains(text, "\x00"), alloc)
	}
	if got := plainText([]byte("x\x00y"), 10); got != "xy" {
		t.Fatalf("plainText = %q", got)
	}
}
