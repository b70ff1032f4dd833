package dtl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc/internal/dtl/lane"
	"github.com/pdcgo/pdc/internal/netio"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// sealed are the seals of a memory file that may be mapped safely: it can
// neither shrink (a mapping past its end would fault) nor change.
const sealed = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL

// memfdWith makes a sealed memory file holding b.
func memfdWith(name string, b []byte) (*os.File, error) {
	f, err := newMemfd(name)
	if err != nil {
		return nil, err
	}
	for off := 0; off < len(b); {
		n, err := f.WriteAt(b[off:min(len(b), off+1<<30)], int64(off))
		off += n
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("filling memfd: %w", err)
		}
	}
	return f, seal(f)
}

// memfdCopy makes a sealed memory file holding n bytes of src from off.
func memfdCopy(ctx context.Context, name string, src *os.File, off, n int64) (*os.File, error) {
	f, err := newMemfd(name)
	if err != nil {
		return nil, err
	}
	if _, err := copyRange(ctx, src, off, f, 0, n); err != nil {
		f.Close()
		return nil, fmt.Errorf("copying %s into memfd: %w", src.Name(), err)
	}
	return f, seal(f)
}

func newMemfd(name string) (*os.File, error) {
	// The name only labels the file (/proc/<pid>/fd); memfd_create refuses
	// one with a NUL byte, which a key may hold (every staging key does).
	if i := strings.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	if len(name) > 200 {
		name = name[:200]
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

func seal(f *os.File) error {
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, sealed); err != nil {
		f.Close()
		return fmt.Errorf("sealing memfd: %w", err)
	}
	return nil
}

// isSealed reports whether f cannot shrink.
func isSealed(f *os.File) bool {
	s, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0)
	return err == nil && s&unix.F_SEAL_SHRINK != 0
}

// serveShm hands claimed payloads' descriptors to receivers on one Unix
// connection until it ends.
func (s *Sender) serveShm(nc net.Conn) {
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return
	}
	var hb [requestSize]byte
	for {
		if err := readHeader(nc, hb[:], s.cfg.Stall, func(b []byte) error {
			_, err := netio.ReadFull(s.ctx, nc, b)
			return err
		}); err != nil {
			return
		}
		var r request
		if err := r.decode(hb[:], magicShm); err != nil {
			s.refuse(nc, magicShmAck, err)
			return
		}
		e, err := s.claim(&r, false)
		if err != nil {
			if _, werr := nc.Write(errAnswer(magicShmAck, err)); werr != nil {
				return
			}
			continue
		}
		f := e.memfd
		a := answer{size: uint64(e.src.Size())}
		if f == nil {
			f, a.off = e.src.File, uint64(e.src.Off)
		}
		hdr := a.put(make([]byte, 0, answerSize), magicShmAck)
		_, _, err = uc.WriteMsgUnix(hdr, unix.UnixRights(int(f.Fd())), nil)
		// The descriptor in flight holds the file open: ours can go.
		e.release()
		if err != nil {
			return
		}
		s.shmBytes.Add(a.size)
	}
}

// shmMapping is a payload mapped from a sender's memory file.
type shmMapping struct {
	region []byte // the whole mapping, page aligned
	data   []byte
}

func (m *shmMapping) unmap() {
	if m.region != nil {
		_ = unix.Munmap(m.region)
		m.region = nil
	}
}

// mapShm fetches the payload's descriptor and maps the payload read-only.
func mapShm(ctx context.Context, rep *wire.FetchReply) (*shmMapping, error) {
	fd, off, size, err := recvShmFD(ctx, rep)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "shm") // owns fd from here
	defer f.Close()
	if size == 0 {
		return &shmMapping{}, nil
	}
	if !isSealed(f) {
		// A file that may shrink would fault a reader of the mapping
		// (SIGBUS): copy it instead.
		b := make([]byte, size)
		if _, err := parallelReadAt(f, b, int64(off)); err != nil {
			return nil, shmReadErr(err)
		}
		return &shmMapping{data: b}, nil
	}
	pg := uint64(os.Getpagesize())
	aoff := off &^ (pg - 1)
	delta := off - aoff
	region, err := unix.Mmap(int(f.Fd()), int64(aoff), int(size+delta), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("shm: mmap %d bytes: %w", size, err)
	}
	return &shmMapping{region: region, data: region[delta : delta+size]}, nil
}

