// Package hostile_test attacks a real pdc server process as a hostile
// or broken client would (oversized length claims, trickled frames,
// floods of half-open connections, garbage before and after the
// handshake) and checks that the server's memory stays within its budget,
// that it keeps answering real clients meanwhile, and that it lives on:
// a package of its own, so that its test binary runs beside the other
// end-to-end packages.
package hostile_test

import (
	"os"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m, nil)) }
