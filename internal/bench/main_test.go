package bench

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test ends with the goroutines it started stopped.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
