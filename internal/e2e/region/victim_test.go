package region_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/region"
)

// objectAwayFrom creates an object with props in ct, named name-k for the
// first k whose metadata is not on rank victim of a 2-server cluster, so
// that its set dims are answered while the victim is down or stopped.
func objectAwayFrom(ctx context.Context, t *testing.T, ct *client.Container, name string, props client.ObjectProps, victim int) *client.Object {
	t.Helper()
	for k := 0; ; k++ {
		o, err := ct.CreateObject(ctx, fmt.Sprintf("%s-%d", name, k), props)
		if err != nil {
			t.Fatal(err)
		}
		if placement.OwnerOfID(o.ID(), 2) != victim {
			return o
		}
	}
}

// counted is box's bytes of uint64 cells holding 1, 2, 3... in row-major
// order.
func counted(box region.Box) []byte {
	buf := make([]byte, 8*box.Volume())
	for i := range box.Volume() {
		binary.LittleEndian.PutUint64(buf[8*i:], i+1)
	}
	return buf
}
