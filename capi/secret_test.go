package capi_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pdcgo/pdc/capi"
	"github.com/pdcgo/pdc/client/clienttest"
	"github.com/pdcgo/pdc/internal/cluster"
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
	tc := clienttest.Start(t, clienttest.Options{Dir: dir, SecretFile: secret})
	tmpdir := tc.TmpDir()

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
