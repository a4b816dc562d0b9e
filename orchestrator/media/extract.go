package media

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/opentalon/opentalon/plugins"
)

// Extractor reads the text of a PDF outside the gateway's process: a
// crafted file can make a PDF library allocate gigabytes or spin, which
// no recover can stop in-process. max is the text wanted: the result has
// at most max+1 bytes (one more than max says there was more). An error
// wrapping an *Unreadable is the file's fault, with a reason for the
// user; any other error is the extractor's own.
type Extractor interface {
	PDFText(ctx context.Context, pdf []byte, max int) (string, error)
	// FitImage re-encodes an image too large for a model (fitImage) the
	// same way, out of process.
	FitImage(ctx context.Context, img []byte) ([]byte, error)
}

// Unreadable is a document that cannot be read; Reason completes "I could
// not read report.pdf: ...".
type Unreadable struct{ Reason string }

func (u *Unreadable) Error() string { return u.Reason }

// PDFHelperCommand is the subcommand the gateway's binary runs as when
// re-executed to read a PDF: `opentalon helper pdf-text` (see
// ServePDFText).
var PDFHelperCommand = []string{"helper", "pdf-text"}

// Limits of the PDF helper process (PDFHelper's defaults).
const (
	// helperMemory is its private writable memory (RLIMIT_DATA), the Go
	// runtime's about 128 MiB included.
	helperMemory = 512 << 20
	helperCPU    = 10 // seconds of CPU time
	helperWall   = 30 * time.Second
)

// exitUnreadable is the helper's exit status for a file it cannot read;
// the reason is the last line of its standard error.
const exitUnreadable = 3

// PDFHelper is the Extractor of the gateway: it runs its own binary
// (Path, with PDFHelperCommand) as a confined process, with the
// protections a plugin gets (plugins.Isolation.RunConfined: the run_as
// user, Landlock, no_new_privs) and bounded memory, CPU time, wall time
// and output. The PDF goes in on its standard input, the text comes out
// on its standard output.
type PDFHelper struct {
	Isolation *plugins.Isolation
	// Path is the gateway's binary (os.Executable()); Args, when set,
	// replace PDFHelperCommand (a test binary's own switch).
	Path string
	Args []string
	// ImageArgs, when set, replace ImageHelperCommand (FitImage's).
	ImageArgs []string
	// Env adds environment entries (a test binary's switch).
	Env    []string
	Logger *slog.Logger
}

// PDFText implements Extractor.
func (h PDFHelper) PDFText(ctx context.Context, pdf []byte, max int) (string, error) {
	args := h.Args
	if args == nil {
		args = PDFHelperCommand
	}
	out, err := h.Isolation.RunConfined(ctx, plugins.ConfinedCmd{
		Path: h.Path, Args: append(args[:len(args):len(args)], "--max-text", strconv.Itoa(max)),
		Env:   append(h.Env[:len(h.Env):len(h.Env)], "GOTRACEBACK=none", "GOMAXPROCS=1"),
		Stdin: pdf, Memory: helperMemory, CPUSeconds: helperCPU, Timeout: helperWall, Output: max + 1,
	}, h.Logger)
	var ce *plugins.ConfinedError
	if errors.As(err, &ce) {
		// The helper reads nothing but the file: whatever ends it early
		// is the file's doing.
		switch {
		case ce.Limit == plugins.LimitMemory:
			return "", &Unreadable{"it needs more memory to read than I allow (its pages expand to far more than the file's size)"}
		case ce.Limit == plugins.LimitCPU || ce.Limit == plugins.LimitTime:
			return "", &Unreadable{"reading it takes longer than I allow"}
		case ce.Code == exitUnreadable && ce.Message != "":
			return "", &Unreadable{ce.Message}
		}
		if h.Logger != nil {
			h.Logger.Warn("the PDF reader process failed on a file", "err", err, "said", ce.Message)
		}
		return "", &Unreadable{"it makes the PDF reader fail"}
	}
	if err != nil {
		return "", fmt.Errorf("the PDF reader: %w", err)
	}
	return string(out), nil
}

