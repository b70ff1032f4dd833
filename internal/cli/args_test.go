package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/cluster"
)

// badArgs runs each command line, with no cluster in the tmpdir, and
// wants a usage error (exit 2) whose message holds want: refused by the
// command line itself, before any cluster is asked (which would fail,
// exit 1, "no server list").
func badArgs(t *testing.T, cases []struct {
	args []string
	want string
}) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("PDC_TMPDIR", dir)
	t.Setenv("PDC_DATA_LOC", dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range cases {
		var out, errb bytes.Buffer
		err := Run(ctx, c.args, &out, &errb)
		if err == nil || ExitCode(err) != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("pdc %s: %v (exit %d); want a usage error (exit 2) naming %q", strings.Join(c.args, " "), err, ExitCode(err), c.want)
		}
	}
}

// A time step or user id past 2^32-1 is refused: wrapped, it named
// another time step's object (pdc obj rm --time-step 4294967296 x
// deleted x of time step 0).
func TestTimeStepAndUserIDInRange(t *testing.T) {
	badArgs(t, []struct {
		args []string
		want string
	}{
		{[]string{"obj", "rm", "--time-step", "4294967296", "x"}, "-time-step"},
		{[]string{"obj", "info", "--time-step", "-1", "x"}, "from 0 to 4294967295"},
		{[]string{"obj", "tag", "ls", "--time-step", "99999999999", "x"}, "-time-step"},
		{[]string{"obj", "create", "--cont", "c", "--dims", "4", "--time-step", "4294967297", "x"}, "-time-step"},
		{[]string{"obj", "create", "--cont", "c", "--dims", "4", "--user-id", "99999999999", "x"}, "-user-id"},
	})
}

// A command that takes no arguments refuses them rather than ignore
// them: pdc status 1 showed every server, pdc obj ls --cont c x every
// object.
func TestNoArgsRefused(t *testing.T) {
	badArgs(t, []struct {
		args []string
		want string
	}{
		{[]string{"status", "1"}, `status: unexpected argument "1"`},
		{[]string{"ping", "2"}, `ping: unexpected argument "2"`},
		{[]string{"checkpoint", "now"}, `checkpoint: unknown verb "now"`},
		{[]string{"checkpoint", "create", "now"}, `checkpoint create: unexpected argument "now"`},
		{[]string{"checkpoint", "ls", "x"}, `checkpoint ls: unexpected argument "x"`},
		{[]string{"checkpoint", "restore"}, `checkpoint restore: want the name of one checkpoint`},
		{[]string{"checkpoint", "restore", "../x"}, `checkpoint name "../x"`},
		{[]string{"checkpoint", "--name", "a/b"}, `checkpoint name "a/b"`},
		{[]string{"version", "x"}, `version: unexpected argument "x"`},
		{[]string{"cont", "ls", "results"}, `cont ls: unexpected argument "results"`},
		{[]string{"obj", "ls", "--cont", "results", "temperature"}, `obj ls: unexpected argument "temperature"`},
	})
}

// A negative duration is refused: --timeout -5s timed every call out at
// once, and the error blamed the servers.
func TestNegativeDurationRefused(t *testing.T) {
	badArgs(t, []struct {
		args []string
		want string
	}{
		{[]string{"status", "--timeout", "-5s"}, "--timeout -5s: want a duration of 0 or more"},
		{[]string{"ping", "--timeout=-1ms"}, "--timeout -1ms"},
		{[]string{"cont", "ls", "--timeout", "-1s"}, "--timeout -1s"},
		{[]string{"get", "--timeout", "-1s", "x", "y"}, "--timeout -1s"},
		{[]string{"down", "--wait", "-1s"}, "--wait -1s"},
	})
}

