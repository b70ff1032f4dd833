// Package access_test checks what a cluster exposes and to whom, end to
// end: the addresses servers listen on and publish (wildcards,
// --advertise, one --listen for many servers), the cluster secret
// (required beyond loopback, taken by clients, kept by restarted servers,
// refused without it), and files private to their user.
package access_test

import (
	"os"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

// Its tests run no client processes: no roles.
func TestMain(m *testing.M) { os.Exit(e2e.Main(m, nil)) }
