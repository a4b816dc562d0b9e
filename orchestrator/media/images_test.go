package media

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/core"
)

// noisePNG is a PNG of w×h random pixels: it does not compress.
func noisePNG(t *testing.T, w, h int) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range img.Pix {
		img.Pix[i] = byte(rnd.Uint32())
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// flatPNG is a PNG of w×h pixels of one colour: small however large.
func flatPNG(t *testing.T, w, h int) []byte {
	img := image.NewGray(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = 0x80
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// pngHeader is only the signature and header of a w×h PNG: what an image
// declaring more pixels than it holds starts with.
func pngHeader(w, h uint32) []byte {
	ihdr := make([]byte, 17)
	copy(ihdr, "IHDR")
	binary.BigEndian.PutUint32(ihdr[4:], w)
	binary.BigEndian.PutUint32(ihdr[8:], h)
	ihdr[12], ihdr[13] = 8, 6 // 8-bit RGBA
	out := append([]byte("\x89PNG\r\n\x1a\n"), 0, 0, 0, 13)
	out = append(out, ihdr...)
	return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(ihdr))
}

// TestReaderFitsLargeImages: an image sent uncompressed (as a file) that
// is larger than a provider takes (Anthropic: 5 MB of base64, 8000
// pixels a side) reaches the model re-encoded as a JPEG of at most 2048
// pixels a side; a small one is left as it is; one too large to decode
// is refused with a sentence, before it is decoded.
func TestReaderFitsLargeImages(t *testing.T) {
	heavy := noisePNG(t, 1400, 1100) // about 6 MB
	if len(heavy) <= maxImageBytes {
		t.Fatalf("the heavy PNG is %d bytes; the test needs more than %d", len(heavy), maxImageBytes)
	}
	small := flatPNG(t, 640, 480)
	files := map[string]string{
		"heavy": string(heavy), "wide": string(flatPNG(t, 9000, 10)), "small": string(small),
		"bomb": string(pngHeader(30000, 30000)),
	}
	tests := []struct {
		id       string
		wantMIME string
		wantW    int
		wantH    int
		wantSame []byte
		refusal  string
	}{
		{id: "heavy", wantMIME: "image/jpeg", wantW: 1400, wantH: 1100},
		{id: "wide", wantMIME: "image/jpeg", wantW: 2048, wantH: 2},
		{id: "small", wantMIME: "image/png", wantW: 640, wantH: 480, wantSame: small},
		{id: "bomb", refusal: "too large for me to look at (30000×30000 pixels)"},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			r := newReader(t, Options{MaxBytes: 20 << 20, Models: models{vision: true}, Extractor: testExtractor(t)})
			n := 0
			in := core.Inbound{Conversation: core.ConversationKey{Channel: "telegram", Chat: "1"}, Text: "look",
				Files: []core.InboundFile{{ID: tt.id, Kind: core.MediaImage, Name: tt.id + ".png", MIME: "image/png", Size: int64(len(files[tt.id]))}}}
			for try := 0; try < 2; try++ { // a retry finds what the first read kept
				mi, err := r.Read(context.Background(), in, serve(files, &n))
				if err != nil {
					t.Fatal(err)
				}
				if tt.refusal != "" {
					if !strings.Contains(mi.Reply, tt.refusal) {
						t.Fatalf("reply %q; want %q", mi.Reply, tt.refusal)
					}
					return
				}
				if mi.Reply != "" || len(mi.Attachments) != 1 {
					t.Fatalf("Read = %+v; want the image", mi)
				}
				a := mi.Attachments[0]
				data, err := r.o.Store.ReadMedia(context.Background(), a.SHA256)
				if err != nil {
					t.Fatal(err)
				}
				if a.MIME != tt.wantMIME || a.Size != int64(len(data)) || a.Size > maxImageBytes {
					t.Fatalf("attachment %s of %d bytes (stored %d); want %s within %d bytes", a.MIME, a.Size, len(data), tt.wantMIME, maxImageBytes)
				}
				if tt.wantSame != nil && !bytes.Equal(data, tt.wantSame) {
					t.Fatal("a small image was changed")
				}
				cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
				if err != nil || "image/"+format != a.MIME || cfg.Width != tt.wantW || cfg.Height != tt.wantH {
					t.Fatalf("image %s %d×%d (%v); want %s %d×%d", format, cfg.Width, cfg.Height, err, tt.wantMIME, tt.wantW, tt.wantH)
				}
			}
			if n != 1 {
				t.Errorf("%d downloads; want one", n)
			}
		})
	}
}

// TestShrinkPutsTransparencyOnWhite: a transparent pixel becomes white
// (JPEG has no alpha), an opaque one keeps its colour.
func TestShrinkPutsTransparencyOnWhite(t *testing.T) {
	img := image.NewNRGBA(image.Rect(0, 0, 2, 1))
	img.Set(0, 0, color.NRGBA{A: 0})
	img.Set(1, 0, color.NRGBA{R: 255, A: 255})
	out := shrink(img, 2048)
	if c := out.RGBAAt(0, 0); c != (color.RGBA{255, 255, 255, 255}) {
		t.Errorf("transparent pixel = %v; want white", c)
	}
	if c := out.RGBAAt(1, 0); c != (color.RGBA{255, 0, 0, 255}) {
		t.Errorf("red pixel = %v; want red", c)
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, out, nil); err != nil {
		t.Fatal(err)
	}
}