// A command whose --timeout ran out says so, and how to give it more:
// "pdc: deadline exceeded" alone did not say whose deadline it was. The
// cluster here is one server that accepts connections and never answers.
func TestTimeoutNamesTheFlag(t *testing.T) {
	dir, _ := silentCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{"status", "--tmpdir", dir, "--timeout", "50ms"},
		{"cont", "ls", "--tmpdir", dir, "--timeout", "50ms"},
		{"obj", "info", "--tmpdir", dir, "--timeout", "50ms", "x"},
		{"stage", "ls", "--tmpdir", dir, "--timeout", "50ms"},
		{"stage", "consume", "--tmpdir", dir, "--consumer-dir", dir, "--timeout", "50ms", "f"},
		{"ping", "--tmpdir", dir, "--timeout", "50ms"},
		{"checkpoint", "--tmpdir", dir, "--timeout", "50ms"},
		{"fsck", "--tmpdir", dir, "--timeout", "50ms"},
		{"query", "--tmpdir", dir, "--timeout", "50ms", "k=v"},
		{"down", "--tmpdir", dir, "--timeout", "50ms"},
	} {
		var out, errb bytes.Buffer
		err := Run(ctx, args, &out, &errb)
		if !errors.Is(err, pdc.ErrTimeout) || !strings.Contains(err.Error(), "--timeout 50ms passed") {
			t.Errorf("pdc %s against a server that does not answer: %v; want a timeout naming --timeout 50ms", strings.Join(args, " "), err)
		}
	}
}

// A bad flag is one line, the error, naming the flag and where the flags
// are listed: package flag printed it too, with the usage, four lines
// that said it twice.
func TestBadFlagIsOneLine(t *testing.T) {
	t.Setenv("PDC_TMPDIR", t.TempDir())
	for _, c := range []struct {
		name string
		args []string
	}{
		{"status", []string{"status", "--bogus"}},
		{"status", []string{"status", "--timeout", "abc"}},
		{"obj create", []string{"obj", "create", "--cont", "c", "--dims", "4", "--time-step", "x", "o"}},
		{"stage consume", []string{"stage", "consume", "--timeout", "soon", "f"}},
	} {
		var out, errb bytes.Buffer
		err := Run(context.Background(), c.args, &out, &errb)
		if err == nil || ExitCode(err) != 2 || errb.Len() > 0 || !strings.HasPrefix(err.Error(), c.name+": ") || !strings.Contains(err.Error(), "pdc help "+c.name+" lists its flags") {
			t.Errorf("pdc %s: %v, stderr %q; want only the error, naming the command and pdc help %s", strings.Join(c.args, " "), err, errb.String(), c.name)
		}
	}
}

// A rank or size given must be one: --rank -2 ran a server as rank 0,
// which waited for a rank 1 that was never meant.
func TestServerRankAndSizeGiven(t *testing.T) {
	badArgs(t, []struct {
		args []string
		want string
	}{
		{[]string{"server", "--rank", "-2", "--size", "2", "--startup-timeout", "1s", "--listen", "127.0.0.1:0"}, "--rank -2"},
		{[]string{"server", "--rank", "0", "--size", "0", "--startup-timeout", "1s", "--listen", "127.0.0.1:0"}, "--size 0"},
		{[]string{"server", "--size", "-3", "--startup-timeout", "1s", "--listen", "127.0.0.1:0"}, "--size -3"},
	})
}

// demo takes 1 to 26 servers: -n -1 panicked, -n 5000 started servers
// until the disk was full; and no arguments.
func TestDemoArgs(t *testing.T) {
	badArgs(t, []struct {
		args []string
		want string
	}{
		{[]string{"demo", "-n", "-1"}, "-n -1: want 1 to 26"},
		{[]string{"demo", "-n", "0"}, "-n 0: want 1 to 26"},
		{[]string{"demo", "-n", "27"}, "-n 27: want 1 to 26"},
		{[]string{"demo", "now"}, `demo: unexpected argument "now"`},
	})
}

