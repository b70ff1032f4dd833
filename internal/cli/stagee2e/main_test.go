// Package stagee2e_test runs the file staging tests end to end, against
// real pdc server processes on hosts of their own: a package of its own,
// so that its test binary runs beside the other end-to-end packages.
package stagee2e_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m, clientRole)) }

// clientRole runs this test binary as a client process (e2e.ClientProc).
func clientRole(role string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := client.Connect(ctx, client.WithTmpDir(os.Getenv("PDC_TMPDIR")))
	if err != nil {
		return err
	}
	defer c.Close()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	if role == "stage-stall" {
		return stageStallRole(ctx, c, out)
	}
	return fmt.Errorf("unknown role %q", role)
}
