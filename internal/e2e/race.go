//go:build race

package e2e

import (
	"os"
	"strings"
)

// Race reports whether the tests, and so the client processes they re-run
// as and the servers of MainRace packages, were built with the race
// detector.
const Race = true

// A race-built process sleeps atexit_sleep_ms (1 s by default) before it
// exits, for reports still being written on other threads. The servers,
// commands and client processes these tests start number in the
// hundreds, and their exits' sleeps were most of the suite's time (pdc
// ping: 1.1 s, 0.1 s without). A race is still reported, and fails its
// test, where it is found. The processes inherit the setting; the test
// binary's own runtime read GORACE before this ran.
func init() {
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		_ = os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
}
