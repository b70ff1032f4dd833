// Package deletes_test runs deletes end to end: deleted objects refused to
// handles opened before and their files removed, deletes cut by kill -9 of
// the deleting client or of a server, container members that stay through
// kills and resizes and go with what is deleted, large and transient
// containers deleted, and pdc fsck over what they leave.
package deletes_test

import (
	"os"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m, clitest.Role)) }
