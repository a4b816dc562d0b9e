package main

import (
	"slices"

	"github.com/opentalon/opentalon/orchestrator/media"
)

// helperMain runs the binary as one of the helpers the gateway starts in
// a confined process of their own (`opentalon helper pdf-text`, see
// media.PDFHelper); ok is false when args name no helper. It runs before
// anything else: no config, no logger, no database.
func helperMain(args []string, io Stdio) (code int, ok bool) {
	cmd := media.PDFHelperCommand
	if len(args) < len(cmd) || !slices.Equal(args[:len(cmd)], cmd) {
		return 0, false
	}
	return media.ServePDFText(args[len(cmd):], io.In, io.Out, io.Err), true
}
