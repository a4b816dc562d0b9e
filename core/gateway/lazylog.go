package gateway

import (
	"context"
	"log/slog"
	"sync"
)

// lazyWith is log.With(args...) whose handler takes the attributes only
// when a record is written: every item's work gets a logger naming the
// request, and most write no line at the level set (a text or JSON
// handler formats the attributes as it takes them). The lines written
// are the same as With's.
func lazyWith(log *slog.Logger, args ...any) *slog.Logger {
	h := log.Handler()
	if h == slog.DiscardHandler {
		return log.With(args...) // nothing to format, ever
	}
	attrs := make([]slog.Attr, 0, len(args)/2)
	for len(args) > 0 {
		var a slog.Attr
		a, args = argAttr(args)
		attrs = append(attrs, a)
	}
	return slog.New(&lazyAttrs{h: h, attrs: attrs})
}

// argAttr is slog's reading of the first attribute of key-value args: a
// string key with the value after it, or an Attr.
func argAttr(args []any) (slog.Attr, []any) {
	switch x := args[0].(type) {
	case string:
		if len(args) == 1 {
			return slog.String("!BADKEY", x), nil
		}
		return slog.Any(x, args[1]), args[2:]
	case slog.Attr:
		return x, args[1:]
	default:
		return slog.Any("!BADKEY", x), args[1:]
	}
}

// lazyAttrs is h with attrs, taken (h.WithAttrs) once a record or a
// further With needs them.
type lazyAttrs struct {
	h     slog.Handler
	attrs []slog.Attr
	once  sync.Once
	with  slog.Handler
}

func (l *lazyAttrs) handler() slog.Handler {
	l.once.Do(func() { l.with = l.h.WithAttrs(l.attrs) })
	return l.with
}

// Enabled is h's: attributes do not change a handler's level.
func (l *lazyAttrs) Enabled(ctx context.Context, level slog.Level) bool {
	return l.h.Enabled(ctx, level)
}

func (l *lazyAttrs) Handle(ctx context.Context, r slog.Record) error {
	return l.handler().Handle(ctx, r)
}

func (l *lazyAttrs) WithAttrs(attrs []slog.Attr) slog.Handler {
	return l.handler().WithAttrs(attrs)
}

func (l *lazyAttrs) WithGroup(name string) slog.Handler {
	return l.handler().WithGroup(name)
}
