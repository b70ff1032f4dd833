package crashloop

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test ends with the goroutines it started stopped. The crash loop
// itself, with real processes, runs in internal/e2e/crashloop.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
