package lua

import (
	"context"
	"fmt"
	"time"

	"github.com/fsnotify/fsnotify"
)

// settle is how long the watcher waits after the last event before it
// reloads, so an editor's write-rename-chmod sequence is one reload.
const settle = 100 * time.Millisecond

// watch follows Dir with fsnotify and reloads on every create, write,
// rename, remove or chmod in it, until ctx ends. It reports on
// ready whether watching started.
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
		case _, ok := <-w.Events:
			if !ok {
				return
			}
			// Any event: a Kubernetes ConfigMap (or any atomic
			// symlink swap) changes the scripts by renaming its
			// "..data" link, never touching a *.lua name. A reload
			// that finds nothing changed costs a read of the scripts.
			timer.Reset(settle)
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
