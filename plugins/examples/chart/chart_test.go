package main

import (
	"bytes"
	"context"
	"image/png"
	"testing"

	"github.com/opentalon/opentalon/plugins/sdk"
)

func TestBarsIsAPNG(t *testing.T) {
	res, err := chart{}.ExecuteFiles(context.Background(), sdk.Call{Action: "bars", Args: map[string]string{"values": "3, 1, 4"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 1 || res.Files[0].MIME != "image/png" || res.Files[0].Name != "chart.png" {
		t.Fatalf("files = %+v; want one chart.png", res.Files)
	}
	img, err := png.Decode(bytes.NewReader(res.Files[0].Data))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 400 || b.Dy() != 240 {
		t.Fatalf("size %v; want 400x240", b)
	}
	if _, err := (chart{}).ExecuteFiles(context.Background(), sdk.Call{Action: "bars", Args: map[string]string{"values": "3, x"}}); err == nil {
		t.Fatal("a value that is not a number was drawn")
	}
}
