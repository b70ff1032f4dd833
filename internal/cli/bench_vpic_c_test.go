package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
)

func TestFindVPICC(t *testing.T) {
	dir := t.TempDir()
	install := func(name string, progs ...string) string {
		bin := filepath.Join(dir, name, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, p := range progs {
			if err := os.WriteFile(filepath.Join(bin, p), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return filepath.Join(dir, name)
	}
	flag := install("flag", vpicCWriter, vpicCReader)
	env := install("env", vpicCWriter, vpicCReader)
	half := install("half", vpicCWriter)
	self := install("self", vpicCWriter, vpicCReader, "pdc")
	selfExe := filepath.Join(self, "bin", "pdc")
	otherExe := filepath.Join(install("other", "pdc"), "bin", "pdc")
	for _, tc := range []struct {
		name, flag, env, exe string
		want                 string // bin folder, or a piece of the error
	}{
		{"flag first", flag, env, selfExe, filepath.Join(flag, "bin")},
		{"then the environment", "", env, selfExe, filepath.Join(env, "bin")},
		{"then beside pdc", "", "", selfExe, filepath.Join(self, "bin")},
		{"a flag without them is an error", half, env, selfExe, "--c-prefix " + half + ": no pdc_vpicio and pdc_bdcats"},
		{"so is the environment", "", half, selfExe, "$PDC_CAPI_PREFIX " + half + ": no pdc_vpicio"},
		{"none", "", "", otherExe, "no pdc_vpicio and pdc_bdcats in build/capi/bin (nor beside " + otherExe + "): build them with `make capi`"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := findVPICC(tc.flag, tc.env, tc.exe)
			if strings.HasPrefix(tc.want, dir) {
				if err != nil || got != tc.want {
					t.Fatalf("got %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, pdc.ErrNotFound) {
				t.Fatalf("got %q, %v; want an ErrNotFound saying %q", got, err, tc.want)
			}
		})
	}
}

func TestParseVPICCLine(t *testing.T) {
	const ok = "vpicio run=r rank=1 size=2 n=10 bytes=320 seconds=0.5 start=100.25 end=100.75\n"
	start, end, err := parseVPICCLine(ok, 10)
	if err != nil || start != 100.25 || end != 100.75 {
		t.Fatalf("got %v, %v, %v", start, end, err)
	}
	for _, tc := range []struct{ out, want string }{
		{"", "want one result line"},
		{ok + ok, "want one result line"},
		{strings.Replace(ok, "bytes=320", "bytes=32", 1), "bytes=32, want 320"},
		{strings.Replace(ok, "start=100.25", "start=soon", 1), "want start=SECONDS end=SECONDS"},
		{strings.Replace(ok, "end=100.75", "end=99", 1), "end not before start"},
	} {
		if _, _, err := parseVPICCLine(tc.out, 10); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error saying %q", tc.out, err, tc.want)
		}
	}
}
