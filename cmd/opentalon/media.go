package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/orchestrator/media"
	"github.com/opentalon/opentalon/plugins"
	"github.com/opentalon/opentalon/routing"
	"github.com/opentalon/opentalon/store"
)

// buildMedia maps the media block onto the reader of the files users
// send. PDFs are read by the binary itself, re-executed as a confined
// helper with the plugins' isolation (plugins.tools.run_as and
// plugins.tools.sandbox.landlock).
func buildMedia(cfg *config.Config, db *store.DB, r *routing.Router, log *slog.Logger, closers *[]func() error) core.MediaReader {
	m := cfg.Media
	return media.New(media.Options{
		Extractor:          pdfExtractor(cfg, log, closers),
		Store:              db,
		Models:             r,
		MaxBytes:           m.MaxBytes,
		Timeout:            m.DownloadTimeout.D(),
		DocumentTokens:     m.DocumentTokens,
		TranscriptionModel: m.Transcription.Model,
		Echo:               m.Transcription.Echo,
		Logger:             log,
	})
}

// pdfExtractor is the PDF reader process: this binary, confined. The
// isolation's close (the private copy of this binary, when run_as cannot
// reach it) joins closers.
func pdfExtractor(cfg *config.Config, log *slog.Logger, closers *[]func() error) media.Extractor {
	exe, err := os.Executable()
	if err != nil {
		log.Warn("PDFs cannot be read: the path of this binary is unknown", "err", err)
		return nil
	}
	tc := cfg.Plugins.Tools
	sb := plugins.Sandbox{RunAs: tc.RunAs, Landlock: tc.Sandbox.Landlock}
	iso, err := plugins.NewIsolation(sb)
	if err != nil {
		log.Warn("the PDF reader runs as the default user instead", "err", err)
		sb.RunAs = ""
		if iso, err = plugins.NewIsolation(sb); err != nil {
			log.Warn("PDFs cannot be read", "err", err)
			return nil
		}
	}
	*closers = append(*closers, iso.Close)
	return media.PDFHelper{Isolation: iso, Path: exe, Logger: log.With("component", "media")}
}

// startMediaSweeper removes the files of the media store unused for
// media.retention, at start and then every hour; stop ends it.
func startMediaSweeper(ctx context.Context, db *store.DB, retention time.Duration, log *slog.Logger) (stop func()) {
	if retention <= 0 {
		return func() {}
	}
	return runEvery(ctx, time.Hour, true, func(ctx context.Context) {
		n, err := db.SweepMedia(ctx, time.Now().Add(-retention))
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("remove old media files", "err", err)
		case n > 0:
			log.Info("removed media files unused past media.retention", "files", n, "media.retention", retention.String())
		}
	})
}

// modelCapabilities are a catalog model's capabilities: the entry's own,
// else vision when the provider's models list says it takes images
// (input: [text, image]).
func modelCapabilities(e config.CatalogEntry, pm config.ProviderModel) []string {
	if len(e.Capabilities) > 0 {
		return e.Capabilities
	}
	for _, in := range pm.Input {
		if in == "image" {
			return []string{config.CapabilityVision, config.CapabilityTools}
		}
	}
	return nil
}
