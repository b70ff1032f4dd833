package commands_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
)

// The command line as a new user meets it (issue 32): help of every kind
// without a cluster, and on one small cluster, commands that say what
// they did or will not do.
func TestCommandLine(t *testing.T) {
	// Cases of the issue, as processes; every command and verb is walked
	// in process by internal/cli's TestHelpEverywhere (pdc obj -h and
	// pdc stage -h among them).
	t.Run("help without a cluster", func(t *testing.T) { checkHelpWithoutCluster(t) })

	producer := t.TempDir()
	tmpdir := e2e.Up(t, 2, "--metrics-addr", "127.0.0.1:0", "--stage-producer-dir", producer)
	e2e.MustRun(t, "cont", "create", "--tmpdir", tmpdir, "full", "empty")
	e2e.MustRun(t, "obj", "create", "--tmpdir", tmpdir, "--cont", "full", "--dims", "4x4", "--type", "int64", "a", "b")

	t.Run("cont rm needs --recursive", func(t *testing.T) { checkContRmNeedsRecursive(t, tmpdir) })

	t.Run("tag put says what it did", func(t *testing.T) { checkTagPutSays(t, tmpdir) })

	t.Run("completion asks the cluster", func(t *testing.T) { checkCompletion(t, tmpdir) })

	t.Run("json", func(t *testing.T) { checkJSON(t, tmpdir, producer) })

	t.Run("cont rm --recursive", func(t *testing.T) { checkContRmRecursive(t, tmpdir) })

	t.Run("a data dir in use names its cluster", func(t *testing.T) { checkDataDirInUse(t, tmpdir) })

	// Last: it stops the cluster.
	t.Run("down with a dead rank names the transient containers left", func(t *testing.T) { checkDownNamesLeftovers(t, tmpdir) })
}

// The cases of help, as processes.
func checkHelpWithoutCluster(t *testing.T) {
	env := []string{"PDC_TMPDIR=" + t.TempDir()}
	for _, tc := range []struct {
		args    []string
		want    []string // in stdout
		notWant string
	}{
		{[]string{"cont", "-h"}, []string{"Usage: pdc cont VERB", "create", "Examples:"}, ""},
		{[]string{"obj", "tag", "-h"}, []string{"Usage: pdc obj tag put NAME KEY VALUE", "--time-step"}, "--dims"},
		{[]string{"bench", "--help"}, []string{"Usage: pdc bench WHAT", "rpc", "preload", "soak", "compare"}, ""},
	} {
		r := e2e.Run(t, env, tc.args...)
		if r.Err != nil || r.Stderr != "" {
			t.Errorf("pdc %s: %v, stderr %q; want help, exit 0", strings.Join(tc.args, " "), r.Err, r.Stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(r.Stdout, w) {
				t.Errorf("pdc %s: no %q in:\n%s", strings.Join(tc.args, " "), w, r.Stdout)
			}
		}
		if tc.notWant != "" && strings.Contains(r.Stdout, tc.notWant) {
			t.Errorf("pdc %s: %q in:\n%s", strings.Join(tc.args, " "), tc.notWant, r.Stdout)
		}
	}
}

func checkContRmNeedsRecursive(t *testing.T, tmpdir string) {
	r := e2e.Run(t, nil, "cont", "rm", "--tmpdir", tmpdir, "empty", "full")
	if r.Err == nil || !strings.Contains(r.Stderr, "full holds 2 objects") || !strings.Contains(r.Stderr, "--recursive") {
		t.Fatalf("cont rm of a container of 2 objects: %v, stderr %q; want a refusal naming the count and --recursive", r.Err, r.Stderr)
	}
	// Nothing went, not even the empty one named first.
	if out := e2e.MustRun(t, "cont", "ls", "--tmpdir", tmpdir); !strings.Contains(out, "empty ") || !strings.Contains(out, "full ") {
		t.Fatalf("a refused cont rm deleted a container:\n%s", out)
	}
	e2e.MustRun(t, "obj", "info", "--tmpdir", tmpdir, "a")
	if out := e2e.MustRun(t, "cont", "rm", "--tmpdir", tmpdir, "empty"); out != "deleted container empty and its 0 objects\n" {
		t.Errorf("cont rm of an empty container said %q", out)
	}
}

func checkTagPutSays(t *testing.T, tmpdir string) {
	out := e2e.MustRun(t, "obj", "tag", "put", "--tmpdir", tmpdir, "a", "step", "12", "int64")
	if out != "put tag step = 12 (int64) on object a\n" {
		t.Errorf("obj tag put said %q", out)
	}
	out = e2e.MustRun(t, "cont", "tag", "put", "--tmpdir", tmpdir, "full", "units", "kelvin")
	if out != "put tag units = kelvin (string) on container full\n" {
		t.Errorf("cont tag put said %q", out)
	}
}

func checkCompletion(t *testing.T, tmpdir string) {
	env := []string{"PDC_TMPDIR=" + tmpdir}
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"obj", "info", ""}, "a\nb\n"},
		{[]string{"obj", "tag", "get", "a", ""}, "step\n"},
		{[]string{"cont", "tag", "rm", "--tmpdir", tmpdir, "full", "u"}, "units\n"},
	} {
		r := e2e.Run(t, env, append([]string{"__complete"}, tc.words...)...)
		if r.Err != nil || r.Stdout != tc.want {
			t.Errorf("complete %q: %v, %q; want %q", tc.words, r.Err, r.Stdout, tc.want)
		}
	}
}

