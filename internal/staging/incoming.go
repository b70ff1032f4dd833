package staging

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc"
)

// Incoming is a fetched file arriving into its temporary file: the one
// copy of its bytes from the network (or the owner's file) into the file,
// checksummed as it arrives.
//
// A large file is pipelined across pieces: the caller's goroutine (the
// fetch) reads a piece from the network into a buffer and goes on to the
// next while a writer goroutine checksums the piece, still in the CPU's
// cache, and writes it at its offset. Reading the socket, checksumming and
// writing thus run on two processors instead of one after the other; the
// sender's is a third. Small files are written as they come, on the
// caller's goroutine: handing a piece over costs more than it saves.
// So are all files on a machine of two processors or fewer, where the
// writer would take the processor the sender or the fetch needs: measured
// with `pdc bench stage` on 2 cores, a pipelined 1 GiB consume was 20-30%
// slower than writing on the caller's goroutine.
//
// Write, ReadFrom and ReceiveSection are called by one goroutine at a
// time (the fetch, or the push filling it), and not after Finish, which
// waits for the writer and reports what was written. The caller owns f.
type Incoming struct {
	f        *os.File
	size     int64 // expected, for the pipeline's piece size and progress
	progress func(done, total int64)

	off int64 // bytes taken, in order, by Write and ReadFrom
	crc uint32
	err error // the first write error, sticky

	// The pipeline, from the first large ReadFrom until Finish.
	pipe *pipeline
	// sections: ReceiveSection's parts report progress under mu.
	mu   sync.Mutex
	done int64
}

// pipeMin is the size from which a file is pipelined: below it one
// piece would be the whole file, handed over for nothing.
const pipeMin = 256 << 10

// pipeProcs is the fewest processors with which a file is pipelined; a
// test lowers it to exercise the pipeline on a small machine.
var pipeProcs = 3

// Pieces are a quarter of the file up to pieceMax, so that even a file
// of a few pieces overlaps its reading and writing; pipeDepth of them are
// in flight. A piece stays in the processors' caches between its read
// from the socket and its checksum and write.
const (
	pieceMax  = 1 << 20
	pieceMin  = 64 << 10
	pipeDepth = 4
)

// pieces keeps the pipeline's buffers: a fresh one costs a page fault per
// 4 KiB.
var pieces = sync.Pool{New: func() any { return new([pieceMax]byte) }}

type piece struct {
	b *[pieceMax]byte
	n int
}

type pipeline struct {
	full   chan piece           // to the writer, in file order
	free   chan *[pieceMax]byte // back from it
	failed chan struct{}        // closed on the writer's first error
	done   chan struct{}        // closed when the writer has returned
	err    error                // the writer's; read after failed or done
	size   int                  // bytes per piece
	owned  []*[pieceMax]byte    // every buffer taken, returned by Finish
}

// NewIncoming receives a file of size bytes into f from offset 0.
// progress, if set, is called as bytes are written, in order.
func NewIncoming(f *os.File, size int64, progress func(done, total int64)) *Incoming {
	return &Incoming{f: f, size: size, progress: progress}
}

// Write checksums p and writes it at the next offset.
func (in *Incoming) Write(p []byte) (int, error) {
	if err := in.take(int64(len(p))); err != nil {
		return 0, err
	}
	if in.pipe != nil {
		return in.queue(p)
	}
	if err := in.writePiece(p, in.off); err != nil {
		in.err = err
		return 0, err
	}
	in.off += int64(len(p))
	return len(p), nil
}

// take checks that n more bytes still fit in the file's size: a sender
// that sends more (a hostile or broken owner) is refused at the first
// byte past it, before anything past it is written. A file of the
// record's size and no larger fits in the consumer dir; any more would be
// written there, up to whatever the sender says, before the size check at
// the end refused it.
func (in *Incoming) take(n int64) error {
	if in.err != nil {
		return in.err
	}
	if n > in.size-in.off {
		in.err = fmt.Errorf("the sender sent more than the %d bytes expected: %w", in.size, pdc.ErrChecksum)
		return in.err
	}
	return nil
}

