package dtl

import (
	"fmt"
	"io"
	"net"
	"os"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/netio"
)

var errOutOfRange = pdc.ErrOutOfRange

// Source is what a sender sends: a buffer, or a section of a file (sent
// from the page cache without a pass through user space where the OS
// allows, and handed over as is in shm mode).
type Source struct {
	Buf  []byte
	File *os.File
	// Off and Len select the file's section.
	Off, Len int64
	// Release, if set, is called exactly once when the transport no longer
	// needs the source: after the send, or when an exposed handle is
	// pulled or expires. Close files or drop locks here.
	Release func()
}

// Bytes is a buffer source.
func Bytes(b []byte) Source { return Source{Buf: b} }

// FileSection is a source of n bytes of f from off.
func FileSection(f *os.File, off, n int64) Source { return Source{File: f, Off: off, Len: n} }

// Size is the number of bytes the source holds.
func (s Source) Size() int64 {
	if s.File != nil {
		return s.Len
	}
	return int64(len(s.Buf))
}

func (s Source) release() {
	if s.Release != nil {
		s.Release()
	}
}

// section narrows s to [off, off+n) of its bytes; n 0 means to the end.
func (s Source) section(off, n uint64) (Source, error) {
	size := uint64(s.Size())
	if off > size || (n != 0 && n > size-off) {
		return Source{}, fmt.Errorf("section [%d, +%d) of a %d-byte payload: %w", off, n, size, errOutOfRange)
	}
	if n == 0 {
		n = size - off
	}
	if s.File != nil {
		s.Off += int64(off)
		s.Len = int64(n)
		return s, nil
	}
	s.Buf = s.Buf[off : off+n]
	return s, nil
}

// readAt copies the source's bytes from off into p.
func (s Source) readAt(p []byte, off int64) error {
	if s.File == nil {
		copy(p, s.Buf[off:])
		return nil
	}
	_, err := s.File.ReadAt(p, s.Off+off)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// Sink is where a receiver puts the bytes: the front of Buf, File at Off,
// or W. Exactly one is set.
type Sink struct {
	Buf  []byte
	File *os.File
	Off  int64
	W    io.Writer
	// expect is the payload's expected size + 1 (WithExpectedSize); 0:
	// unknown.
	expect int64
}

// small reports whether the payload will come in the answer: the buffer
// holds no more, or it is expected no larger.
func (s Sink) small() bool {
	return (s.Buf != nil && len(s.Buf) <= EagerLimit) || (s.expect > 0 && s.expect-1 <= EagerLimit)
}

// IntoBuffer is a sink that fills the front of b.
func IntoBuffer(b []byte) Sink { return Sink{Buf: b} }

// IntoFile is a sink that writes f from off.
func IntoFile(f *os.File, off int64) Sink { return Sink{File: f, Off: off} }

// IntoWriter is a sink that writes to w. A w that is also a
// SectionReceiver takes shm payloads through ReceiveSection instead.
func IntoWriter(w io.Writer) Sink { return Sink{W: w} }

// SectionReceiver is a writer sink that can take the whole payload at once
// as a random-access section, as shm hands it over (the sender's memory or
// file), to read it in parallel or in any order.
type SectionReceiver interface {
	// ReceiveSection reads n bytes of r from off and returns how many it
	// took.
	ReceiveSection(r io.ReaderAt, off, n int64) (int64, error)
}

func (s Sink) check() error {
	n := 0
	if s.Buf != nil {
		n++
	}
	if s.File != nil {
		n++
	}
	if s.W != nil {
		n++
	}
	if n != 1 {
		return fmt.Errorf("a sink needs exactly one of a buffer, a file or a writer (%d given): %w", n, ErrBadBuffer)
	}
	return nil
}

// capacity is the most the sink takes (0: no bound).
func (s Sink) capacity() uint64 {
	if s.Buf != nil {
		return uint64(len(s.Buf))
	}
	return 0
}

// fits checks that size bytes fit.
func (s Sink) fits(size uint64) error {
	if s.Buf != nil && size > uint64(len(s.Buf)) {
		return fmt.Errorf("the payload has %d bytes and the buffer holds %d: %w", size, len(s.Buf), ErrBadBuffer)
	}
	return nil
}

// sinkWriter writes a sink's bytes in order.
type sinkWriter struct {
	s   Sink
	n   int64
	buf []byte // for files
}

// readFrom consumes exactly n bytes of r into the sink.
func (w *sinkWriter) readFrom(r io.Reader, n int64) error {
	switch {
	case w.s.Buf != nil:
		if w.n+n > int64(len(w.s.Buf)) {
			return fmt.Errorf("%d bytes more than the %d-byte buffer holds: %w", w.n+n-int64(len(w.s.Buf)), len(w.s.Buf), ErrBadBuffer)
		}
		k, err := io.ReadFull(r, w.s.Buf[w.n:w.n+n])
		w.n += int64(k)
		return err
	case w.s.File != nil:
		if n == 0 {
			return nil
		}
		if w.buf == nil {
			w.buf = make([]byte, 1<<20)
		}
		k, err := netio.CopyToFile(r, w.s.File, w.s.Off+w.n, n, w.buf)
		w.n += k
		return err
	default:
		k, err := io.CopyN(w.s.W, r, n)
		w.n += k
		return err
	}
}

// write puts p into the sink.
func (w *sinkWriter) write(p []byte) error {
	switch {
	case w.s.Buf != nil:
		if w.n+int64(len(p)) > int64(len(w.s.Buf)) {
			return fmt.Errorf("the payload exceeds the %d-byte buffer: %w", len(w.s.Buf), ErrBadBuffer)
		}
		copy(w.s.Buf[w.n:], p)
	case w.s.File != nil:
		if _, err := w.s.File.WriteAt(p, w.s.Off+w.n); err != nil {
			return err
		}
	default:
		if _, err := w.s.W.Write(p); err != nil {
			return err
		}
	}
	w.n += int64(len(p))
	return nil
}

// payloadReader reads the n bytes of a payload from a bulk connection
// (pull, push) with the receive low-water mark raised to what is still to
// come (netio.LowWater): the kernel wakes the reader once a megabyte or two
// has arrived, not at every segment, and on loopback each wake-up is paid
// by the sender too. The mark never exceeds the bytes still promised;
// done lowers it before the connection reads anything else.
type payloadReader struct {
	nc   net.Conn
	lw   netio.LowWater
	left int64
}

func newPayloadReader(nc net.Conn, n int64) *payloadReader {
	return &payloadReader{nc: nc, lw: netio.NewLowWater(nc), left: n}
}

func (r *payloadReader) Read(p []byte) (int, error) {
	r.lw.ExpectRead(r.left, len(p))
	n, err := r.nc.Read(p)
	r.left -= int64(n)
	return n, err
}

func (r *payloadReader) done() { r.lw.Expect(0) }
