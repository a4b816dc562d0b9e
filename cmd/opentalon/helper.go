package main

import (
	"slices"

	"github.com/opentalon/opentalon/orchestrator/media"
)

// helperMain runs the binary as one of the helpers the gateway starts in
// a confined process of their own (`opentalon helper pdf-text` and
// `opentalon helper image-fit`, see media.PDFHelper); ok is false when
// args name no helper. It runs before anything else: no config, no
// logger, no database.
func helperMain(args []string, io Stdio) (code int, ok bool) {
	for _, h := range []struct {
		cmd   []string
		serve func(args []string, io Stdio) int
	}{
		{media.PDFHelperCommand, func(args []string, io Stdio) int { return media.ServePDFText(args, io.In, io.Out, io.Err) }},
		{media.ImageHelperCommand, func(args []string, io Stdio) int { return media.ServeImageFit(args, io.In, io.Out, io.Err) }},
	} {
		if len(args) >= len(h.cmd) && slices.Equal(args[:len(h.cmd)], h.cmd) {
			return h.serve(args[len(h.cmd):], io), true
		}
	}
	return 0, false
}