func (in *Incoming) writePiece(p []byte, off int64) error {
	in.crc = crc32.Update(in.crc, Table, p)
	if _, err := in.f.WriteAt(p, off); err != nil {
		return err
	}
	if in.progress != nil {
		in.progress(off+int64(len(p)), in.size)
	}
	return nil
}

// ReadFrom reads r to its end into the file. A large file goes through
// the pipeline; a read error ends ReadFrom at once, with the pieces read
// before it still written.
func (in *Incoming) ReadFrom(r io.Reader) (int64, error) {
	if in.pipe == nil && in.size-in.off >= pipeMin && runtime.GOMAXPROCS(0) >= pipeProcs {
		in.start()
	}
	if in.pipe == nil {
		b := Buf()
		defer PutBuf(b)
		return in.readDirect(r, b[:directChunk(in.size-in.off)])
	}
	var total int64
	for {
		b, err := in.freeBuf()
		if err != nil {
			return total, err
		}
		n, rerr := io.ReadFull(r, b[:in.pipe.size])
		if n > 0 {
			if err := in.take(int64(n)); err != nil {
				in.pipe.free <- b
				return total, err
			}
			if err := in.send(piece{b: b, n: n}); err != nil {
				return total, err
			}
			total += int64(n)
		} else {
			in.pipe.free <- b
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			return total, nil
		}
		if rerr != nil {
			return total, rerr
		}
	}
}

// directChunk is how much of a file of n bytes still to come is read
// before it is written, without the pipeline: a quarter of it (at least
// 64 KiB), so that the sender goes on filling the socket while the first
// parts are checksummed and written, instead of the whole file arriving
// before any of it is written.
func directChunk(n int64) int {
	return int(min(max(n/4, pieceMin), bufSize))
}