// ping and checkpoint of a cluster whose servers are gone fail in one
// line that names the command and the servers: the errors joined were
// one a line, without the command's name.
func TestPingAndCheckpointFailInOneLine(t *testing.T) {
	dir := t.TempDir()
	var servers []cluster.Server
	for rank := range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		servers = append(servers, cluster.Server{Rank: rank, Addr: ln.Addr().String(), Roles: "both", PID: os.Getpid(), Host: "h", Start: time.Now()})
		ln.Close()
	}
	if err := cluster.WriteList(dir, &cluster.List{Size: 2, Created: time.Now(), Servers: servers}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ping", "--tmpdir", dir}, "ping: 2 of 2 servers did not answer (" + servers[0].Label() + ", " + servers[1].Label() + ")"},
		{[]string{"checkpoint", "--tmpdir", dir}, "checkpoint: 2 metadata servers failed"},
	} {
		var out, errb bytes.Buffer
		err := Run(ctx, c.args, &out, &errb)
		if !errors.Is(err, pdc.ErrUnavailable) || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("pdc %s with its servers gone: %q; want one line beginning %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}

// up checks --roles itself, before starting servers that each exited
// with it in their logs (exit 1); a bad --metrics-addr or --dashboard
// is a usage error too, not exit 1.
func TestUpChecksRoles(t *testing.T) {
	badArgs(t, []struct {
		args []string
		want string
	}{
		{[]string{"up", "-n", "1", "--roles", "janitor"}, `--roles: unknown role "janitor"`},
		{[]string{"up", "-n", "1", "--metrics-addr", "bogus"}, `--metrics-addr: metrics address "bogus"`},
		{[]string{"up", "-n", "1", "--dashboard", "bogus"}, `--dashboard: metrics address "bogus"`},
	})
}

// A negative --page-size is refused: it was taken as 0 without a word.
func TestNegativePageSize(t *testing.T) {
	badArgs(t, []struct {
		args []string
		want string
	}{
		{[]string{"cont", "ls", "--page-size", "-5"}, "--page-size -5"},
		{[]string{"obj", "ls", "--cont", "c", "--page-size", "-1"}, "--page-size -1"},
	})
}

// stage consume checks --mode as a flag: it failed each file, exit 1.
func TestStageConsumeChecksMode(t *testing.T) {
	badArgs(t, []struct {
		args []string
		want string
	}{
		{[]string{"stage", "consume", "--mode", "foo", "f"}, `--mode: transport mode "foo"`},
	})
}

// --timeout 0 ends a command at once, and its error says so: it said
// "connect: context deadline exceeded", context's own words.
func TestZeroTimeoutNamed(t *testing.T) {
	t.Setenv("PDC_TMPDIR", t.TempDir())
	for _, args := range [][]string{{"status", "--timeout", "0"}, {"cont", "ls", "--timeout", "0"}} {
		var out, errb bytes.Buffer
		err := Run(context.Background(), args, &out, &errb)
		if !errors.Is(err, pdc.ErrTimeout) || !strings.Contains(err.Error(), "--timeout 0s passed") {
			t.Errorf("pdc %s: %v; want a timeout naming --timeout 0s", strings.Join(args, " "), err)
		}
	}
}

// A command whose --timeout ran out against a server that does not answer
// returns without asking that server again: Close used to ask it to
// release the command's opens, on a new connection, for up to two
// seconds more.
func TestTimedOutCommandAsksNoMore(t *testing.T) {
	dir, conns := silentCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{"obj", "info", "--tmpdir", dir, "--timeout", "100ms", "x"},
		{"get", "--tmpdir", dir, "--timeout", "100ms", "x", filepath.Join(dir, "out")},
	} {
		before := conns()
		var out, errb bytes.Buffer
		err := Run(ctx, args, &out, &errb)
		if !errors.Is(err, pdc.ErrTimeout) {
			t.Fatalf("pdc %s against a server that does not answer: %v; want a timeout", strings.Join(args, " "), err)
		}
		n := conns() - before
		if n > 1 {
			t.Errorf("pdc %s: %d connections to the server that did not answer; want the command's one, none after its deadline", strings.Join(args, " "), n)
		}
	}
}

// silentCluster writes, in a new tmpdir, the server list of a one-server
// cluster whose server accepts connections and never answers; conns
// counts the connections it has accepted. It stops with the test.
func silentCluster(t *testing.T) (dir string, conns func() int) {
	t.Helper()
	dir = t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-accepted
		for _, c := range held {
			c.Close()
		}
	})
	l := &cluster.List{Size: 1, Created: time.Now(), Servers: []cluster.Server{{Rank: 0, Addr: ln.Addr().String(), Roles: "both", PID: os.Getpid(), Host: "h", Start: time.Now()}}}
	if err := cluster.WriteList(dir, l); err != nil {
		t.Fatal(err)
	}
	return dir, func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(held)
	}
}

// up takes 1 to maxUpServers servers: -n 4096 was taken, and started
// servers until the disk was full. The refusal is a usage error naming
// the flag and the bound, before anything is touched: the tmpdir here is
// a file, so that an -n the check let through fails (exit 1) at making
// it instead of starting thousands of servers.
func TestUpBoundsServers(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, n := range []string{"0", "-1", "257", "4096"} {
		args := []string{"up", "-n", n, "--tmpdir", notDir, "--datadir", notDir}
		var out, errb bytes.Buffer
		err := Run(ctx, args, &out, &errb)
		want := "up: -n " + n + ": want 1 to 256 servers"
		if err == nil || ExitCode(err) != 2 || !strings.Contains(err.Error(), want) {
			t.Errorf("pdc %s: %v (exit %d); want a usage error (exit 2) saying %q", strings.Join(args, " "), err, ExitCode(err), want)
		}
	}
	// The bound itself is taken: up goes on to make the tmpdir.
	err := Run(ctx, []string{"up", "-n", "256", "--tmpdir", notDir, "--datadir", notDir}, io.Discard, io.Discard)
	if err == nil || ExitCode(err) != 1 || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("pdc up -n 256 with a tmpdir that is a file: %v (exit %d); want -n taken and the tmpdir refused (exit 1)", err, ExitCode(err))
	}
}