// readShm fetches the payload's descriptor and reads the payload into
// sink. Reading the memory file (pread, copy_file_range) costs one copy in
// the kernel; mapping it would add a page fault or a page-table entry per
// page, which on this machine makes the copy three times slower.
func readShm(ctx context.Context, rep *wire.FetchReply, sink Sink) (int64, error) {
	fd, off, size, err := recvShmFD(ctx, rep)
	if err != nil {
		return 0, err
	}
	f := os.NewFile(uintptr(fd), "shm") // owns fd from here
	defer f.Close()
	src := ctxReaderAt{ctx: ctx, r: f}
	switch {
	case sink.Buf != nil:
		n, err := parallelReadAt(src, sink.Buf[:size], int64(off))
		return n, shmReadErr(err)
	case sink.File != nil:
		n, err := copyRange(ctx, f, int64(off), sink.File, sink.Off, int64(size))
		return n, shmReadErr(err)
	default:
		if sr, ok := sink.W.(SectionReceiver); ok {
			n, err := sr.ReceiveSection(src, int64(off), int64(size))
			if err == nil && uint64(n) != size {
				err = io.ErrUnexpectedEOF
			}
			return n, shmReadErr(err)
		}
		n, err := io.Copy(sink.W, io.NewSectionReader(src, int64(off), int64(size)))
		if err == nil && uint64(n) != size {
			err = io.ErrUnexpectedEOF
		}
		return n, shmReadErr(err)
	}
}

// shmStep is the most of the sender's file read or copied between two
// looks at the caller's context.
const shmStep = 16 << 20

// ctxReaderAt reads r, a sender's file, until ctx ends. Reading it is
// local I/O that no socket deadline bounds: a large payload would be
// copied to its end past the caller's deadline (seconds per GiB), and
// the fetch then succeed after it. ctx is looked at before every step.
type ctxReaderAt struct {
	ctx context.Context
	r   io.ReaderAt
}

