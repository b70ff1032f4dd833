package metrics

import (
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/wire"
)

// BenchmarkScrape is the cost of one scrape over HTTP of a registry in
// which every method has answered with every outcome, as a busy server's
// has (pdc bench meta times the same on a server holding a million
// objects).
func BenchmarkScrape(b *testing.B) {
	r := New()
	o := r.Observer()
	for m := range wire.Method(maxMethods) {
		for _, c := range []wire.Code{wire.CodeOK, wire.CodeNotFound, wire.CodeUnavailable} {
			o.Served(m, c, 40*time.Microsecond)
		}
	}
	r.Source(func(w *Writer) {
		w.Gauge("pdc_bench_objects", "Objects.", 1e6)
		w.Counter("pdc_bench_bytes_total", "Bytes.", 1e12, "transport", "lane")
	})
	ep, err := Serve("127.0.0.1:0", r, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer ep.Close(b.Context())
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	url := "http://" + ep.Addr() + Path
	b.ReportAllocs()
	for b.Loop() {
		resp, err := hc.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("%d bytes, %s: %v", n, resp.Status, err)
		}
		b.SetBytes(n)
	}
}