// ServePDFText is the helper process: it reads a PDF from in, writes at
// most --max-text+1 bytes of its text to out and returns the exit status:
// 0, exitUnreadable with the reason as the last line written to errw, or
// 2 for a wrong command line. It bounds itself as helperInput says.
func ServePDFText(args []string, in io.Reader, out, errw io.Writer) int {
	fs := flag.NewFlagSet("pdf-text", flag.ContinueOnError)
	fs.SetOutput(errw)
	max := fs.Int("max-text", 32<<10, "bytes of text wanted")
	if err := fs.Parse(args); err != nil || *max <= 0 {
		return 2
	}
	data, ok := helperInput(in, errw)
	if !ok {
		return 1
	}
	text, err := pdfText(data, *max)
	if err != nil {
		return helperFailed(errw, err)
	}
	if _, err := io.WriteString(out, text); err != nil {
		return 1
	}
	return 0
}

// ImageHelperCommand is the subcommand the gateway's binary runs as when
// re-executed to re-encode an image too large for a model: `opentalon
// helper image-fit` (see ServeImageFit). Decoding allocates an image
// whole, and a file of a few KB can declare gigapixels: it is no work
// for the gateway's own process either.
var ImageHelperCommand = []string{"helper", "image-fit"}

// FitImage implements Extractor: the image goes in on the helper's
// standard input, the JPEG comes out on its standard output, under the
// same limits as a PDF's reading.
func (h PDFHelper) FitImage(ctx context.Context, img []byte) ([]byte, error) {
	args := h.ImageArgs
	if args == nil {
		args = ImageHelperCommand
	}
	out, err := h.Isolation.RunConfined(ctx, plugins.ConfinedCmd{
		Path: h.Path, Args: args[:len(args):len(args)],
		Env:   append(h.Env[:len(h.Env):len(h.Env)], "GOTRACEBACK=none", "GOMAXPROCS=1"),
		Stdin: img, Memory: helperMemory, CPUSeconds: helperCPU, Timeout: helperWall, Output: maxImageBytes,
	}, h.Logger)
	var ce *plugins.ConfinedError
	if errors.As(err, &ce) {
		switch {
		case ce.Limit == plugins.LimitMemory:
			return nil, &Unreadable{"it needs more memory to decode than I allow"}
		case ce.Limit == plugins.LimitCPU || ce.Limit == plugins.LimitTime:
			return nil, &Unreadable{"decoding it takes longer than I allow"}
		case ce.Limit == plugins.LimitOutput:
			return nil, &Unreadable{"even re-encoded it is larger than a model takes"}
		case ce.Code == exitUnreadable && ce.Message != "":
			return nil, &Unreadable{ce.Message}
		}
		if h.Logger != nil {
			h.Logger.Warn("the image helper process failed on a file", "err", err, "said", ce.Message)
		}
		return nil, &Unreadable{"it makes the image reader fail"}
	}
	if err != nil {
		return nil, fmt.Errorf("the image helper: %w", err)
	}
	return out, nil
}

// ServeImageFit is the image helper process: it reads an image from in,
// writes it re-encoded by fitImage to out and returns the exit status
// (as ServePDFText's), bounded as that is.
func ServeImageFit(args []string, in io.Reader, out, errw io.Writer) int {
	fs := flag.NewFlagSet("image-fit", flag.ContinueOnError)
	fs.SetOutput(errw)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	data, ok := helperInput(in, errw)
	if !ok {
		return 1
	}
	jpg, err := fitImage(data)
	if err != nil {
		return helperFailed(errw, err)
	}
	if _, err := out.Write(jpg); err != nil {
		return 1
	}
	return 0
}

// helperInput bounds a helper process (one P, its heap below the
// process's memory limit so the collector works harder before the limit
// kills it, its stack) and reads the file it is given; ok=false when the
// reading failed, said on errw.
func helperInput(in io.Reader, errw io.Writer) (data []byte, ok bool) {
	runtime.GOMAXPROCS(1)
	debug.SetMemoryLimit(helperMemory / 2)
	debug.SetMaxStack(64 << 20)
	data, err := io.ReadAll(io.LimitReader(in, 1<<30))
	if err != nil {
		fmt.Fprintln(errw, "reading the file failed:", err)
		return nil, false
	}
	return data, true
}

// helperFailed writes err as the last line on errw and returns the
// helper's exit status: exitUnreadable for an *Unreadable, else 1.
func helperFailed(errw io.Writer, err error) int {
	fmt.Fprintln(errw, strings.ReplaceAll(err.Error(), "\n", " "))
	var u *Unreadable
	if errors.As(err, &u) {
		return exitUnreadable
	}
	return 1
}