// A tag query that does not parse is a usage error (exit 2), found
// before any cluster is asked: it was exit 1, as if the cluster had
// failed, and needed a running cluster to be told.
func TestQuerySyntaxIsAUsageError(t *testing.T) {
	badArgs(t, []struct {
		args []string
		want string
	}{
		{[]string{"query", ""}, `query "": empty query`},
		{[]string{"query", "a="}, `query "a=": empty value`},
		{[]string{"query", "=b"}, `query "=b": empty key`},
		{[]string{"query", "n=.."}, "range with neither end"},
		{[]string{"query", "n=20..10"}, "empty range"},
		{[]string{"query", "a==b"}, `unknown operator "=="`},
		{[]string{"query", "--ids", "**=x"}, `key pattern "**"`},
	})
}

// A value that pdc server or a benchmark cannot take is a usage error
// (exit 2), as docs/CLI.md says: these were exit 1, as if a cluster had
// failed.
func TestFlagValuesAreUsageErrors(t *testing.T) {
	badArgs(t, []struct {
		args []string
		want string
	}{
		{[]string{"server", "--durability", "bogus"}, `--durability: unknown durability "bogus"`},
		{[]string{"server", "--roles", "janitor"}, `--roles: unknown role "janitor"`},
		{[]string{"server", "--rank", "3", "--size", "2"}, "--rank 3, --size 2"},
		{[]string{"bench", "dtl", "--sizes", "bogus"}, `--sizes: size "bogus"`},
		{[]string{"bench", "dtl", "--big", "bogus"}, `--big: size "bogus"`},
		{[]string{"bench", "dtl", "--modes", "bogus"}, `--modes: transport mode "bogus"`},
		{[]string{"bench", "dtl", "--source", "bogus"}, `--source "bogus"`},
		{[]string{"bench", "io", "--size", "bogus"}, `--size: size "bogus"`},
		{[]string{"bench", "io", "--regions", "1KiB,x"}, `--regions: size "x"`},
		{[]string{"bench", "io", "--partitions", "bogus"}, `--partitions: unknown partition "bogus"`},
		{[]string{"bench", "io", "--storage", "bogus"}, `--storage: unknown storage mode "bogus"`},
		{[]string{"bench", "io", "--servers", "0"}, `--servers: "0" is not a positive count`},
		{[]string{"bench", "query", "--size", "bogus"}, `--size: size "bogus"`},
		{[]string{"bench", "query", "--partitions", "bogus"}, `--partitions: unknown partition "bogus"`},
		{[]string{"bench", "query", "--servers", "x"}, `--servers: "x" is not a positive count`},
		{[]string{"bench", "vpic", "--partition", "bogus"}, `--partition: unknown partition "bogus"`},
		{[]string{"bench", "vpic", "--procs", "x"}, `--procs: "x" is not a positive count`},
		{[]string{"bench", "stage", "--sizes", "bogus"}, `--sizes: size "bogus"`},
		{[]string{"bench", "stage", "--modes", "bogus"}, `--modes: transport mode "bogus"`},
		{[]string{"bench", "preload", "--sizes", "bogus"}, `--sizes: size "bogus"`},
		{[]string{"bench", "python", "--size", "bogus"}, `--size: size "bogus"`},
		// Refused before connecting: no cluster runs in this tmpdir.
		{[]string{"obj", "create", "--cont", "c", "--dims", "4", "--partition", "bogus", "x"}, `unknown partition "bogus"`},
		{[]string{"obj", "create", "--cont", "c", "--dims", "4", "--storage", "bogus", "x"}, `unknown storage mode "bogus"`},
		{[]string{"obj", "create", "--cont", "c", "--dims", "4", "--type", "bogus", "x"}, `"bogus"`},
		{[]string{"obj", "create", "--cont", "c", "--dims", "4xq", "x"}, `"4xq"`},
	})
}
