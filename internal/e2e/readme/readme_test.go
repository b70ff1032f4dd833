package readme_test

import (
	"os"
	"testing"

	"github.com/pdcgo/pdc/internal/doctest"
	"github.com/pdcgo/pdc/internal/e2e"
)

// TestReadme runs the shell and Go blocks of README.md and docs/*.md
// marked runnable (internal/doctest says how they are marked) against the
// pdc binary under test, and fails on a shell or Go block that is not
// marked at all. capi's TestReadmeC runs the blocks that need libpdc.
func TestReadme(t *testing.T) {
	root := moduleRoot(t)
	blocks, err := doctest.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range doctest.Check(blocks) {
		t.Error(err)
	}
	// A marker the parser no longer sees would pass by running nothing.
	if n := len(doctest.Sessions(blocks)); n < 3 {
		t.Errorf("found %d sessions of runnable blocks in README.md and docs/*.md; want the README's 3 or more", n)
	}
	doctest.Run(t, doctest.Config{Root: root, Pdc: e2e.PlainBin(t)}, blocks)
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := doctest.ModuleRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	return root
}
