// Package stage_test runs the file staging tests end to end, against
// real pdc server processes on hosts of their own: a package of its own,
// so that its test binary runs beside the other end-to-end packages.
package stage_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m, clientRole)) }

// clientRole is this test binary run as a client process (e2e.ClientProc).
func clientRole(ctx context.Context, c *client.Client, role string, out *bufio.Writer) error {
	if role == "stage-stall" {
		return stageStallRole(ctx, c, out)
	}
	return fmt.Errorf("unknown role %q", role)
}
