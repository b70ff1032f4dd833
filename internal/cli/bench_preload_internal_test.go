package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
)

// TestFindPreload checks where bench preload looks for make capi's
// install, and that a missing one says how to make it.
func TestFindPreload(t *testing.T) {
	full, empty := t.TempDir(), t.TempDir()
	for _, f := range []string{"lib/libpdc_preload.so", "lib/libpdc.so", "bin/pdc"} {
		p := filepath.Join(full, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := findPreload(full, "", ""); err != nil || got != full {
		t.Errorf("findPreload(--c-prefix %s) = %q, %v; want it", full, got, err)
	}
	if got, err := findPreload("", full, ""); err != nil || got != full {
		t.Errorf("findPreload($PDC_CAPI_PREFIX %s) = %q, %v; want it", full, got, err)
	}
	if got, err := findPreload("", "", filepath.Join(full, "bin", "pdc")); err != nil || got != full {
		t.Errorf("findPreload(beside %s/bin/pdc) = %q, %v; want it", full, got, err)
	}
	_, err := findPreload(empty, "", "")
	if !errors.Is(err, pdc.ErrNotFound) || !strings.Contains(err.Error(), "make capi CAPI_PREFIX="+empty) {
		t.Errorf("findPreload(--c-prefix %s) of an empty dir: %v; want not found, saying to run make capi", empty, err)
	}
}
