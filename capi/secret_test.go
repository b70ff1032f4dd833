package capi_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pdcgo/pdc/capi"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/server"
)

// libpdc takes the cluster secret's file from $PDC_SECRET_FILE, for a
// secret kept outside the tmpdir (issue 26).
func TestSecretFileFromEnv(t *testing.T) {
	dir := t.TempDir()
	secretDir := filepath.Join(dir, "secret")
	if err := os.Mkdir(secretDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.NewSecret(secretDir); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(secretDir, cluster.SecretFile)
	tmpdir := filepath.Join(dir, "tmp")
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.Config{TmpDir: tmpdir, DataDir: filepath.Join(dir, "data"), SecretFile: secret,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Ready:  func(cluster.Server, *cluster.List) { close(ready) }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	timer := time.NewTimer(60 * time.Second)
	defer timer.Stop()
	select {
	case <-ready:
	case err := <-done:
		t.Fatal(err)
	case <-timer.C:
		t.Fatal("the server did not start")
	}

	without := newProc(map[string]string{"PDC_TMPDIR": tmpdir, capi.EnvTimeout: "5s"})
	if id := without.Init("no-secret"); id != 0 {
		prop := without.PropCreate(capi.PropContCreate, id)
		if ct := without.ContCreate("c", prop); ct != 0 {
			t.Fatal("a container was created without the cluster secret")
		}
		without.wantLine(t, "no cluster secret given")
		without.Close(id)
	}

	with := newProc(map[string]string{"PDC_TMPDIR": tmpdir, "PDC_SECRET_FILE": secret})
	id := with.init(t)
	prop := with.PropCreate(capi.PropContCreate, id)
	if ct := with.ContCreate("c", prop); ct == 0 {
		t.Fatalf("with $PDC_SECRET_FILE: %q", with.lines())
	}
	if with.Close(id) != capi.Succeed {
		t.Fatal(with.lines())
	}
}
