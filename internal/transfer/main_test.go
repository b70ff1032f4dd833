package transfer

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test ends with the goroutines it started stopped: the placer, and
// the in-process servers of the tests that start them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
