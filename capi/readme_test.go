package capi_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pdcgo/pdc/internal/doctest"
)

// TestReadmeC runs the README's and docs' blocks that need libpdc (marked
// capi: the C program it shows, built with gcc through pkg-config as the
// README says, VPIC-IO and BD-CATS under mpiexec, the LD_PRELOAD
// interposer), with libpdc installed as make capi installs it, at
// ./build/capi in each session. internal/e2e/readme runs the other
// blocks; internal/doctest says how blocks are marked.
func TestReadmeC(t *testing.T) {
	needC(t)
	prefix := installLibpdc(t, testCtx(t))
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := doctest.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	doctest.Run(t, doctest.Config{
		Root:    root,
		Pdc:     filepath.Join(prefix, "bin", "pdc"),
		Capi:    prefix,
		Require: os.Getenv(launchersRequired) == "1",
	}, blocks)
}
