package metastore

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// leftStuck holds, for each store a test leaves stuck on purpose, the
// goroutines that were running once it was stuck. A store whose MANIFEST
// fsync failed cannot be closed (pebble would end the process), so its
// goroutines stay, as they would in a server waiting for its restart;
// every other goroutine a test starts must be stopped by its end.
var leftStuck []goleak.Option

// leaveStuck records the goroutines now running as those of a store left
// stuck on purpose. The tests of this package do not run in parallel, so
// no other test's goroutines are among them.
func leaveStuck() { leftStuck = append(leftStuck, goleak.IgnoreCurrent()) }

// Every test ends with the goroutines it started stopped, but for those
// of the stores left stuck on purpose.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(leftStuck...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
