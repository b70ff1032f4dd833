package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/pdcgo/pdc/internal/bench"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/metrics"
)

// scrapes is how many times scrapeFigure scrapes, and its ceiling reads.
const scrapes = 21

// scrapeFigure times scrapes of rank 0's metrics while it holds total
// objects: each a GET that reads the whole text, as Prometheus does. Its
// ceiling is a GET of a static body of the same size from a plain HTTP
// server on loopback: what moving the bytes costs. The figure is the
// median; the slowest scrape goes in the target column.
func scrapeFigure(ctx context.Context, tmpdir string, total int) (bench.Result, error) {
	m, err := cluster.Dir{Path: tmpdir}.ReadMetricsAddr(0)
	if err != nil {
		return bench.Result{}, fmt.Errorf("scrape: rank 0's metrics address: %w", err)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	url := "http://" + m.Addr + metrics.Path
	body, _, err := timedGet(ctx, hc, url) // and warms the connection
	if err != nil {
		return bench.Result{}, err
	}
	got, err := timedGets(ctx, hc, url)
	if err != nil {
		return bench.Result{}, err
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return bench.Result{}, err
	}
	static := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) })}
	served := make(chan error, 1)
	go func() { served <- static.Serve(ln) }()
	defer func() {
		_ = static.Close()
		<-served
	}()
	staticURL := "http://" + ln.Addr().String() + "/"
	if _, _, err := timedGet(ctx, hc, staticURL); err != nil {
		return bench.Result{}, err
	}
	ceil, err := timedGets(ctx, hc, staticURL)
	if err != nil {
		return bench.Result{}, err
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	r := bench.Result{Bench: "meta", Case: fmt.Sprintf("metrics scrape holding %d objects", total),
		Value: ms(median(got)), Unit: "ms", Ceiling: "static page of the same size", CeilingValue: ms(median(ceil)),
		Target: fmt.Sprintf("< 100 ms (slowest %.1f ms of %d; %d KiB)", ms(slices.Max(got)), scrapes, len(body)>>10)}
	if r.Value > 0 {
		r.Ratio = r.CeilingValue / r.Value
	}
	return r, nil
}

// timedGets GETs url scrapes times, one after another.
func timedGets(ctx context.Context, hc *http.Client, url string) ([]time.Duration, error) {
	out := make([]time.Duration, scrapes)
	for i := range out {
		_, d, err := timedGet(ctx, hc, url)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

// timedGet reads the whole body of a GET of url, and how long it took.
func timedGet(ctx context.Context, hc *http.Client, url string) ([]byte, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, err
	}
	t0 := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	d := time.Since(t0)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = errors.New(resp.Status)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("scrape %s: %w", url, err)
	}
	return body, d, nil
}
