package regionstore

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/pdcgo/pdc/region"
)

// Readers of a by-region object share its lock, so answering whether the
// call's dims hide stored data must not change the log's state: readers
// right after a shrink, and right after a flush loaded the object, run
// at once. Run under -race.
func TestConcurrentReadsAfterShrink(t *testing.T) {
	for _, name := range []string{"shrink", "flush"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir, false)
			l := Layout{Dims: []uint64{100, 8}, Elem: 1, Mode: ByRegion}
			data := bytes.Repeat([]byte{7}, 100*8)
			if err := s.Write(1, l, region.Shape(100, 8), data); err != nil {
				t.Fatal(err)
			}
			small := l
			small.Dims = []uint64{50, 8}
			switch name {
			case "shrink":
				// Applies the shrink holding the object; the readers
				// below find it applied.
				if err := s.Write(1, small, region.Shape(1, 8), data[:8]); err != nil {
					t.Fatal(err)
				}
			case "flush":
				// Loads the object without applying any dims.
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				s = openStore(t, dir, false)
				if err := s.Flush(1); err != nil {
					t.Fatal(err)
				}
			}
			defer func() { _ = s.Close() }()
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got := make([]byte, 50*8)
					if err := s.Read(1, small, region.Shape(50, 8), got); err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(got, data[:50*8]) {
						errs <- errors.New("object differs")
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}
