// Package search_test runs the tag search tests end to end, against
// real pdc server processes: a package of their own, so that its test
// binary runs beside the other end-to-end packages.
package search_test

import (
	"os"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m, nil)) }
