package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
)

// Connect with a context that has ended fails with pdc's sentinel, as
// every call does: it was the context's own error, which
// errors.Is(err, pdc.ErrTimeout) missed (pdc status --timeout 0 said
// "connect: context deadline exceeded").
func TestConnectEndedContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), -time.Second)
	defer cancel()
	if _, err := client.Connect(ctx, client.WithTmpDir(t.TempDir())); !errors.Is(err, pdc.ErrTimeout) {
		t.Errorf("Connect past its deadline: %v; want pdc.ErrTimeout", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := client.Connect(ctx, client.WithTmpDir(t.TempDir())); !errors.Is(err, pdc.ErrCanceled) {
		t.Errorf("Connect canceled: %v; want pdc.ErrCanceled", err)
	}
}
