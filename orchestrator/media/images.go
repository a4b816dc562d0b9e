package media

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	_ "image/gif" // decoders for image.DecodeConfig and image.Decode
	"image/jpeg"
	_ "image/png"
)

// Bounds of an image a model is shown. A photo sent uncompressed (as a
// file) is often larger than a provider takes: Anthropic refuses an
// image over 5 MB (base64) or 8000 pixels a side, OpenAI over 20 MB.
// Such an image is shown re-encoded as a JPEG of at most fitSide pixels
// a side (what both providers scale images down to anyway).
const (
	// maxImageBytes is the largest image sent as it is: 5 MB of base64.
	maxImageBytes = (5 << 20) / 4 * 3
	// maxImageSide is the longest side sent as it is.
	maxImageSide = 8000
	// fitSide is the longest side of a re-encoded image.
	fitSide = 2048
	// maxDecodeBytes bounds the memory decoding one image may take (its
	// pixels at the bytes per pixel of its color model): a larger image
	// is refused before it is decoded.
	maxDecodeBytes = 256 << 20
)

// needsFit says whether an image of this many bytes and these
// dimensions is too large to send as it is.
func needsFit(size int64, cfg image.Config) bool {
	return size > maxImageBytes || cfg.Width > maxImageSide || cfg.Height > maxImageSide
}

// decodeBytes is the memory decoding an image of cfg takes (its pixels
// at the bytes per pixel of its color model), to compare with
// maxDecodeBytes before decoding it.
func decodeBytes(cfg image.Config) int64 {
	return int64(cfg.Width) * int64(cfg.Height) * bytesPerPixel(cfg.ColorModel)
}

// fitImage re-encodes data (JPEG, PNG or GIF; a GIF's first frame) as a
// JPEG of at most fitSide pixels a side and maxImageBytes, transparent
// parts on white. It runs in the helper process (ServeImageFit), never
// in the gateway's: decoding allocates the image whole. An error
// wrapping an *Unreadable is the image's fault.
func fitImage(data []byte) ([]byte, error) {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, &Unreadable{"it is not a valid JPEG, PNG or GIF file"}
	}
	if decodeBytes(cfg) > maxDecodeBytes {
		return nil, &Unreadable{fmt.Sprintf("it is too large to decode (%d×%d pixels)", cfg.Width, cfg.Height)}
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, &Unreadable{"it is not a valid JPEG, PNG or GIF file"}
	}
	small := shrink(img, fitSide)
	var b bytes.Buffer
	for _, q := range []int{85, 70, 50} {
		b.Reset()
		if err := jpeg.Encode(&b, small, &jpeg.Options{Quality: q}); err != nil {
			return nil, fmt.Errorf("re-encode the image: %w", err)
		}
		if b.Len() <= maxImageBytes {
			return b.Bytes(), nil
		}
	}
	return nil, &Unreadable{"even re-encoded it is larger than a model takes"}
}

// bytesPerPixel is what a decoded pixel of a color model takes, at
// most.
func bytesPerPixel(m color.Model) int64 {
	switch m {
	case color.RGBA64Model, color.NRGBA64Model, color.Gray16Model:
		return 8
	}
	return 4
}

// shrink scales img down so neither side exceeds side pixels, averaging
// each target pixel's box of source pixels (one target row at a time),
// with transparent parts on white. An image small enough is copied as
// it is.
func shrink(img image.Image, side int) *image.RGBA {
	r := img.Bounds()
	sw, sh := r.Dx(), r.Dy()
	dw, dh := sw, sh
	if sw > side || sh > side {
		if sw >= sh {
			dw, dh = side, max(1, sh*side/sw)
		} else {
			dw, dh = max(1, sw*side/sh), side
		}
	}
	dst := image.NewRGBA(image.Rect(0, 0, dw, dh))
	sums := make([]uint64, dw*4)
	sy := 0
	for dy := 0; dy < dh; dy++ {
		clear(sums)
		end := (dy + 1) * sh / dh
		for ; sy < end; sy++ {
			for sx := 0; sx < sw; sx++ {
				cr, cg, cb, ca := img.At(r.Min.X+sx, r.Min.Y+sy).RGBA()
				white := 0xffff - ca // premultiplied colour over white
				i := (sx * dw / sw) * 4
				sums[i] += uint64(cr + white)
				sums[i+1] += uint64(cg + white)
				sums[i+2] += uint64(cb + white)
				sums[i+3]++
			}
		}
		for dx := 0; dx < dw; dx++ {
			i := dx * 4
			n := max(sums[i+3], 1)
			dst.SetRGBA(dx, dy, color.RGBA{R: uint8(sums[i] / n >> 8), G: uint8(sums[i+1] / n >> 8), B: uint8(sums[i+2] / n >> 8), A: 0xff})
		}
	}
	return dst
}
