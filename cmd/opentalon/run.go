package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
)

// logFileName is the log of an interactive console session, in the data
// directory; logMaxBytes is the size past which a new session starts it
// afresh (the previous one kept as opentalon.log.1).
const (
	logFileName = "opentalon.log"
	logMaxBytes = 10 << 20
)

// cmdRun implements `opentalon run`, the gateway. When the console is the
// only channel and talks to a terminal, the terminal shows the
// conversation only: the log goes to <data_dir>/opentalon.log, named in
// one line at the start.
func cmdRun(ctx context.Context, g *globalFlags, args []string, io Stdio, env config.Env, log *slog.Logger) error {
	rest, err := parseSub("run", g, args, io, nil)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageError{fmt.Sprintf("run takes no arguments, got %q; usage: opentalon [run]", rest)}
	}
	cfg, src, err := loadConfig(g, env)
	if err != nil {
		return operatorError{err}
	}
	interactive := consoleOnly(cfg) && isTerminal(io.In) && isTerminal(io.Out)
	logPath := ""
	if interactive {
		f, err := openLogFile(cfg.State.DataDir)
		if err != nil {
			return asOperatorError(err)
		}
		defer f.Close()
		if log, err = newLogger(f, g.logFormat, firstNonEmpty(g.logLevel, getenv(env, "OPENTALON_LOG_LEVEL"))); err != nil {
			return err
		}
		logPath = f.Name()
	}
	if !hasControllingTerminal() {
		defer keepRunningOnHangup(log)()
	}
	log.Info("config loaded", "source", src)
	app, err := buildRunApp(ctx, cfg, AppOptions{Stdin: io.In, Stdout: io.Out, Interactive: interactive, Logger: log})
	if err != nil {
		return startFailed(ctx, log, err)
	}
	defer app.Close()
	if err := checkProvidersAtStart(ctx, cfg, log, io.Err, interactive); err != nil {
		return startFailed(ctx, log, err)
	}
	if interactive {
		model, _ := cfg.ResolveModel(cfg.Routing.Primary)
		// The bound address: with port 0 the OS picks the port.
		addr, err := app.Listen()
		if err != nil {
			return asOperatorError(err)
		}
		page := ""
		if host, port, err := net.SplitHostPort(addr); err == nil {
			if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
				host = "127.0.0.1"
			}
			page = " · status page http://" + net.JoinHostPort(host, port) + "/"
		}
		fmt.Fprintf(io.Err, "OpenTalon on the console · model %s · logs in %s%s · Ctrl-D quits\n", model, logPath, page)
	}
	return asOperatorError(app.Run(ctx))
}

// keepRunningOnHangup makes SIGHUP a warning for the gateway that runs as
// a service: by default it killed the process at once, without the
// graceful shutdown, and a service manager counts that death as a clean
// exit (systemd's Restart=on-failure does not restart it), so an operator
// who sent it to reload the config found the bot down. The config is read
// once, at start: the warning says to restart. It is for a process with
// no controlling terminal only (a service, a container), where a SIGHUP
// is always one somebody sent; on a terminal it is the hang-up (the
// window closed, the SSH session ended) and still ends the gateway,
// whatever its channels, rather than leave it running unseen and
// holding the data directory. The returned stop restores the default.
func keepRunningOnHangup(log *slog.Logger) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ch:
				log.Warn("SIGHUP ignored: opentalon reads its config only at start and keeps running with it; " +
					"restart it to apply a change (systemctl restart opentalon; SIGTERM stops it gracefully)")
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}

// hasControllingTerminal says whether this process has a controlling
// terminal, whose hang-up the kernel signals with SIGHUP: /dev/tty opens
// only then.
func hasControllingTerminal() bool {
	fd, err := unix.Open("/dev/tty", unix.O_RDONLY|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// startFailed is the outcome of run when its start-up failed with err:
// none when it was stopped (SIGTERM) meanwhile — while it waited for its
// database or another replica's migration, say — since that is what was
// asked, whatever the interrupted step then said (logged).
func startFailed(ctx context.Context, log *slog.Logger, err error) error {
	if ctx.Err() != nil {
		log.Info("stopped during start-up", "err", err.Error())
		return nil
	}
	return asOperatorError(err)
}

// checkProvidersAtStart asks the providers whether they answer and serve
// the catalog's models (checkProviders). With the console as the only
// channel it waits for the answer: a provider that cannot be reached or
// refuses the key ends the run at once with the variable or key to fix,
// instead of a "Sorry" after the retries. With chat platforms the check
// runs in the background and only logs, since messages wait in the queue
// for a provider that comes back. Warnings also go to the terminal of an
// interactive console, whose log is in a file.
func checkProvidersAtStart(ctx context.Context, cfg *config.Config, log *slog.Logger, stderr io.Writer, interactive bool) error {
	if !consoleOnly(cfg) {
		go func() {
			// Once the gateway is up: the check does not slow its start.
			if !afterStart(ctx) {
				return
			}
			for _, p := range checkProviders(ctx, cfg, providerCheckTimeout) {
				if ctx.Err() == nil {
					log.Warn(p.String())
				}
			}
		}()
		return nil
	}
	problems := checkProviders(ctx, cfg, providerCheckTimeout)
	// A warning on the terminal goes through termText: it quotes what the
	// provider answered (the ids of the models it lists, its HTTP status
	// line), and a provider, or what answers at its address, could put an
	// escape sequence there.
	var fatal []providerProblem
	for _, p := range problems {
		if p.Fatal {
			fatal = append(fatal, p)
			continue
		}
		log.Warn(p.String())
		if interactive {
			fmt.Fprintln(stderr, "warning:", termText(p.String()))
		}
	}
	// The console has nothing to answer with only when every provider
	// fails: failover uses the others.
	if err := everyProviderFails(cfg, fatal); err != nil {
		return err
	}
	for _, p := range fatal {
		log.Warn(p.String())
		if interactive {
			fmt.Fprintln(stderr, "warning:", termText(p.String()))
		}
	}
	return nil
}

// everyProviderFails is the error of the first fatal problem when every
// configured provider has one (nothing can answer), else nil: a refused
// credential is KindAuth, anything else KindUnavailable.
func everyProviderFails(cfg *config.Config, fatal []providerProblem) error {
	if len(fatal) == 0 || len(fatal) != len(cfg.Models.Providers) {
		return nil
	}
	p := fatal[0]
	kind := core.KindUnavailable
	if p.Refused {
		kind = core.KindAuth
	}
	// The error is printed on stderr, a terminal as a rule, and quotes
	// what the provider answered (its HTTP status line): termText, as
	// for the warnings.
	return core.Errorf(kind, "%s", termText(p.String()))
}

// openLogFile opens <dir>/opentalon.log for appending (0600), starting it
// afresh when it grew past logMaxBytes.
func openLogFile(dir string) (*os.File, error) {
	if err := makeDataDir(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, logFileName)
	if fi, err := os.Stat(path); err == nil && fi.Size() > logMaxBytes {
		os.Rename(path, path+".1")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the log file %s (state.data_dir): %w", path, err)
	}
	return f, nil
}

// isTerminal reports whether v is a file open on a terminal.
func isTerminal(v any) bool {
	f, ok := v.(interface{ Fd() uintptr })
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
