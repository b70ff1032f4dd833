package bench_test

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/e2e"
)

// `pdc bench-raw-source`, started by hand as `bench io --cluster --raw`
// asks (its stdin /dev/null, as under nohup or a launcher), serves until
// it is interrupted. Before, it took the end of its stdin for its parent
// leaving and exited as soon as it had printed its address.
func TestRawSourceStartedByHandServesUntilInterrupted(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	cmd := exec.Command(e2e.Bin(), "bench-raw-source", "--listen", "127.0.0.1:0")
	cmd.Stdin = null
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("no address: %v", err)
	}
	// Asked twice, on connections made one after the other: the second
	// comes after the source has had every chance to exit.
	for i := range 2 {
		c, err := net.DialTimeout("tcp", strings.TrimSpace(addr), 10*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Write(binary.LittleEndian.AppendUint64(nil, 1<<20)); err != nil {
			t.Fatalf("connection %d: ask: %v", i, err)
		}
		if n, err := io.Copy(io.Discard, io.LimitReader(c, 1<<20)); n != 1<<20 {
			t.Fatalf("connection %d: read %d of 1 MiB: %v", i, n, err)
		}
		c.Close()
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after SIGTERM: %v", err)
	}
}
