package capi_test

import (
	"testing"
	"time"
)

// TestPreload installs libpdc as make capi does and runs the interposer's
// tests (capi/tests/run_preload.sh): cat, cp, python3, a shell and C
// programs that know nothing of pdc, run with LD_PRELOAD against real pdc
// server processes.
func TestPreload(t *testing.T) {
	needC(t)
	ctx := testCtx(t)
	prefix := installLibpdc(t, ctx)
	tmp := t.TempDir()
	t.Cleanup(func() { killUnder(t, tmp) })
	start := time.Now()
	out, err := scriptIn(ctx, tmp, "./tests/run_preload.sh", prefix)
	t.Logf("./tests/run_preload.sh (%v):\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("./tests/run_preload.sh: %v", err)
	}
}
