package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/rpc"
)

// Formats are the values of --log-format.
const (
	Text = "text"
	JSON = "json"
)

// New returns a logger writing records at level and above to w in format
// (Text or JSON; "" is Text). A record logged with a context that
// carries a trace id gets a "trace" attribute, unless it has one.
func New(w io.Writer, format string, level slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch format {
	case Text, "":
		h = slog.NewTextHandler(w, opts)
	case JSON:
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("log format %q: want text or json: %w", format, pdc.ErrInvalid)
	}
	return slog.New(traceHandler{h}), nil
}

// traceHandler adds the trace id of a record's context.
type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := rpc.TraceOf(ctx); id != 0 && !hasTrace(r) {
		r = r.Clone()
		r.AddAttrs(rpc.TraceAttr(id))
	}
	return h.Handler.Handle(ctx, r)
}

func hasTrace(r slog.Record) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		found = a.Key == "trace"
		return !found
	})
	return found
}

func (h traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(as)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.Handler.WithGroup(name)}
}
