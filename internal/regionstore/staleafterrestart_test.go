package regionstore

import (
	"bytes"
	"errors"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/region"
)

// The newest dims version applied to an object is known only in memory
// (Store's object.version, and the data server's layouts): after a
// restart, a client still holding older, smaller dims cuts the object
// back, and the rows written under the newer dims, acknowledged, are gone.
func TestOlderDimsAfterReopenDoNotCut(t *testing.T) {
	t.Skip("bug: dims versions are not kept across a restart: a stale client's first call after it cuts acknowledged rows (needs the version in the files, or asked of the metadata server at first touch)")
	for _, mode := range []Mode{ByOffset, ByRegion} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir, false)
			grown := Layout{Dims: []uint64{4, 1024}, Elem: 1, Mode: mode, Version: 2}
			rows := region.Box{Off: []uint64{2, 0}, Size: []uint64{2, 1024}}
			data := bytes.Repeat([]byte{7}, 2*1024)
			if err := s.Write(1, grown, rows, data); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openStore(t, dir, false)
			defer func() { _ = s.Close() }()
			old := Layout{Dims: []uint64{2, 1024}, Elem: 1, Mode: mode, Version: 1}
			err := s.Read(1, old, region.Box{Off: []uint64{0, 0}, Size: []uint64{1, 1024}}, make([]byte, 1024))
			if !errors.Is(err, pdc.ErrStale) {
				t.Errorf("read with dims of version 1 after version 2 was written, and a reopen: %v, want ErrStale", err)
			}
			got := make([]byte, len(data))
			if err := s.Read(1, grown, rows, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("rows 2-3, written under dims version 2, read %d... after a call with version 1", got[0])
			}
		})
	}
}
