package main

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"strconv"
	"strings"

	"github.com/opentalon/opentalon/plugins/sdk"
)

type chart struct{}

func (chart) Capabilities() sdk.Capabilities {
	return sdk.Capabilities{
		Name:        "chart",
		Description: "Draws charts as PNG images sent to the user.",
		Actions: []sdk.Action{{Name: "bars", Description: "Draw a bar chart of comma-separated non-negative numbers; the image is sent to the user with the answer.",
			Params: []sdk.Param{{Name: "values", Description: "for example 3,1,4,1,5", Required: true}}}},
	}
}

func (chart) Execute(context.Context, sdk.Call) (string, error) {
	return "", fmt.Errorf("chart makes files; the core calls ExecuteFiles")
}

// ExecuteFiles implements sdk.FilePlugin.
func (chart) ExecuteFiles(_ context.Context, c sdk.Call) (sdk.Result, error) {
	if c.Action != "bars" {
		return sdk.Result{}, fmt.Errorf("unknown action %q: use bars", c.Action)
	}
	vals, err := parse(c.Args["values"])
	if err != nil {
		return sdk.Result{}, err
	}
	img, err := Bars(vals)
	if err != nil {
		return sdk.Result{}, err
	}
	return sdk.Result{Text: fmt.Sprintf("A bar chart of %d values was drawn.", len(vals)),
		Files: []sdk.File{{Name: "chart.png", MIME: "image/png", Data: img}}}, nil
}

func parse(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("values: %q is not a non-negative number", strings.TrimSpace(f))
		}
		out = append(out, v)
	}
	if len(out) == 0 || len(out) > 100 {
		return nil, fmt.Errorf("values: give 1 to 100 numbers")
	}
	return out, nil
}

// Bars draws vals as a 400×240 bar chart PNG.
func Bars(vals []float64) ([]byte, error) {
	const w, h = 400, 240
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.White)
		}
	}
	top := 0.0
	for _, v := range vals {
		top = max(top, v)
	}
	bw := w / len(vals)
	bar := color.RGBA{R: 0x2b, G: 0x6c, B: 0xb0, A: 0xff}
	for i, v := range vals {
		bh := 0
		if top > 0 {
			bh = int(v / top * float64(h-10))
		}
		for x := i*bw + 2; x < (i+1)*bw-2; x++ {
			for y := h - bh; y < h; y++ {
				img.Set(x, y, bar)
			}
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func main() {
	if err := sdk.Serve(chart{}); err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		os.Exit(1)
	}
}
