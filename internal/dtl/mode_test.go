package dtl_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/dtl"
)

var modeByName = map[string]dtl.Mode{
	"auto":   dtl.ModeAuto,
	"stream": dtl.ModeStream,
	"pull":   dtl.ModePull,
	"push":   dtl.ModePush,
	"shm":    dtl.ModeShm,
}

func TestParseMode(t *testing.T) {
	for name, want := range modeByName {
		for _, s := range []string{name, strings.ToUpper(name), strings.ToUpper(name[:1]) + name[1:]} {
			got, err := dtl.ParseMode(s)
			if err != nil || got != want {
				t.Errorf("ParseMode(%q) = %v, %v; want %v", s, got, err, want)
			}
		}
		if want.String() != name {
			t.Errorf("%d.String() = %q, want %q", want, want.String(), name)
		}
	}
	// Every concrete mode parses back from its name.
	for _, m := range dtl.Modes {
		if got, err := dtl.ParseMode(m.String()); err != nil || got != m {
			t.Errorf("ParseMode(%v.String()) = %v, %v", m, got, err)
		}
	}
	if s := dtl.Mode(200).String(); s != "mode(200)" {
		t.Errorf("Mode(200).String() = %q", s)
	}
}

func TestParseModeUnknown(t *testing.T) {
	for _, s := range []string{"", "rdma", "pul", " pull", "pull ", "mode(1)", "1"} {
		m, err := dtl.ParseMode(s)
		if err == nil {
			t.Errorf("ParseMode(%q) = %v, want an error", s, m)
			continue
		}
		if !errors.Is(err, dtl.ErrBadMode) || !errors.Is(err, pdc.ErrInvalid) {
			t.Errorf("ParseMode(%q): %v does not match ErrBadMode and pdc.ErrInvalid", s, err)
		}
		if errors.Is(err, dtl.ErrBadPack) {
			t.Errorf("ParseMode(%q): %v matches ErrBadPack", s, err)
		}
		msg := err.Error()
		for name := range modeByName {
			if !strings.Contains(msg, name) {
				t.Errorf("ParseMode(%q): %q does not list %q", s, msg, name)
			}
		}
		if s != "" && !strings.Contains(msg, s) {
			t.Errorf("ParseMode(%q): %q does not name the input", s, msg)
		}
	}
}

func TestModeFromEnv(t *testing.T) {
	t.Run("unset", func(t *testing.T) {
		t.Setenv(dtl.EnvMode, "") // restored after the test
		os.Unsetenv(dtl.EnvMode)
		if m, err := dtl.ModeFromEnv(); err != nil || m != dtl.ModeAuto {
			t.Fatalf("unset: %v, %v; want auto", m, err)
		}
	})
	t.Run("empty", func(t *testing.T) {
		t.Setenv(dtl.EnvMode, "")
		if m, err := dtl.ModeFromEnv(); err != nil || m != dtl.ModeAuto {
			t.Fatalf("empty: %v, %v; want auto", m, err)
		}
	})
	t.Run("set", func(t *testing.T) {
		for name, want := range modeByName {
			t.Setenv(dtl.EnvMode, strings.ToUpper(name))
			if m, err := dtl.ModeFromEnv(); err != nil || m != want {
				t.Errorf("%s=%s: %v, %v; want %v", dtl.EnvMode, strings.ToUpper(name), m, err, want)
			}
		}
	})
	t.Run("bad", func(t *testing.T) {
		t.Setenv(dtl.EnvMode, "carrier-pigeon")
		_, err := dtl.ModeFromEnv()
		if !errors.Is(err, dtl.ErrBadMode) || !errors.Is(err, pdc.ErrInvalid) {
			t.Fatalf("bad: %v, want ErrBadMode", err)
		}
		if msg := err.Error(); !strings.Contains(msg, dtl.EnvMode) || !strings.Contains(msg, "carrier-pigeon") {
			t.Fatalf("bad: %q names neither the variable nor its value", msg)
		}
	})
}

func TestSameHost(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"unix:/x", true},
		{"unix:/tmp/pdc.sock", true},
		{"127.0.0.1:1", true},
		{"127.1.2.3:80", true},
		{"localhost:1", true},
		{"[::1]:1", true},
		{"192.0.2.1:5", false}, // TEST-NET-1: never an interface address
		{"[2001:db8::1]:5", false},
		{"no-port", false},
		{"", false},
	} {
		if got := dtl.SameHost(tc.addr); got != tc.want {
			t.Errorf("SameHost(%q) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}
