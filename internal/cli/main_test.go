package cli

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test ends with the goroutines it started stopped. The commands'
// end-to-end tests, with real servers, are in internal/e2e (commands,
// access, durable, deletes, region, bench).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
