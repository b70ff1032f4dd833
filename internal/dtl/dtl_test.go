package dtl_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/pdcgo/pdc/internal/dtl"
	"github.com/pdcgo/pdc/internal/dtl/dtltest"
)

func TestMain(m *testing.M) {
	if peer, err := dtltest.PeerMain(); peer {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func TestConformance(t *testing.T) {
	for _, m := range dtl.Modes {
		t.Run(m.String(), func(t *testing.T) { dtltest.Run(t, m) })
	}
}
