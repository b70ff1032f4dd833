package client

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/region"
)

// A local region whose buffer (up to its end in each dim) has more than
// 2^64 elements is refused at NewTransfer, not taken as needing none.
func TestNewTransferLocalBufferOverflows(t *testing.T) {
	o := newObject(nil, ObjectInfo{Name: "o", Props: ObjectProps{Dims: []uint64{4, 4}, Type: region.Int}})
	dot := region.Box{Off: []uint64{0, 0}, Size: []uint64{1, 1}}
	for _, off := range [][]uint64{{1 << 40, 1 << 40}, {1 << 32, 1<<32 - 1}} {
		local := region.Box{Off: off, Size: []uint64{1, 1}}
		_, err := o.NewTransfer(context.Background(), nil, Read, local, dot)
		if !errors.Is(err, pdc.ErrInvalid) || !strings.Contains(err.Error(), "more than 2^64") {
			t.Errorf("local %v: %v, want a buffer of more than 2^64 bytes refused", local, err)
		}
	}
}