func checkContRmRecursive(t *testing.T, tmpdir string) {
	if out := e2e.MustRun(t, "cont", "rm", "--recursive", "--tmpdir", tmpdir, "full"); out != "deleted container full and its 2 objects\n" {
		t.Errorf("cont rm --recursive said %q", out)
	}
	if r := e2e.Run(t, nil, "obj", "info", "--tmpdir", tmpdir, "a"); r.Err == nil {
		t.Errorf("object a outlived its container's rm --recursive")
	}
}

func checkDataDirInUse(t *testing.T, tmpdir string) {
	list, err := cluster.ReadList(tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	r := e2e.Run(t, nil, "up", "-n", "1", "--tmpdir", filepath.Join(t.TempDir(), "tmp"), "--datadir", e2e.ServerDataDir(t, tmpdir), "--timeout", "30s")
	abs, _ := filepath.Abs(tmpdir)
	if r.Err == nil || !strings.Contains(r.Stderr, "the cluster in "+abs) || !strings.Contains(r.Stderr, fmt.Sprintf("pid %d", list.Servers[0].PID)) {
		t.Errorf("up on a data dir in use: %v, stderr:\n%s\nwant it to name the cluster in %s and pid %d", r.Err, r.Stderr, abs, list.Servers[0].PID)
	}
}

// It stops the cluster: the last step.
func checkDownNamesLeftovers(t *testing.T, tmpdir string) {
	names := []string{"t0", "t1", "t2", "t3", "t4", "t5"}
	e2e.MustRun(t, append([]string{"cont", "create", "--transient", "--tmpdir", tmpdir}, names...)...)
	onLive := 0
	for _, line := range strings.Split(strings.TrimSpace(e2e.MustRun(t, "cont", "ls", "--json", "--tmpdir", tmpdir)), "\n") {
		var c struct {
			Name   string `json:"name"`
			Server int    `json:"server"`
		}
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("cont ls --json: %q: %v", line, err)
		}
		if c.Server == 0 && strings.HasPrefix(c.Name, "t") {
			onLive++
		}
	}
	list, err := cluster.ReadList(tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	dead := list.Servers[1]
	if err := syscall.Kill(dead.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitExit(e2e.Ctx(t, 10*time.Second), dead.PID); err != nil {
		t.Fatal(err)
	}
	r := e2e.Run(t, nil, "down", "--tmpdir", tmpdir)
	if r.Err != nil || !strings.Contains(r.Stdout, "stopped 1 server") {
		t.Fatalf("down with rank 1 dead: %v\n%s%s", r.Err, r.Stdout, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "the transient containers of "+dead.Label()+" could not be listed") {
		t.Errorf("down does not say rank 1's transient containers are unknown:\n%s", r.Stderr)
	}
	// Those of rank 0 were deleted or are named, with the command.
	var deleted int
	var left []string
	for _, line := range strings.Split(r.Stderr, "\n") {
		if _, after, ok := strings.Cut(line, "(deleted "); ok {
			fmt.Sscanf(after, "%d", &deleted)
		}
		if after, ok := strings.CutPrefix(line, "pdc down: left: "); ok {
			l, _, _ := strings.Cut(after, ";")
			left = strings.Split(l, ", ")
			if !strings.Contains(line, "pdc cont rm --recursive --tmpdir "+tmpdir+" "+strings.Join(left, " ")) {
				t.Errorf("down names no command to remove them: %q", line)
			}
		}
	}
	t.Logf("rank 0 held %d transient containers; down said:\n%s", onLive, r.Stderr)
	if onLive == 0 || deleted+len(left) != onLive {
		t.Errorf("rank 0 held %d transient containers; down deleted %d and named %q as left:\n%s", onLive, deleted, left, r.Stderr)
	}
}

// The --json outputs' records, with the field names docs/CLI.md promises.
type container struct {
	Name     string    `json:"name"`
	ID       uint64    `json:"id"`
	IDStr    string    `json:"id_str"`
	Lifetime string    `json:"lifetime"`
	Server   int       `json:"server"`
	Created  string    `json:"created"`
	Deleting bool      `json:"deleting"`
	Objects  *int      `json:"objects,omitempty"`
	Tags     *[]string `json:"tags,omitempty"`
}
type object struct {
	Name         string `json:"name"`
	ID           uint64 `json:"id"`
	IDStr        string `json:"id_str"`
	Container    uint64 `json:"container"`
	ContainerStr string `json:"container_str"`
	Dims         string `json:"dims"`
	Type         string `json:"type"`
	Partition    string `json:"partition"`
	Storage      string `json:"storage"`
	Consistency  uint32 `json:"consistency"`
	TimeStep     uint32 `json:"time_step"`
	UserID       uint32 `json:"user_id"`
	App          string `json:"app"`
	Server       int    `json:"server"`
	Created      string `json:"created"`
}
type status struct {
	Rank          int     `json:"rank"`
	Addr          string  `json:"addr"`
	Roles         string  `json:"roles"`
	PID           int     `json:"pid"`
	Host          string  `json:"host"`
	State         string  `json:"state"`
	Error         string  `json:"error,omitempty"`
	DownSince     string  `json:"down_since,omitempty"`
	UptimeSeconds float64 `json:"uptime_seconds"`
	Clients       uint64  `json:"clients"`
	Requests      uint64  `json:"requests"`
	Version       string  `json:"version"`
}
type match struct {
	ID    uint64 `json:"id"`
	IDStr string `json:"id_str"`
	Name  string `json:"name"`
}
type staged struct {
	Path      string `json:"path"`
	Namespace string `json:"namespace"`
	Version   uint64 `json:"version"`
	Size      int64  `json:"size"`
	Owner     int    `json:"owner"`
	Host      string `json:"host"`
	CRC32C    string `json:"crc32c"`
	Produced  string `json:"produced"`
}
type topServer struct {
	Rank              int     `json:"rank"`
	Roles             string  `json:"roles"`
	Addr              string  `json:"addr"`
	MetricsAddr       string  `json:"metrics_addr"`
	Error             string  `json:"error,omitempty"`
	RequestsPerSec    float64 `json:"requests_per_sec"`
	P99Seconds        float64 `json:"p99_seconds"`
	InBytesPerSec     float64 `json:"in_bytes_per_sec"`
	OutBytesPerSec    float64 `json:"out_bytes_per_sec"`
	TransfersInFlight float64 `json:"transfers_in_flight"`
	TransfersQueued   float64 `json:"transfers_queued"`
	StoreBytes        float64 `json:"store_bytes"`
	Clients           float64 `json:"clients"`
	Errors            float64 `json:"errors"`
	ErrorsPerSec      float64 `json:"errors_per_sec"`
	Requests          float64 `json:"requests"`
}
type top struct {
	Time     string      `json:"time"`
	Interval int64       `json:"interval_ns"`
	Servers  []topServer `json:"servers"`
}

// The --json outputs, decoded with the field names docs/CLI.md promises:
// a renamed or dropped field fails here.
func checkJSON(t *testing.T, tmpdir, producer string) {
	if err := os.WriteFile(filepath.Join(producer, "f.dat"), []byte("twelve bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	e2e.MustRun(t, "stage", "produce", "--tmpdir", tmpdir, "--producer-dir", producer, "f.dat")

	var conts []container
	decodeLines(t, &conts, "cont", "ls", "--json", "--tmpdir", tmpdir)
	if len(conts) != 1 || conts[0].Name != "full" || conts[0].Lifetime != "persistent" || conts[0].Objects != nil { // empty went above
		t.Errorf("cont ls --json: %+v", conts)
	}
	decodeLines(t, &conts, "cont", "info", "--json", "--tmpdir", tmpdir, "full")
	if len(conts) != 1 || conts[0].Objects == nil || *conts[0].Objects != 2 || conts[0].Tags == nil || len(*conts[0].Tags) != 1 {
		t.Errorf("cont info --json: %+v", conts)
	}
	var objs []object
	decodeLines(t, &objs, "obj", "ls", "--json", "--tmpdir", tmpdir, "--cont", "full")
	if len(objs) != 2 || objs[0].Dims != "4x4" || objs[0].Type != "int64" {
		t.Errorf("obj ls --json: %+v", objs)
	}
	decodeLines(t, &objs, "obj", "info", "--json", "--tmpdir", tmpdir, "a")
	if len(objs) != 1 || objs[0].Name != "a" || objs[0].Partition == "" || objs[0].Storage != "offset" {
		t.Errorf("obj info --json: %+v", objs)
	}
	var sts []status
	decodeLines(t, &sts, "status", "--json", "--tmpdir", tmpdir)
	if len(sts) != 2 || sts[1].Rank != 1 || sts[1].State != "up" || sts[1].PID == 0 || sts[1].Requests == 0 {
		t.Errorf("status --json: %+v", sts)
	}
	var ms []match
	decodeLines(t, &ms, "query", "--json", "--tmpdir", tmpdir, "step=12")
	if len(ms) != 1 || ms[0].Name != "a" {
		t.Errorf("query --json: %+v", ms)
	}
	// Every id is also a decimal string that says the same: what a reader
	// holding numbers as doubles keeps exact.
	sameID := func(what string, id uint64, s string) {
		t.Helper()
		if s != strconv.FormatUint(id, 10) {
			t.Errorf("%s: id %d, id string %q", what, id, s)
		}
	}
	for _, c := range conts {
		sameID("cont info --json", c.ID, c.IDStr)
	}
	for _, o := range objs {
		sameID("obj info --json", o.ID, o.IDStr)
		sameID("obj info --json container", o.Container, o.ContainerStr)
	}
	for _, m := range ms {
		sameID("query --json", m.ID, m.IDStr)
	}
	if len(objs) == 1 && objs[0].ID < 1<<53 {
		t.Logf("object id %d is below 2^53: the test does not show the rounding it guards against", objs[0].ID)
	}
	var sf []staged
	decodeLines(t, &sf, "stage", "lookup", "--json", "--tmpdir", tmpdir, "f.dat")
	if len(sf) != 1 || sf[0].Path != "f.dat" || sf[0].Size != 12 || sf[0].Version == 0 {
		t.Errorf("stage lookup --json: %+v", sf)
	}
	decodeLines(t, &sf, "stage", "ls", "--json", "--tmpdir", tmpdir)
	if len(sf) != 1 || sf[0].Path != "f.dat" {
		t.Errorf("stage ls --json: %+v", sf)
	}
	var tv []top
	decodeLines(t, &tv, "top", "--once", "--json", "--interval", "100ms", "--tmpdir", tmpdir)
	if len(tv) != 1 || len(tv[0].Servers) != 2 || tv[0].Servers[0].MetricsAddr == "" {
		t.Errorf("top --once --json: %+v", tv)
	}
}

// decodeLines runs pdc args and decodes what it prints, JSON values one
// after another, into *out, failing if a field of T (but those marked
// omitempty) is missing: fields may be added, not renamed or dropped.
func decodeLines[T any](t *testing.T, out *[]T, args ...string) {
	t.Helper()
	*out = nil
	dec := json.NewDecoder(bytes.NewReader([]byte(e2e.MustRun(t, args...))))
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("pdc %s: %v", strings.Join(args, " "), err)
		}
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("pdc %s: %v", strings.Join(args, " "), err)
		}
		checkFields(t, reflect.TypeOf(v), raw, strings.Join(args, " "))
		*out = append(*out, v)
	}
}

// checkFields fails if raw, a JSON object, lacks a field of the struct
// type typ that is not omitempty, looking into nested objects and lists.
func checkFields(t *testing.T, typ reflect.Type, raw json.RawMessage, what string) {
	t.Helper()
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct {
		return
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		v, ok := m[name]
		if !ok {
			if !strings.Contains(opts, "omitempty") {
				t.Errorf("%s: no field %q in %s", what, name, raw)
			}
			continue
		}
		if ft := f.Type; ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
			var items []json.RawMessage
			if json.Unmarshal(v, &items) == nil {
				for _, it := range items {
					checkFields(t, ft.Elem(), it, what)
				}
			}
		}
	}
}
