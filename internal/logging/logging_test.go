package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdcgo/pdc/internal/rpc"
)

// A JSON logger tags the records of a traced context with the trace id,
// in the form the rpc server's request log uses, and only those.
func TestNewTagsTracedRecords(t *testing.T) {
	var b bytes.Buffer
	log, err := New(&b, JSON, 0)
	if err != nil {
		t.Fatal(err)
	}
	log.InfoContext(rpc.WithTrace(context.Background(), 0x1f), "placed", "object", "o")
	log.InfoContext(context.Background(), "untraced")
	log.InfoContext(rpc.WithTrace(context.Background(), 0x1f), "own", rpc.TraceAttr(7))
	var recs []map[string]any
	for l := range strings.Lines(b.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q: %v", l, err)
		}
		recs = append(recs, m)
	}
	if len(recs) != 3 || recs[0]["trace"] != "000000000000001f" || recs[0]["object"] != "o" ||
		recs[1]["trace"] != nil || recs[2]["trace"] != "0000000000000007" {
		t.Fatalf("records %v", recs)
	}
	if _, err := New(&b, "xml", 0); err == nil {
		t.Fatal("log format xml accepted")
	}
}

// A File rotates before a record would take it past MaxSize, keeps Keep
// rotated files, newest first, and loses and splits no record.
func TestFileRotates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server-0.log")
	opened := 0
	f, err := OpenFile(path, FileOptions{MaxSize: 100, Keep: 2, OnOpen: func(*os.File) error { opened++; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	for i := range n {
		if _, err := fmt.Fprintf(f, "record %02d of the log\n", i); err != nil { // 22 bytes: 4 to a file
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil || f.Close() != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := f.Write([]byte("late\n")); err == nil {
		t.Fatal("a write after Close succeeded")
	}
	var all string
	for _, p := range []string{path + ".2", path + ".1", path} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 100 || len(b) == 0 || !strings.HasSuffix(string(b), "\n") {
			t.Fatalf("%s: %d bytes: %q", p, len(b), b)
		}
		all += string(b)
	}
	if _, err := os.Stat(path + ".3"); !os.IsNotExist(err) {
		t.Fatalf("%s.3 kept beyond Keep: %v", path, err)
	}
	// The three files hold the last records, in order.
	lines := strings.Split(strings.TrimSuffix(all, "\n"), "\n")
	for i, l := range lines {
		if want := fmt.Sprintf("record %02d of the log", n-len(lines)+i); l != want {
			t.Fatalf("line %d: %q, want %q", i, l, want)
		}
	}
	if len(lines) != 12 || opened != n/4 {
		t.Fatalf("%d lines kept (want 12), %d files opened (want %d)", len(lines), opened, n/4)
	}

	// Reopened, what is there counts towards MaxSize.
	f, err = OpenFile(path, FileOptions{MaxSize: 100, Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before, _ := os.ReadFile(path)
	if _, err := f.Write(bytes.Repeat([]byte("x"), 101-len(before))); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path + ".1"); !bytes.Equal(b, before) {
		t.Fatalf("reopened file not rotated first: .1 holds %q, want %q", b, before)
	}
}
