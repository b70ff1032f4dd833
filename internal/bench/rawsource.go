package bench

import (
	"context"
	"encoding/binary"
	"io"
	"net"

	"github.com/pdcgo/pdc/internal/netio"
)

// SourceServer is the raw ceiling of a transfer: asked for n bytes (an
// 8-byte little-endian request), it writes n bytes from memory, with
// nothing in between.
type SourceServer struct{ *rawServer }

// NewSourceServer serves on every listener until Close.
func NewSourceServer(lns ...net.Listener) *SourceServer {
	buf := make([]byte, 16<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	return &SourceServer{newRawServer(func(nc net.Conn) { source(nc, buf) }, lns...)}
}

func source(nc net.Conn, buf []byte) {
	var req [8]byte
	for {
		if _, err := io.ReadFull(nc, req[:]); err != nil {
			return
		}
		for n := int64(binary.LittleEndian.Uint64(req[:])); n > 0; {
			k := min(n, int64(len(buf)))
			if _, err := nc.Write(buf[:k]); err != nil {
				return
			}
			n -= k
		}
	}
}

// rawFetch asks a SourceServer connection for len(buf) bytes and reads them.
func rawFetch(ctx context.Context, nc net.Conn, buf []byte) error {
	var req [8]byte
	binary.LittleEndian.PutUint64(req[:], uint64(len(buf)))
	if _, err := netio.WriteFull(ctx, nc, req[:]); err != nil {
		return err
	}
	_, err := netio.ReadFull(ctx, nc, buf)
	return err
}
