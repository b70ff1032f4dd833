package dtl_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"testing"

	"github.com/pdcgo/pdc/internal/dtl"
)

// sectionSink records how it was fed: by ReceiveSection (shm) or by Write.
type sectionSink struct {
	buf      bytes.Buffer
	sections int
}

func (s *sectionSink) Write(p []byte) (int, error) { return s.buf.Write(p) }

func (s *sectionSink) ReceiveSection(r io.ReaderAt, off, n int64) (int64, error) {
	s.sections++
	k, err := io.Copy(&s.buf, io.NewSectionReader(r, off, n))
	return k, err
}

// A writer sink that takes sections gets shm payloads whole, as a section
// of the sender's file; other modes write to it as a stream.
func TestSectionReceiverSink(t *testing.T) {
	data := make([]byte, 3<<20+17)
	for i := range data {
		data[i] = byte(i * 13)
	}
	f, err := os.CreateTemp(t.TempDir(), "payload")
	if err != nil {
		t.Fatal(err)
	}
	// Closed after the sender (cleanups run last first): its shm side
	// channel may still hold the file when a fetch returns.
	t.Cleanup(func() { f.Close() })
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	const off = 5
	addr, secret := inproc(t, func(ctx context.Context, key []byte) (dtl.Source, error) {
		return dtl.FileSection(f, off, int64(len(data)-off)), nil
	})
	for _, m := range dtl.Modes {
		var s sectionSink
		n, err := recv(t, secret, m).Fetch(context.Background(), addr, []byte("k"), dtl.IntoWriter(&s))
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if n != int64(len(data)-off) || !bytes.Equal(s.buf.Bytes(), data[off:]) {
			t.Fatalf("%s: %d bytes, equal %v", m, n, bytes.Equal(s.buf.Bytes(), data[off:]))
		}
		if want := m == dtl.ModeShm; (s.sections == 1) != want {
			t.Fatalf("%s: %d sections received", m, s.sections)
		}
	}
}
