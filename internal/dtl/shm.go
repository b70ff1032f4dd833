package dtl

import (
	"context"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc/internal/netio"
	"github.com/pdcgo/pdc/internal/wire"
)

// memfdWith makes a memory file holding b.
func memfdWith(name string, b []byte) (*os.File, error) {
	if len(name) > 200 {
		name = name[:200]
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	for off := 0; off < len(b); {
		n, err := f.WriteAt(b[off:min(len(b), off+1<<30)], int64(off))
		off += n
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("filling memfd: %w", err)
		}
	}
	return f, nil
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
		if _, err := netio.ReadFull(s.ctx, nc, hb[:]); err != nil {
			return
		}
		var r request
		if err := r.decode(hb[:], magicShm); err != nil {
			s.refuse(nc, magicShmAck, err)
			return
		}
		e, err := s.claim(&r)
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

// mapShm fetches the descriptor of handle from the sender's Unix socket and
// maps the payload read-only.
func mapShm(ctx context.Context, rep *wire.FetchReply) (*shmMapping, error) {
	if len(rep.Token) != tokenSize || rep.Addr == "" {
		return nil, fmt.Errorf("shm answer without a socket or with a %d-byte token: %w", len(rep.Token), ErrBadPack)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", rep.Addr)
	if err != nil {
		return nil, fmt.Errorf("shm socket %s: %w: %w", rep.Addr, ErrPeerFailed, err)
	}
	defer nc.Close()
	uc := nc.(*net.UnixConn)
	r := request{id: rep.Handle}
	copy(r.token[:], rep.Token)
	if _, err := netio.WriteFull(ctx, nc, r.put(nil, magicShm)); err != nil {
		return nil, fmt.Errorf("shm socket %s: %w: %w", rep.Addr, ErrPeerFailed, err)
	}
	done := netio.Interrupt(ctx, nc, true)
	var b [answerSize]byte
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := uc.ReadMsgUnix(b[:], oob)
	if done() {
		err = fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	var fd = -1
	if err == nil && oobn > 0 {
		fd, err = parseRights(oob[:oobn])
	}
	if fd >= 0 {
		defer unix.Close(fd)
	}
	if err != nil {
		return nil, fmt.Errorf("shm socket %s: %w: %w", rep.Addr, ErrPeerFailed, err)
	}
	if n < answerSize {
		if _, err := netio.ReadFull(ctx, nc, b[n:]); err != nil {
			return nil, fmt.Errorf("shm socket %s: %w: %w", rep.Addr, ErrPeerFailed, err)
		}
	}
	var a answer
	if err := a.decode(b[:], magicShmAck); err != nil {
		return nil, err
	}
	if a.code != wire.CodeOK {
		msg := make([]byte, a.msgLen)
		if _, err := netio.ReadFull(ctx, nc, msg); err != nil {
			return nil, fmt.Errorf("shm socket %s: %w: %w", rep.Addr, ErrPeerFailed, err)
		}
		return nil, fmt.Errorf("peer %s: %s: %w", rep.Addr, msg, a.code.Err())
	}
	if fd < 0 {
		return nil, fmt.Errorf("shm answer without a descriptor: %w", ErrBadPack)
	}
	if a.size != rep.Size {
		return nil, fmt.Errorf("shm answer of %d bytes for a %d-byte payload: %w", a.size, rep.Size, ErrBadPack)
	}
	if a.size == 0 {
		return &shmMapping{}, nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("shm: fstat: %w", err)
	}
	if a.off+a.size > uint64(st.Size) {
		return nil, fmt.Errorf("shm payload [%d, +%d) past the end of its %d-byte file: %w", a.off, a.size, st.Size, ErrBadPack)
	}
	pg := uint64(os.Getpagesize())
	aoff := a.off &^ (pg - 1)
	delta := a.off - aoff
	region, err := unix.Mmap(fd, int64(aoff), int(a.size+delta), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: mmap %d bytes: %w", a.size, err)
	}
	return &shmMapping{region: region, data: region[delta : delta+a.size]}, nil
}

func parseRights(oob []byte) (int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return -1, err
	}
	fd := -1
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, f := range fds {
			if fd < 0 {
				fd = f
			} else {
				unix.Close(f)
			}
		}
	}
	if fd < 0 {
		return -1, fmt.Errorf("no descriptor in the control message: %w", ErrBadPack)
	}
	return fd, nil
}
