package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
)

// pluginBindings is what `opentalon plugins` needs; *store.DB has it.
type pluginBindings interface {
	PluginBindings(ctx context.Context) ([]core.PluginBinding, error)
	PluginUnbind(ctx context.Context, name string) (bool, error)
}

const pluginsUsage = "usage: opentalon plugins list | opentalon plugins unbind NAME"

// cmdPlugins runs `opentalon plugins list|unbind NAME` on the database of
// the config's state.data_dir.
func cmdPlugins(ctx context.Context, g *globalFlags, args []string, stdio Stdio, env config.Env, log *slog.Logger) error {
	args = g.extract(args)
	if len(args) == 0 {
		return subUsageError("plugins", args, "list or unbind", pluginsUsage)
	}
	if err := runPlugins(ctx, argsOnly{}, args, io.Discard); !errors.Is(err, errArgsOK) {
		return err
	}
	_, db, err := openConfigStore(ctx, g, env, log)
	if err != nil {
		return err
	}
	defer db.Close()
	return runPlugins(ctx, db, args, stdio.Out)
}

// runPlugins lists the bindings of plugin names to binaries, or removes
// one so that the next binary registering the name gets it (and the
// plugin state stored under it).
func runPlugins(ctx context.Context, db pluginBindings, args []string, out io.Writer) error {
	switch {
	case args[0] == "list" && len(args) == 1:
		bs, err := db.PluginBindings(ctx)
		if err != nil {
			return err
		}
		if len(bs) == 0 {
			fmt.Fprintln(out, "no plugin has registered yet")
			return nil
		}
		// A name is what its plugin registered with: made safe for the
		// terminal (termText) like every stored text.
		rows := [][]string{{"NAME", "BINARY", "SHA256", "BOUND"}}
		for _, b := range bs {
			rows = append(rows, []string{termText(b.Name), termText(b.Path), termText(fmt.Sprintf("%.12s…", b.SHA256)), b.BoundAt.UTC().Format(time.DateTime)})
		}
		return writeTable(out, rows)
	case args[0] == "unbind" && len(args) == 2:
		name := args[1]
		ok, err := db.PluginUnbind(ctx, name)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("no plugin name %q is bound; `opentalon plugins list` shows the bound names", name)
		}
		fmt.Fprintf(out, "unbound %s: the next binary that registers the name %s takes it, with the state stored under it\n", name, name)
		return nil
	}
	switch args[0] {
	case "list":
		return argCountError("plugins list", args[1:], 0, "", pluginsUsage)
	case "unbind":
		return argCountError("plugins unbind", args[1:], 1, "NAME", pluginsUsage)
	}
	return subUsageError("plugins", args, "list or unbind", pluginsUsage)
}
