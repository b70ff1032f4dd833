package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/vfs"
)

// predecessorEnv makes the test binary hold a rank's lock as a server of
// that rank would (PDC_TEST_PREDECESSOR=datadir,rank,tmpdir,host), say
// "locked", and exit once its stdin closes.
const predecessorEnv = "PDC_TEST_PREDECESSOR"

func playPredecessor() int {
	var dataDir, tmpdir, host string
	var rank int
	parts := strings.Split(os.Getenv(predecessorEnv), ",")
	if len(parts) != 4 {
		return 2
	}
	dataDir, tmpdir, host = parts[0], parts[2], parts[3]
	if _, err := fmt.Sscan(parts[1], &rank); err != nil {
		return 2
	}
	lock, rec := ownerPaths(dataDir, rank)
	l, err := vfs.OrDefault(nil).Lock(lock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer l.Close()
	b, _ := json.Marshal(owner{Version: ownerVersion, PID: os.Getpid(), Rank: rank, TmpDir: tmpdir, Host: host, Started: time.Now().UTC().Format(time.RFC3339)})
	if err := os.WriteFile(rec, b, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// logLines is a slog handler that sends each record's message.
type logLines chan string

func (l logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l logLines) Handle(_ context.Context, r slog.Record) error {
	select {
	case l <- r.Message:
	default:
	}
	return nil
}
func (l logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logLines) WithGroup(string) slog.Handler      { return l }

// A server restarted while the previous server of its rank is still
// exiting (killed with -9, its address space being taken down) waits for
// that process to end and takes the lock; a lock held by another
// cluster's server is refused at once, naming it.
func TestStartWaitsForItsExitingPredecessor(t *testing.T) {
	for _, c := range []struct {
		name     string
		otherDir bool // the holder serves another cluster
	}{{"same cluster", false}, {"another cluster", true}} {
		t.Run(c.name, func(t *testing.T) {
			dataDir, tmpdir := t.TempDir(), t.TempDir()
			holderTmp := tmpdir
			if c.otherDir {
				holderTmp = t.TempDir()
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0])
			cmd.Env = append(os.Environ(), predecessorEnv+"="+strings.Join([]string{dataDir, "1", holderTmp, "node-a"}, ","))
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			defer stdin.Close()
			if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "locked\n" {
				t.Fatalf("predecessor: %q, %v", line, err)
			}

			lines := make(logLines, 16)
			p := &proc{cfg: Config{DataDir: dataDir, Rank: 1, TmpDir: tmpdir, Host: "node-a"}, log: slog.New(lines)}
			defer p.close()
			done := make(chan error, 1)
			go func() { done <- p.lockDataDir(ctx) }()
			select {
			case msg := <-lines:
				if c.otherDir {
					t.Fatalf("waited for another cluster's server: %s", msg)
				}
				stdin.Close() // the predecessor ends now
				if err := <-done; err != nil {
					t.Fatalf("after the predecessor exited: %v", err)
				}
			case err := <-done:
				if !c.otherDir {
					t.Fatalf("did not wait for the exiting predecessor: %v", err)
				}
				if !errors.Is(err, pdc.ErrExists) || !strings.Contains(err.Error(), fmt.Sprintf("in use by pid %d", cmd.Process.Pid)) {
					t.Fatalf("lock of another cluster's server: %v, want ErrExists naming pid %d", err, cmd.Process.Pid)
				}
			case <-ctx.Done():
				t.Fatal("lockDataDir hung")
			}
			if _, err := os.Stat(filepath.Join(dataDir, "owner-1")); err != nil {
				t.Fatal(err)
			}
		})
	}
}
