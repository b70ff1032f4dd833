package rpc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/pdcgo/pdc/internal/bufpool"
	"github.com/pdcgo/pdc/internal/netio"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// readBufSize is the read buffer of a connection. Payloads larger than what
// is buffered are read straight into their destination.
const readBufSize = 64 << 10

// frameReader reads frames from a connection and bounds their lengths.
type frameReader struct {
	br     *bufio.Reader
	lw     netio.LowWater
	limits wire.Limits
	prefix [wire.FrameSize]byte
}

func newFrameReader(r io.Reader, limits wire.Limits) *frameReader {
	fr := &frameReader{br: bufio.NewReaderSize(r, readBufSize), limits: limits.WithDefaults()}
	if nc, ok := r.(net.Conn); ok {
		fr.lw = netio.NewLowWater(nc)
	}
	return fr
}

// next reads and checks one frame prefix. Any error means the stream can no
// longer be trusted.
func (r *frameReader) next() (wire.Frame, error) {
	if _, err := io.ReadFull(r.br, r.prefix[:]); err != nil {
		return wire.Frame{}, err
	}
	f, err := wire.DecodeFrame(r.prefix[:])
	if err != nil {
		return wire.Frame{}, err
	}
	if err := r.limits.Check(f); err != nil {
		return wire.Frame{}, err
	}
	return f, nil
}

// read fills dst from the stream.
func (r *frameReader) read(dst []byte) error {
	_, err := io.ReadFull(r.br, dst)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// readPayload fills dst with a frame's payload, whose bytes are certain to
// come, so the reader may sleep until a good part of them has arrived.
func (r *frameReader) readPayload(dst []byte) error {
	defer r.lw.Expect(0)
	for len(dst) > 0 {
		r.lw.Expect(int64(len(dst) - r.br.Buffered()))
		n, err := r.br.Read(dst)
		dst = dst[n:]
		if err != nil {
			if errors.Is(err, io.EOF) && len(dst) > 0 {
				err = io.ErrUnexpectedEOF
			}
			if len(dst) == 0 {
				return nil
			}
			return err
		}
	}
	return nil
}

// discard skips n bytes of the stream.
func (r *frameReader) discard(n uint64) error {
	for n > 0 {
		step := n
		if step > 1<<30 {
			step = 1 << 30
		}
		d, err := r.br.Discard(int(step))
		n -= uint64(d)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// body reads the header and payload of f into new buffers, the payload
// from bufpool when pooled is set. (Clients read replies into the caller's
// buffer with Conn.readFrame.)
func (r *frameReader) body(f wire.Frame, pooled bool) (hdr, payload []byte, err error) {
	if f.HeaderLen > 0 {
		hdr = make([]byte, f.HeaderLen)
		if err := r.read(hdr); err != nil {
			return nil, nil, err
		}
	}
	if f.PayloadLen > 0 {
		if pooled {
			payload = bufpool.Get(int(f.PayloadLen))
		} else {
			payload = make([]byte, f.PayloadLen)
		}
		if err := r.readPayload(payload); err != nil {
			if pooled {
				bufpool.Put(payload)
			}
			return nil, nil, err
		}
	}
	return hdr, payload, nil
}

// ctxErr is pdc.CtxErr.
func ctxErr(ctx context.Context) error { return pdc.CtxErr(ctx) }

// splitAddr turns pdc's address form ("host:port" or "unix:/path") into a
// network and an address for package net.
func splitAddr(addr string) (network, address string) {
	if len(addr) > 5 && addr[:5] == "unix:" {
		return "unix", addr[5:]
	}
	return "tcp", addr
}

// Listen listens on a pdc address: "host:port" (port 0 picks one) or
// "unix:/path".
func Listen(addr string) (net.Listener, error) {
	network, address := splitAddr(addr)
	ln, err := net.Listen(network, address)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// Addr formats a listener's address in pdc's form.
func Addr(a net.Addr) string {
	if a.Network() == "unix" {
		return "unix:" + a.String()
	}
	return a.String()
}
