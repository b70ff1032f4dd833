package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pdcgo/pdc"
)

// Path is where a server's metrics are.
const Path = "/metrics"

// Endpoint serves a registry over HTTP.
type Endpoint struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// ListenAddr completes a --metrics-addr: a bare ":port" listens on
// loopback, since the metrics say much about the cluster to whoever
// reaches them; a host given (0.0.0.0 included) is taken as asked.
func ListenAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("metrics address %q: want HOST:PORT or :PORT: %w", addr, pdc.ErrInvalid)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// Serve listens on addr (see ListenAddr) and serves r on Path until
// Close.
func Serve(addr string, r *Registry, log *slog.Logger) (*Endpoint, error) {
	addr, err := ListenAddr(addr)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, promhttp.HandlerFor(r.Gatherer(), promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
		// One scrape at a time: a scrape reads every counter, and
		// several at once only cost the server more.
		MaxRequestsInFlight: 1,
		Timeout:             10 * time.Second,
	}))
	e := &Endpoint{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		ln:   ln,
		done: make(chan error, 1),
	}
	go func() { e.done <- e.srv.Serve(ln) }()
	return e, nil
}

// Addr is the address the endpoint listens on.
func (e *Endpoint) Addr() string { return e.ln.Addr().String() }

// Close stops the endpoint and waits for it, within ctx for scrapes
// under way. Idempotent.
func (e *Endpoint) Close(ctx context.Context) error {
	err := e.srv.Shutdown(ctx)
	if serr := <-e.done; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	e.done <- nil // for the next Close
	return err
}