func (c ctxReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		if err := c.ctx.Err(); err != nil {
			return n, err
		}
		k, err := c.r.ReadAt(p[n:min(len(p), n+shmStep)], off+int64(n))
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// parallelReadAt fills b from f at off, large payloads in one part per
// processor: a copy out of the kernel's page cache runs at a third of a
// plain memcpy per core, and the cores are otherwise idle while a
// receiver waits for its payload.
func parallelReadAt(f io.ReaderAt, b []byte, off int64) (int64, error) {
	parts := runtime.GOMAXPROCS(0)
	if len(b) < 16<<20 || parts < 2 {
		n, err := f.ReadAt(b, off)
		if err == io.EOF && n == len(b) {
			err = nil
		}
		return int64(n), err
	}
	per := (len(b)/parts + 4095) &^ 4095
	var wg sync.WaitGroup
	errs := make([]error, parts)
	for i := range parts {
		lo := min(i*per, len(b))
		hi := min(lo+per, len(b))
		if lo == hi {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := f.ReadAt(b[lo:hi], off+int64(lo))
			if err == io.EOF && n == hi-lo {
				err = nil
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return int64(len(b)), nil
}

func shmReadErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("shm: the sender's file ended early: %w: %w", ErrPeerFailed, err)
	}
	return err
}

// copyRange copies n bytes of src at off to dst at doff in the kernel
// (copy_file_range), falling back to a copy through a buffer, until ctx
// ends.
func copyRange(ctx context.Context, src *os.File, off int64, dst *os.File, doff int64, n int64) (int64, error) {
	var done int64
	for done < n {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		o, d := off+done, doff+done
		k, err := unix.CopyFileRange(int(src.Fd()), &o, int(dst.Fd()), &d, int(min(n-done, shmStep)), 0)
		if k > 0 {
			done += int64(k)
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil || k == 0 {
			if done == 0 || err != nil && (err == unix.EXDEV || err == unix.EINVAL || err == unix.ENOSYS || err == unix.EOPNOTSUPP) {
				break
			}
			if err == nil {
				return done, io.ErrUnexpectedEOF
			}
			return done, err
		}
	}
	if done < n {
		k, err := netio.CopyToFile(io.NewSectionReader(ctxReaderAt{ctx: ctx, r: src}, off+done, n-done), dst, doff+done, n-done, make([]byte, 1<<20))
		return done + k, err
	}
	return done, nil
}

// recvShmFD fetches the descriptor of the handle in rep from the sender's
// Unix socket, with the payload's offset and size in its file.
func recvShmFD(ctx context.Context, rep *wire.FetchReply) (fd int, off, size uint64, err error) {
	if len(rep.Token) != tokenSize || rep.Addr == "" {
		return -1, 0, 0, fmt.Errorf("shm answer without a socket or with a %d-byte token: %w", len(rep.Token), ErrBadPack)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", rep.Addr)
	if err != nil {
		return -1, 0, 0, fmt.Errorf("shm socket %s: %w: %w", rep.Addr, ErrPeerFailed, err)
	}
	defer nc.Close()
	uc := nc.(*net.UnixConn)
	r := request{id: rep.Handle}
	copy(r.token[:], rep.Token)
	if _, err := netio.WriteFull(ctx, nc, r.put(nil, magicShm)); err != nil {
		return -1, 0, 0, fmt.Errorf("shm socket %s: %w: %w", rep.Addr, ErrPeerFailed, err)
	}
	done := netio.Interrupt(ctx, nc, true)
	var b [answerSize]byte
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := uc.ReadMsgUnix(b[:], oob)
	if done() && err == nil {
		_ = nc.SetReadDeadline(time.Time{})
	} else if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	fd = -1
	if oobn > 0 {
		// Take a descriptor that arrived even if the read then failed:
		// otherwise it leaks.
		var perr error
		if fd, perr = parseRights(oob[:oobn]); err == nil {
			err = perr
		}
	}
	fail := func(err error) (int, uint64, uint64, error) {
		if fd >= 0 {
			unix.Close(fd)
		}
		return -1, 0, 0, err
	}
	if err != nil {
		return fail(fmt.Errorf("shm socket %s: %w: %w", rep.Addr, ErrPeerFailed, err))
	}
	if n < answerSize {
		if _, err := netio.ReadFull(ctx, nc, b[n:]); err != nil {
			return fail(fmt.Errorf("shm socket %s: %w: %w", rep.Addr, ErrPeerFailed, err))
		}
	}
	var a answer
	if err := a.decode(b[:], magicShmAck); err != nil {
		return fail(err)
	}
	if a.code != wire.CodeOK {
		msg := make([]byte, a.msgLen)
		if _, err := netio.ReadFull(ctx, nc, msg); err != nil {
			return fail(fmt.Errorf("shm socket %s: %w: %w", rep.Addr, ErrPeerFailed, err))
		}
		return fail(fmt.Errorf("peer %s: %s: %w", rep.Addr, msg, a.code.Err()))
	}
	if fd < 0 {
		return fail(fmt.Errorf("shm answer without a descriptor: %w", ErrBadPack))
	}
	if a.size != rep.Size {
		return fail(fmt.Errorf("shm answer of %d bytes for a %d-byte payload: %w", a.size, rep.Size, ErrBadPack))
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fail(fmt.Errorf("shm: fstat: %w", err))
	}
	if a.off+a.size > uint64(st.Size) {
		return fail(fmt.Errorf("shm payload [%d, +%d) past the end of its %d-byte file: %w", a.off, a.size, st.Size, ErrBadPack))
	}
	return fd, a.off, a.size, nil
}

func parseRights(oob []byte) (int, error) {
	fd := lane.ReceivedFD(oob)
	if fd < 0 {
		return -1, fmt.Errorf("no descriptor in the control message: %w", ErrBadPack)
	}
	return fd, nil
}

// shm hands over a memory file's descriptor on this host.
type (
	shmSend struct{ s *Sender }
	shmRecv struct{ r *Receiver }
)

func (*shmSend) Mode() Mode { return ModeShm }
func (*shmRecv) Mode() Mode { return ModeShm }

func (t *shmSend) Send(ctx context.Context, _ *rpc.Request, req *wire.FetchRequest, src Source, reply *wire.FetchReply) error {
	// A buffer goes into a sealed memory file. A file goes as it is (read
	// by the receiver: a file that shrinks meanwhile is a short read, an
	// error), unless the receiver maps it and it is not sealed against
	// shrinking: then a sealed copy goes.
	var memfd *os.File
	var err error
	name := fmt.Sprintf("pdc-dtl-%s", req.Key)
	switch {
	case src.File == nil:
		memfd, err = memfdWith(name, src.Buf)
	case req.Map && !isSealed(src.File):
		memfd, err = memfdCopy(ctx, name, src.File, src.Off, src.Len)
	}
	if err != nil {
		src.release()
		return fmt.Errorf("shm: %w", err)
	}
	e, err := t.s.expose(src, memfd, nil)
	if err != nil {
		(&exposed{src: src, memfd: memfd}).release()
		return err
	}
	reply.Addr, reply.Handle, reply.Token, reply.TTL = t.s.shmPath, e.id, e.tok[:], uint64(t.s.cfg.HandleTTL)
	return nil
}

func (t *shmRecv) Prepare(_ context.Context, _ Peer, _ *wire.FetchRequest, sink Sink) (*Transfer, error) {
	return &Transfer{sink: sink}, nil
}

func (t *shmRecv) Receive(ctx context.Context, tr *Transfer, rep *wire.FetchReply) (int64, error) {
	return readShm(ctx, rep, tr.sink)
}

// The shm receiving half maps the sender's memory file for FetchView.
var _ viewer = (*shmRecv)(nil)

func (*shmRecv) canView(peer string) bool { return SameHost(peer) }

func (*shmRecv) view(ctx context.Context, rep *wire.FetchReply) (*View, error) {
	m, err := mapShm(ctx, rep)
	if err != nil {
		return nil, err
	}
	return &View{m: m}, nil
}
