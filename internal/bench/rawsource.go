package bench

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"

	"github.com/pdcgo/pdc/internal/netio"
)

// SourceServer is the raw ceiling of a transfer: asked for n bytes (an
// 8-byte little-endian request), it writes n bytes from memory, with
// nothing in between.
type SourceServer struct {
	lns []net.Listener
	buf []byte
	wg  sync.WaitGroup
	mu  struct {
		sync.Mutex
		conns map[net.Conn]struct{}
	}
}

// NewSourceServer serves on every listener until Close.
func NewSourceServer(lns ...net.Listener) *SourceServer {
	s := &SourceServer{lns: lns, buf: make([]byte, 16<<20)}
	for i := range s.buf {
		s.buf[i] = byte(i * 7)
	}
	s.mu.conns = map[net.Conn]struct{}{}
	for _, ln := range lns {
		s.wg.Add(1)
		go s.accept(ln)
	}
	return s
}

func (s *SourceServer) accept(ln net.Listener) {
	defer s.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		s.mu.Lock()
		s.mu.conns[nc] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			var req [8]byte
			for {
				if _, err := io.ReadFull(nc, req[:]); err != nil {
					break
				}
				n := int64(binary.LittleEndian.Uint64(req[:]))
				for n > 0 {
					k := min(n, int64(len(s.buf)))
					if _, err := nc.Write(s.buf[:k]); err != nil {
						n = -1
						break
					}
					n -= k
				}
				if n < 0 {
					break
				}
			}
			nc.Close()
			s.mu.Lock()
			delete(s.mu.conns, nc)
			s.mu.Unlock()
		}()
	}
}

// Close stops the server and waits for its goroutines.
func (s *SourceServer) Close() error {
	for _, ln := range s.lns {
		ln.Close()
	}
	s.mu.Lock()
	for nc := range s.mu.conns {
		nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
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
