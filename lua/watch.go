package lua

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// settle is how long the watcher waits after the last event before it
// reloads, so an editor's write-rename-chmod sequence is one reload.
const settle = 100 * time.Millisecond

// watch follows Dir with fsnotify and reloads on every create, write,
// rename, remove or chmod of a script (reloadsOn), until ctx ends. It
// reports on ready whether watching started.
func (e *Engine) watch(ctx context.Context, ready chan<- error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		ready <- fmt.Errorf("plugins.lua.watch: %w", err)
		return
	}
	defer w.Close()
	if err := w.Add(e.o.Dir); err != nil {
		ready <- fmt.Errorf("plugins.lua.watch: watch %s: %w", e.o.Dir, err)
		return
	}
	ready <- nil
	e.log.Info("watching lua scripts for changes", "dir", e.o.Dir)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if reloadsOn(ev.Name) {
				timer.Reset(settle)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			e.log.Warn("lua script watcher", "err", err)
			// Events may have been lost: look at the directory again.
			timer.Reset(settle)
		case <-timer.C:
			e.reload(ctx)
		}
	}
}

// reloadsOn tells whether an event on name may change the scripts: a
// *.lua file, or a name starting with ".." (a Kubernetes ConfigMap or
// Secret changes its files by renaming its "..data" link to a new
// "..<timestamp>" directory, never touching a *.lua name). Other files
// in the directory (an editor's swap file, a database or a log someone
// keeps there) are left alone: each of their writes would put the
// reload off by another settle, for as long as they are written.
func reloadsOn(name string) bool {
	base := filepath.Base(name)
	return strings.HasSuffix(base, ".lua") || strings.HasPrefix(base, "..")
}
