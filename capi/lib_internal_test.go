package capi

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
)

func TestParseTimeout(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration // -1: an error
	}{
		{"", DefaultTimeout}, {"30", 30 * time.Second}, {" 0.5 ", 500 * time.Millisecond}, {"2m", 2 * time.Minute},
		{"90s", 90 * time.Second}, {"1e12", 0}, {"+Inf", 0}, {"1e-12", 1},
		{"0", -1}, {"-1", -1}, {"soon", -1}, {"NaN", -1}, {"-3s", -1}, {"0s", -1},
	} {
		got, err := parseTimeout(c.in)
		if c.want == -1 {
			if err == nil {
				t.Errorf("parseTimeout(%q) = %v, want an error", c.in, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("parseTimeout(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	if d, err := seconds(math.Inf(1), "t"); err != nil || d != 0 {
		t.Errorf("seconds(+Inf) = %v, %v; want no limit", d, err)
	}
	if d, err := seconds(0.25, "t"); err != nil || d != 250*time.Millisecond {
		t.Errorf("seconds(0.25) = %v, %v", d, err)
	}
}

// A bug that panics inside a call is that call's failure, reported as
// such, not the end of the C program.
func TestPanicIsAFailedCall(t *testing.T) {
	var out strings.Builder
	l := New(Config{Stderr: &out})
	if rc := l.run("PDCsomething(1)", func() error { return oops(nil) }); rc != Fail {
		t.Fatalf("rc %d", rc)
	}
	if id := l.runID("PDCother()", func() (uint64, error) { panic("boom") }); id != 0 {
		t.Fatalf("id %d", id)
	}
	got := out.String()
	for _, want := range []string{"libpdc: PDCsomething(1): a bug in libpdc, please report this line: runtime error: invalid memory address or nil pointer dereference",
		"libpdc: PDCother(): a bug in libpdc, please report this line: boom: pdc: internal error\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("reports %q lack %q", got, want)
		}
	}
}

type thing struct{ n int }

// oops is a bug: it dereferences t without checking it.
func oops(t *thing) error {
	if t.n > 0 {
		return nil
	}
	return nil
}

// LastReport is the line a failing call printed, for bindings that raise
// it as an exception (python/pdc): "" until a call fails, then the latest.
func TestLastReport(t *testing.T) {
	var out strings.Builder
	l := New(Config{Stderr: &out})
	if got := l.LastReport(); got != "" {
		t.Fatalf("LastReport before any failure = %q", got)
	}
	l.run("PDCfirst(1)", func() error { return fmt.Errorf("open object %q: %w", "a", pdc.ErrNotFound) })
	l.run("PDCok()", func() error { return nil })
	l.run("PDCsecond(2)", func() error { return fmt.Errorf("line one\nline two: %w", pdc.ErrExists) })
	want := "libpdc: PDCsecond(2): line one; line two: pdc: already exists"
	if got := l.LastReport(); got != want {
		t.Errorf("LastReport = %q, want %q", got, want)
	}
	if !strings.HasSuffix(out.String(), want+"\n") {
		t.Errorf("stderr %q does not end with the last report", out.String())
	}
}
