package durable_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/region"
)

// A metadata server whose tag index outbox holds a record no build wrote
// refuses to serve, and its error names the record: serving would leave
// the record's index changes undelivered for good.
func TestServerWithABrokenOutboxRefusesToServe(t *testing.T) {
	tmpdir := e2e.Up(t, 1)
	datadir := e2e.ServerDataDir(t, tmpdir)
	ctx := e2e.Ctx(t, time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "broken", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	o, err := ct.CreateObject(ctx, "o", client.ObjectProps{Dims: []uint64{1}, Type: region.Int})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.PutTag(ctx, "k", client.String("v")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	e2e.MustRun(t, "down", "--tmpdir", tmpdir)

	db, err := pebble.Open(filepath.Join(datadir, "meta-0"), &pebble.Options{Logger: quietLog{}})
	if err != nil {
		t.Fatal(err)
	}
	k := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64([]byte{'Q'}, 1<<40), 0)
	if err := db.Set(k, []byte{0xff, 0xff, 0xff}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	r := e2e.Run(t, nil, "up", "-n", "1", "--tmpdir", tmpdir, "--datadir", datadir, "--timeout", "20s")
	if r.Err == nil {
		t.Fatalf("pdc up served with a broken outbox:\n%s%s", r.Stdout, r.Stderr)
	}
	logs, _ := os.ReadFile(filepath.Join(tmpdir, "logs", "server-0.log"))
	if all := r.Stdout + r.Stderr + string(logs); !strings.Contains(all, "outbox record 51000001") {
		t.Fatalf("the failure does not say what failed:\n%s\n%s\n%s", r.Stdout, r.Stderr, logs)
	}
}

type quietLog struct{}

func (quietLog) Infof(string, ...any)  {}
func (quietLog) Errorf(string, ...any) {}
func (quietLog) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
