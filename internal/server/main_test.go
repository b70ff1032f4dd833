package server

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Every test ends with the goroutines it started stopped. A test binary
// started with predecessorEnv set plays a server's predecessor instead
// (owner_test.go).
func TestMain(m *testing.M) {
	if os.Getenv(predecessorEnv) != "" {
		os.Exit(playPredecessor())
	}
	goleak.VerifyTestMain(m)
}