func (in *Incoming) readDirect(r io.Reader, buf []byte) (int64, error) {
	var total int64
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if _, werr := in.Write(buf[:n]); werr != nil {
				return total, werr
			}
			total += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// start sets the pipeline up and starts its writer, which Finish stops.
func (in *Incoming) start() {
	size := min(max(int(in.size/4)&^4095, pieceMin), pieceMax)
	p := &pipeline{full: make(chan piece, pipeDepth), free: make(chan *[pieceMax]byte, pipeDepth),
		failed: make(chan struct{}), done: make(chan struct{}), size: size}
	in.pipe = p
	off := in.off
	go func() {
		defer close(p.done)
		for pc := range p.full {
			if p.err == nil {
				if err := in.writePiece(pc.b[:pc.n], off); err != nil {
					p.err = err
					close(p.failed)
				}
				off += int64(pc.n)
			}
			p.free <- pc.b
		}
	}()
}

// freeBuf is a buffer for the next piece: a new one while fewer than
// pipeDepth are in use, else one the writer gave back.
func (in *Incoming) freeBuf() (*[pieceMax]byte, error) {
	p := in.pipe
	if len(p.owned) < pipeDepth {
		select {
		case b := <-p.free:
			return b, nil
		default:
		}
		b := pieces.Get().(*[pieceMax]byte)
		p.owned = append(p.owned, b)
		return b, nil
	}
	select {
	case b := <-p.free:
		return b, nil
	case <-p.failed:
		return nil, p.err
	}
}

// send hands a piece to the writer.
func (in *Incoming) send(pc piece) error {
	p := in.pipe
	select {
	case <-p.failed:
		p.free <- pc.b
		return p.err
	default:
	}
	// full has room for every buffer, so this never blocks.
	p.full <- pc
	in.off += int64(pc.n)
	return nil
}

// queue copies p into pieces for the writer: a Write after the pipeline
// started must keep the file's order.
func (in *Incoming) queue(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		b, err := in.freeBuf()
		if err != nil {
			return done, err
		}
		n := copy(b[:in.pipe.size], p[done:])
		if err := in.send(piece{b: b, n: n}); err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}

// ReceiveSection copies n bytes of r from off into the file (shm hands the
// owner's file over as a section), in one part per processor for a large
// file, each part checksummed from the buffer it is written from; the
// parts' checksums are then combined in order.
func (in *Incoming) ReceiveSection(r io.ReaderAt, off, n int64) (int64, error) {
	if in.pipe != nil || in.err != nil {
		return 0, fmt.Errorf("staging: a section after a stream: %w", errMixed)
	}
	if err := in.take(n); err != nil {
		return 0, err
	}
	parts := int64(runtime.GOMAXPROCS(0))
	if n < 32<<20 || parts < 2 {
		parts = 1
	}
	per := (n/parts + 4095) &^ 4095
	crcs := make([]uint32, parts)
	lens := make([]int64, parts)
	errs := make([]error, parts)
	wrote := make([]bool, parts) // errs[i] is a write's
	base := in.off
	part := func(i, lo, hi int64) {
		b := Buf()
		defer PutBuf(b)
		for at := lo; at < hi; {
			k := min(int64(len(b)), hi-at)
			got, err := r.ReadAt(b[:k], off+at)
			if got < int(k) {
				if err == nil || err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				errs[i] = err
				return
			}
			crcs[i] = crc32.Update(crcs[i], Table, b[:k])
			if _, err := in.f.WriteAt(b[:k], base+at); err != nil {
				errs[i], wrote[i] = err, true
				return
			}
			at += k
			if in.progress != nil {
				in.mu.Lock()
				in.done += k
				in.progress(base+in.done, in.size)
				in.mu.Unlock()
			}
		}
	}
	var wg sync.WaitGroup
	for i := range parts {
		lo := min(i*per, n)
		hi := min(lo+per, n)
		lens[i] = hi - lo
		if parts == 1 {
			part(i, lo, hi)
			break
		}
		wg.Go(func() { part(i, lo, hi) })
	}
	wg.Wait()
	// The first part's error tells; the others are mostly the same one
	// (a context that ended, a file cut short). A write's is the file's
	// and sticks; a read's is the sender's, which the fetch reports.
	for i, err := range errs {
		if err == nil {
			continue
		}
		if slices.Contains(wrote, true) {
			in.err = errs[slices.Index(wrote, true)]
		}
		return 0, errs[i]
	}
	crc := crcs[0]
	for i := int64(1); i < parts; i++ {
		crc = CombineCRC(crc, crcs[i], lens[i])
	}
	in.crc = CombineCRC(in.crc, crc, n)
	in.off += n
	return n, nil
}

var errMixed = errors.New("pdc: internal: mixed receive")

// Finish stops the writer once it has written every piece and reports the
// bytes written and their CRC-32C, or the first write error. Idempotent.
func (in *Incoming) Finish() (int64, uint32, error) {
	if p := in.pipe; p != nil {
		close(p.full)
		<-p.done
		for _, b := range p.owned {
			pieces.Put(b)
		}
		if p.err != nil && in.err == nil {
			in.err = p.err
		}
		in.pipe = nil
	}
	return in.off, in.crc, in.err
}

// CheckRoom fails, wrapping ENOSPC, if the file system holding f has fewer
// than n bytes free for it: a large file that cannot fit fails before any
// of it moves. A file system that cannot say passes; the writes still
// fail cleanly if the room runs out.
func CheckRoom(f *os.File, n int64) error {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil || st.Bsize <= 0 {
		return nil
	}
	free := int64(st.Bavail) * st.Bsize
	if st.Bavail > uint64(1<<62)/uint64(st.Bsize) || free >= n {
		return nil
	}
	return fmt.Errorf("%d bytes needed, %d free: %w", n, free, unix.ENOSPC)
}
