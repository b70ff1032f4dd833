package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc/internal/dtl/lane"
	"github.com/pdcgo/pdc/internal/netio"
)

// ShmSourceServer is the raw ceiling of a transfer through shared memory
// between two processes: the client hands it a memory file of two slots
// (its size and descriptor, on a Unix socket); asked for n bytes (an
// 8-byte request), it copies them from its memory into the slots in turn,
// a byte on the socket saying that the next slot is full, and fills a
// slot again once the client has said (a byte back) that it emptied it.
// Each byte thus crosses memory twice, as a region's do through a lane,
// with nothing else in between.
type ShmSourceServer struct{ *rawServer }

// NewShmSourceServer serves on ln (a Unix socket) until Close.
func NewShmSourceServer(ln net.Listener) *ShmSourceServer {
	buf := make([]byte, 16<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	return &ShmSourceServer{newRawServer(func(nc net.Conn) { shmSource(nc, buf) }, ln)}
}

// shmSlot is the size of each of the two slots.
const shmSlot = 4 << 20

func shmSource(nc net.Conn, buf []byte) {
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return
	}
	var hdr [8]byte
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := uc.ReadMsgUnix(hdr[:], oob)
	if err != nil || n != len(hdr) {
		return
	}
	fd := lane.ReceivedFD(oob[:oobn])
	if fd < 0 {
		return
	}
	f := os.NewFile(uintptr(fd), "raw-shm")
	size := int(binary.LittleEndian.Uint64(hdr[:]))
	mem, err := lane.Map(f, size)
	f.Close()
	if err != nil || size != 2*shmSlot {
		return
	}
	defer lane.Unmap(mem)
	var req [8]byte
	one := []byte{1}
	for {
		if _, err := io.ReadFull(nc, req[:]); err != nil {
			return
		}
		credits, k := 2, 0
		for left := int64(binary.LittleEndian.Uint64(req[:])); left > 0; k++ {
			if credits == 0 {
				if _, err := io.ReadFull(nc, one); err != nil {
					return
				}
				credits++
			}
			m := int(min(left, shmSlot))
			slot := mem[(k%2)*shmSlot:]
			for done := 0; done < m; {
				done += copy(slot[done:m], buf[(int64(k)*shmSlot+int64(done))%int64(len(buf)):])
			}
			if _, err := nc.Write(one); err != nil {
				return
			}
			credits--
			left -= int64(m)
		}
		for ; credits < 2; credits++ {
			if _, err := io.ReadFull(nc, one); err != nil {
				return
			}
		}
	}
}

// rawShm is the client's side of a ShmSourceServer.
type rawShm struct {
	nc  net.Conn
	mem []byte
}

// dialRawShm connects to a ShmSourceServer's socket and hands it the
// slots.
func dialRawShm(ctx context.Context, path string) (*rawShm, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	f, mem, err := lane.Create("raw-shm", 2*shmSlot)
	if err != nil {
		nc.Close()
		return nil, err
	}
	defer f.Close()
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], 2*shmSlot)
	if _, _, err := nc.(*net.UnixConn).WriteMsgUnix(hdr[:], unix.UnixRights(int(f.Fd())), nil); err != nil {
		nc.Close()
		_ = lane.Unmap(mem)
		return nil, fmt.Errorf("raw shm: handing over the slots: %w", err)
	}
	return &rawShm{nc: nc, mem: mem}, nil
}

// fetch asks for len(buf) bytes and copies them out of the slots.
func (r *rawShm) fetch(ctx context.Context, buf []byte) error {
	var req [8]byte
	binary.LittleEndian.PutUint64(req[:], uint64(len(buf)))
	if _, err := netio.WriteFull(ctx, r.nc, req[:]); err != nil {
		return err
	}
	one := make([]byte, 1)
	for k, got := 0, 0; got < len(buf); k++ {
		if _, err := netio.ReadFull(ctx, r.nc, one); err != nil {
			return err
		}
		got += copy(buf[got:], r.mem[(k%2)*shmSlot:(k%2+1)*shmSlot])
		if _, err := netio.WriteFull(ctx, r.nc, one); err != nil {
			return err
		}
	}
	return nil
}

func (r *rawShm) Close() error {
	err := r.nc.Close()
	_ = lane.Unmap(r.mem)
	return err
}
