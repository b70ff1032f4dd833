// Package slots_test runs end to end, against real pdc server
// processes, the restarts of a cluster with another number of servers:
// region data moves to the servers that hold it now (docs/design/0013),
// whole, through kill -9 at any point of the move. A package of its own,
// so that its test binary runs beside the other end-to-end packages.
package slots_test

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

func clientRole(ctx context.Context, c *client.Client, role string, out *bufio.Writer) error {
	return fmt.Errorf("unknown role %q", role)
}
