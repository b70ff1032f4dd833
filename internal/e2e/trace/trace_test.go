package trace_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
)

// record is a line of a server's JSON log.
type record map[string]any

// readLog reads the JSON records of path, failing on a line that is not
// one (a record split by rotation, or text).
func readLog(t *testing.T, path string) []record {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs []record
	for l := range strings.Lines(string(b)) {
		var r record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%s: not a JSON record: %q: %v", path, l, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// One cluster, logging JSON at debug level into files of at most 16 KiB:
// a region write made by `pdc put --verbose` shows its trace id on the
// client's standard error, and the same id names its placement on the
// metadata server and its store on the data server; enough requests to
// fill the files several times over rotate them, keeping two; and long
// commands draw their progress on a terminal, and none to a pipe.
func TestTraceRotationProgress(t *testing.T) {
	tmpdir := e2e.Up(t, 2, "--log-format", "json", "--log-level", "debug", "--log-max-size", "16KiB", "--log-keep", "2")
	logs := []string{cluster.LogFile(tmpdir, 0), cluster.LogFile(tmpdir, 1)}

	t.Run("a region write's id in the client and both servers", func(t *testing.T) { checkRegionWriteTraced(t, tmpdir, logs) })

	t.Run("logs rotate by size, two kept", func(t *testing.T) { checkRotation(t, tmpdir, logs) })

	t.Run("progress on a terminal, none to a pipe", func(t *testing.T) { checkProgress(t, tmpdir) })
}

// maxSize is the cluster's --log-max-size.
const maxSize = 16 << 10

func checkRegionWriteTraced(t *testing.T, tmpdir string, logs []string) {
	e2e.MustRun(t, "cont", "create", "--tmpdir", tmpdir, "traced")
	e2e.MustRun(t, "obj", "create", "--tmpdir", tmpdir, "--cont", "traced", "--dims", "1024", "--partition", "region-dynamic", "o")
	file := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(file, make([]byte, 4*256), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e2e.Run(t, nil, "put", "--tmpdir", tmpdir, "--verbose", "o", "--region", "256:512", file)
	if r.Err != nil {
		t.Fatalf("pdc put: %v\n%s", r.Err, r.Stderr)
	}
	m := regexp.MustCompile(`trace=([0-9a-f]{16})`).FindStringSubmatch(r.Stderr)
	if m == nil {
		t.Fatalf("pdc put --verbose printed no trace id:\n%s", r.Stderr)
	}
	id := m[1]
	seen := map[string]record{}
	for _, path := range logs {
		for _, rec := range readLog(t, path) {
			if method, _ := rec["method"].(string); rec["trace"] == id {
				seen[method] = rec
			}
		}
	}
	place, store := seen["region_place"], seen["data_start"]
	if place == nil || store == nil {
		t.Fatalf("trace %s: requests logged %v; want its region_place and its data_start", id, seen)
	}
	for _, rec := range []record{place, store} {
		if rec["region"] != "[256:512]" || rec["object"] == nil || rec["duration"] == nil || rec["level"] != "DEBUG" {
			t.Fatalf("trace %s: record %v does not name the object, region [256:512] and duration", id, rec)
		}
	}
	if store["op"] != "write" {
		t.Fatalf("data_start of trace %s: %v", id, store)
	}
}

func checkRotation(t *testing.T, tmpdir string, logs []string) {
	c := e2e.Connect(t, tmpdir)
	ctx := e2e.Ctx(t, time.Minute)
	// A request logs some 200 bytes: 400 fill a file five times.
	for range 400 {
		if _, err := c.Ping(ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
	path := logs[0]
	if _, err := os.Stat(path + ".3"); !os.IsNotExist(err) {
		t.Fatalf("%s.3 is there (%v); --log-keep 2 keeps two", path, err)
	}
	pings := 0
	for _, p := range []string{path + ".2", path + ".1", path} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("not rotated: %v", err)
		}
		if fi.Size() > maxSize {
			t.Fatalf("%s holds %d bytes, over --log-max-size %d", p, fi.Size(), maxSize)
		}
		for _, rec := range readLog(t, p) {
			if rec["method"] == "ping" {
				pings++
			}
		}
	}
	if pings < 2*maxSize/300 {
		t.Fatalf("%d pings logged in the three files; the rotated ones should be full of them", pings)
	}
	t.Logf("%d pings in the kept logs", pings)
}

func checkProgress(t *testing.T, tmpdir string) {
	for _, args := range [][]string{
		{"fsck", "--tmpdir", tmpdir},
		{"bench", "rpc", "--rounds", "1", "--duration", "20ms", "--case", "64 in flight"},
	} {
		name := strings.Join(args[:2], " ")
		want := map[string]string{"fsck": "fsck: checking every block on the data servers", "bench": "bench rpc: round 1 of 1 ... "}[args[0]]
		screen := onTerminal(t, args...)
		if !strings.Contains(screen, "\r"+want) {
			t.Errorf("pdc %s on a terminal drew no %q status line:\n%q", name, want, screen)
		}
		r := e2e.Run(t, nil, args...)
		if r.Err != nil {
			t.Fatalf("pdc %s: %v\n%s", name, r.Err, r.Stderr)
		}
		if out := r.Stdout + r.Stderr; strings.Contains(out, "\r") || strings.Contains(out, want) {
			t.Errorf("pdc %s to a pipe drew progress:\n%q", name, out)
		}
	}
	// pdc up, which waits for servers that may move data first. (Its
	// pipe is every other test's: the gate is the one checked above.)
	dir := t.TempDir()
	screen := onTerminal(t, "up", "-n", "1", "--tmpdir", filepath.Join(dir, "tmp"), "--datadir", filepath.Join(dir, "data"))
	e2e.Cleanup(t, filepath.Join(dir, "tmp"))
	if !strings.Contains(screen, "\rup: starting 1 server ... ") {
		t.Errorf("pdc up on a terminal drew no status line:\n%q", screen)
	}
}

// onTerminal runs pdc with args on a pseudo-terminal and returns what it
// drew there.
func onTerminal(t *testing.T, args ...string) string {
	t.Helper()
	ptm, pts := e2e.OpenPTY(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2e.CommandBin(t, args...), args...)
	cmd.Stdout, cmd.Stderr = pts, pts
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close() // the child has it
	var screen strings.Builder
	r := bufio.NewReader(ptm)
	for {
		b, err := r.ReadByte()
		if err != nil {
			break // EIO once the child has exited and closed the terminal
		}
		screen.WriteByte(b)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("pdc %s: %v\n%s", strings.Join(args, " "), err, screen.String())
	}
	return screen.String()
}
