package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A server that fails to start is shown with the end of its log as this
// start wrote it: the log of its rank, which earlier starts in the same
// tmpdir appended to, showed their errors as if they were this one's
// (pdc up --data-budget 5XB said --data-budget "-5", the earlier try).
func TestFailedStartShowsItsOwnLog(t *testing.T) {
	dir := t.TempDir()
	tmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(filepath.Join(tmp, "logs"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(LogFile(tmp, 0), []byte("pdc: server: an earlier start's error\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "fake-pdc")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho 'pdc: server: this start'\"'\"'s error' >&2\nexit 1\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := StartLocal(ctx, LocalConfig{Binary: bin, N: 1, TmpDir: tmp, DataDir: filepath.Join(dir, "data")})
	if err == nil || !strings.Contains(err.Error(), "this start's error") || strings.Contains(err.Error(), "earlier") {
		t.Fatalf("start of a server that fails: %v; want its log of this start only", err)
	}

	// One that logs nothing says so, rather than end in an empty line.
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 1\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err = StartLocal(ctx, LocalConfig{Binary: bin, N: 1, TmpDir: tmp, DataDir: filepath.Join(dir, "data")})
	if err == nil || !strings.Contains(err.Error(), "logged nothing") {
		t.Fatalf("start of a server that fails silently: %v; want it to say it logged nothing", err)
	}
}
