package dashboard

import (
	"io"
	"net"
	"net/http"
	"testing"
)

// TestLoopbackChecksTheHost checks that a dashboard on loopback, which
// asks no token, answers only requests addressed to a loopback name: a
// web page elsewhere whose name is made to resolve to 127.0.0.1 (DNS
// rebinding) would otherwise read the cluster's view from the user's
// browser.
func TestLoopbackChecksTheHost(t *testing.T) {
	s := serveT(t, Config{Addr: "127.0.0.1:0"})
	_, port, err := net.SplitHostPort(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		want int
	}{
		{"127.0.0.1:" + port, http.StatusOK},
		{"localhost:" + port, http.StatusOK},
		{"[::1]:" + port, http.StatusOK},
		{"localhost", http.StatusOK},
		{"evil.example:" + port, http.StatusForbidden},
		{"evil.example", http.StatusForbidden},
		{"127.0.0.1.evil.example:" + port, http.StatusForbidden},
	} {
		for _, path := range []string{"/", "/api/snapshot", "/api/history"} {
			req, err := http.NewRequest(http.MethodGet, "http://"+s.Addr()+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = tc.host
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("GET %s with Host %q: %s, want %d", path, tc.host, resp.Status, tc.want)
			}
		}
	}
}
