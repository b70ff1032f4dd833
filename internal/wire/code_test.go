package wire_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"syscall"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// codeSentinels is the protocol's code table, written out independently of
// the implementation's.
var codeSentinels = []struct {
	code wire.Code
	err  error
}{
	{wire.CodeInternal, pdc.ErrInternal},
	{wire.CodeNotFound, pdc.ErrNotFound},
	{wire.CodeExists, pdc.ErrExists},
	{wire.CodeInvalid, pdc.ErrInvalid},
	{wire.CodeOutOfRange, pdc.ErrOutOfRange},
	{wire.CodeUnavailable, pdc.ErrUnavailable},
	{wire.CodeTimeout, pdc.ErrTimeout},
	{wire.CodeCanceled, pdc.ErrCanceled},
	{wire.CodePermission, pdc.ErrPermission},
	{wire.CodeUnimplemented, pdc.ErrUnimplemented},
	{wire.CodeVersion, pdc.ErrVersion},
	{wire.CodeTooLarge, pdc.ErrTooLarge},
	{wire.CodeProtocol, pdc.ErrProtocol},
	{wire.CodeClosed, pdc.ErrClosed},
	{wire.CodeChecksum, pdc.ErrChecksum},
	{wire.CodeStale, pdc.ErrStale},
	{wire.CodeCorrupt, pdc.ErrCorrupt},
	{wire.CodeNoSpace, pdc.ErrNoSpace},
	{wire.CodeIO, pdc.ErrIO},
}

func TestCodeSentinelTable(t *testing.T) {
	if len(codeSentinels) != int(wire.CodeIO-wire.CodeInternal+1) {
		t.Fatalf("table covers %d codes, want every code from Internal to IO", len(codeSentinels))
	}
	seen := map[error]wire.Code{}
	for i, c := range codeSentinels {
		if c.code != wire.CodeInternal+wire.Code(i) {
			t.Fatalf("table entry %d has code %d", i, c.code)
		}
		if prev, dup := seen[c.err]; dup {
			t.Fatalf("codes %d and %d share sentinel %v", prev, c.code, c.err)
		}
		seen[c.err] = c.code
	}
}

func TestCodeSentinelRoundTrip(t *testing.T) {
	for _, c := range codeSentinels {
		if got := c.code.Err(); got != c.err {
			t.Fatalf("Code(%d).Err() = %v, want %v", c.code, got, c.err)
		}
		if got := wire.CodeOf(c.code.Err()); got != c.code {
			t.Fatalf("CodeOf(Code(%d).Err()) = %d", c.code, got)
		}
		wrapped := fmt.Errorf("x: %w", c.err)
		if got := wire.CodeOf(wrapped); got != c.code {
			t.Fatalf("CodeOf(%q) = %d, want %d", wrapped, got, c.code)
		}
		twice := fmt.Errorf("outer: %w", fmt.Errorf("inner %q: %w", "obj", c.err))
		if got := wire.CodeOf(twice); got != c.code {
			t.Fatalf("CodeOf(%q) = %d, want %d", twice, got, c.code)
		}
		se := &pdc.ServerError{Server: "rank 0", Method: "ping", Msg: "m", Err: c.err}
		if got := wire.CodeOf(se); got != c.code {
			t.Fatalf("CodeOf(ServerError wrapping %v) = %d, want %d", c.err, got, c.code)
		}
	}
}

func TestCodeOf(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want wire.Code
	}{
		{"nil", nil, wire.CodeOK},
		{"plain error", errors.New("boom"), wire.CodeInternal},
		{"deadline", context.DeadlineExceeded, wire.CodeTimeout},
		{"wrapped deadline", fmt.Errorf("read: %w", context.DeadlineExceeded), wire.CodeTimeout},
		{"canceled", context.Canceled, wire.CodeCanceled},
		{"wrapped canceled", fmt.Errorf("read: %w", context.Canceled), wire.CodeCanceled},
		{"sentinel beats context", fmt.Errorf("%w: %w", pdc.ErrNotFound, context.Canceled), wire.CodeNotFound},
		{"joined", errors.Join(errors.New("a"), pdc.ErrExists), wire.CodeExists},
		{"full disk", &fs.PathError{Op: "write", Path: "/d/x", Err: syscall.ENOSPC}, wire.CodeNoSpace},
		{"quota", fmt.Errorf("store: %w", &fs.PathError{Op: "write", Path: "/d/x", Err: syscall.EDQUOT}), wire.CodeNoSpace},
		{"EIO", fmt.Errorf("store: %w", &fs.PathError{Op: "fsync", Path: "/d/x", Err: syscall.EIO}), wire.CodeIO},
		{"other errno", &fs.PathError{Op: "open", Path: "/d/x", Err: syscall.EACCES}, wire.CodeInternal},
	}
	for _, c := range cases {
		if got := wire.CodeOf(c.err); got != c.want {
			t.Fatalf("%s: CodeOf(%v) = %d, want %d", c.name, c.err, got, c.want)
		}
	}
}

func TestCodeErr(t *testing.T) {
	if err := wire.CodeOK.Err(); err != nil {
		t.Fatalf("CodeOK.Err() = %v, want nil", err)
	}
	for _, c := range []wire.Code{wire.CodeIO + 1, 100, math.MaxUint32} {
		if err := c.Err(); err != pdc.ErrInternal {
			t.Fatalf("unknown Code(%d).Err() = %v, want pdc.ErrInternal", c, err)
		}
	}
}

func TestContextSentinels(t *testing.T) {
	if !errors.Is(pdc.ErrTimeout, context.DeadlineExceeded) {
		t.Fatal("errors.Is(pdc.ErrTimeout, context.DeadlineExceeded) is false")
	}
	if !errors.Is(pdc.ErrCanceled, context.Canceled) {
		t.Fatal("errors.Is(pdc.ErrCanceled, context.Canceled) is false")
	}
	if errors.Is(pdc.ErrTimeout, context.Canceled) || errors.Is(pdc.ErrCanceled, context.DeadlineExceeded) {
		t.Fatal("a context sentinel matches the other context error")
	}
	// Across the wire: a server's timeout comes back as ErrTimeout, which a
	// caller may test as a context error.
	back := wire.CodeOf(fmt.Errorf("handler: %w", context.DeadlineExceeded)).Err()
	if !errors.Is(back, pdc.ErrTimeout) || !errors.Is(back, context.DeadlineExceeded) {
		t.Fatalf("deadline crossed the wire as %v", back)
	}
}

// A full disk or an I/O error crosses the wire as the sentinel that also
// matches the system error, so a client may test for either.
func TestNoSpaceAndIOSentinels(t *testing.T) {
	for _, c := range []struct {
		errno    syscall.Errno
		sentinel error
	}{{syscall.ENOSPC, pdc.ErrNoSpace}, {syscall.EDQUOT, pdc.ErrNoSpace}, {syscall.EIO, pdc.ErrIO}} {
		back := wire.CodeOf(&fs.PathError{Op: "write", Path: "/d/x", Err: c.errno}).Err()
		if back != c.sentinel || !errors.Is(back, c.errno) {
			t.Fatalf("%v crossed the wire as %v", c.errno, back)
		}
	}
	for _, c := range []struct {
		sentinel error
		other    syscall.Errno
	}{{pdc.ErrNoSpace, syscall.EIO}, {pdc.ErrIO, syscall.ENOSPC}} {
		if errors.Is(c.sentinel, c.other) {
			t.Fatalf("%v matches %v", c.sentinel, c.other)
		}
	}
}