// TestImageIsDecodedOutOfProcess: an image re-encoded for a model is
// decoded in the helper process, not the gateway's: a PNG of a few KB
// whose header declares 8 million pixels (within maxDecodeBytes) costs
// the gateway little memory. In-process, decoding alone took 8 MB, and
// a hostile image could take hundreds, with no limit on CPU time.
func TestImageIsDecodedOutOfProcess(t *testing.T) {
	wide := flatPNG(t, 8001, 1000)
	if len(wide) > 1<<20 {
		t.Fatalf("the PNG has %d bytes; it should be small", len(wide))
	}
	r := newReader(t, Options{Models: models{vision: true}, Extractor: testExtractor(t)})
	in := core.Inbound{Conversation: core.ConversationKey{Channel: "telegram", Chat: "1"}, Text: "look",
		Files: []core.InboundFile{{ID: "wide", Kind: core.MediaImage, Name: "wide.png", MIME: "image/png", Size: int64(len(wide))}}}
	n := 0
	var mi core.MediaInput
	var err error
	alloc := allocated(func() {
		mi, err = r.Read(context.Background(), in, serve(map[string]string{"wide": string(wide)}, &n))
	})
	if err != nil || mi.Reply != "" || len(mi.Attachments) != 1 || mi.Attachments[0].MIME != "image/jpeg" {
		t.Fatalf("Read = %+v, %v; want the image re-encoded as a JPEG", mi, err)
	}
	if alloc > 4<<20 {
		t.Fatalf("the gateway allocated %d MB re-encoding a %d KB image; want at most 4 MB", alloc>>20, len(wide)>>10)
	}
}

// TestFitImageRefusesBeforeDecoding: the helper itself refuses an image
// whose header declares more pixels than maxDecodeBytes allows, or that
// is not an image, with a reason; without a helper, a large image is
// refused with a sentence rather than sent to a provider that refuses it.
func TestFitImageRefusesBeforeDecoding(t *testing.T) {
	for _, tt := range []struct {
		data []byte
		want string
	}{
		{pngHeader(30000, 30000), "too large to decode (30000×30000 pixels)"},
		{[]byte("not an image at all"), "not a valid JPEG, PNG or GIF file"},
	} {
		_, err := fitImage(tt.data)
		var u *Unreadable
		if !asUnreadable(err, &u) || !strings.Contains(u.Reason, tt.want) {
			t.Errorf("fitImage = %v; want an Unreadable saying %q", err, tt.want)
		}
	}
	r := newReader(t, Options{Models: models{vision: true}})
	wide := flatPNG(t, 9000, 10)
	in := core.Inbound{Conversation: core.ConversationKey{Channel: "telegram", Chat: "1"}, Text: "look",
		Files: []core.InboundFile{{ID: "wide", Kind: core.MediaImage, Name: "wide.png", MIME: "image/png", Size: int64(len(wide))}}}
	n := 0
	mi, err := r.Read(context.Background(), in, serve(map[string]string{"wide": string(wide)}, &n))
	if err != nil || !strings.Contains(mi.Reply, "I cannot re-encode images here") {
		t.Fatalf("Read = %+v, %v; want the image refused with a sentence", mi, err)
	}
}

// TestLargeWebPIsRefused: a WebP image (no decoder here) too large for a
// provider is refused with a sentence, not sent to a model that answers
// 400; a small one (a sticker) is sent as it is.
func TestLargeWebPIsRefused(t *testing.T) {
	small := "RIFF\x24\x00\x00\x00WEBPVP8 \x18\x00\x00\x00 a small sticker"
	large := small + strings.Repeat("x", maxImageBytes)
	files := map[string]string{"small": small, "large": large}
	for id, want := range map[string]string{"small": "", "large": "too large for me to look at as WebP"} {
		r := newReader(t, Options{Models: models{vision: true}, Extractor: testExtractor(t)})
		in := core.Inbound{Conversation: core.ConversationKey{Channel: "telegram", Chat: "1"}, Text: "look",
			Files: []core.InboundFile{{ID: id, Kind: core.MediaImage, Name: id + ".webp", MIME: "image/webp", Size: int64(len(files[id]))}}}
		n := 0
		mi, err := r.Read(context.Background(), in, serve(files, &n))
		if err != nil {
			t.Fatal(err)
		}
		if want == "" && (mi.Reply != "" || len(mi.Attachments) != 1 || mi.Attachments[0].MIME != "image/webp") {
			t.Errorf("%s: Read = %+v; want the WebP image sent as it is", id, mi)
		}
		if want != "" && !strings.Contains(mi.Reply, want) {
			t.Errorf("%s: reply %q; want %q", id, mi.Reply, want)
		}
	}
}
