package wire

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"time"

	"github.com/pdcgo/pdc"
)

// Version is the protocol version this build speaks.
const Version = 1

// FrameSize is the length of the fixed frame prefix.
const FrameSize = 40

const (
	magic0 = 'P'
	magic1 = 'D'
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maxTimeout is the largest frame timeout DecodeFrame accepts.
const maxTimeout = 1 << 62

// Flags qualify a frame.
type Flags uint8

const (
	// FlagResponse marks a frame sent by a server in answer to a request.
	FlagResponse Flags = 1 << 0
	// FlagError marks a response whose header is an ErrorBody.
	FlagError Flags = 1 << 1
	// FlagCancel marks a client's notice that it no longer wants the answer
	// to request ID; it has no header and no payload.
	FlagCancel Flags = 1 << 2
	// FlagMore marks a response that is one chunk of a stream: more
	// responses to the same request follow, and the last one does not
	// carry the flag (the explicit end of the stream).
	FlagMore Flags = 1 << 3
	// FlagTrace marks a request whose header begins with the 8-byte
	// trace id of the operation it is part of (TraceSize, little-endian;
	// HeaderLen counts them). A client sets it only for a server whose
	// Hello says it reads it (Hello.Trace): a server of an earlier build
	// refuses the flag as unknown and closes the connection.
	FlagTrace Flags = 1 << 4

	knownFlags = FlagResponse | FlagError | FlagCancel | FlagMore | FlagTrace
)

// TraceSize is the length of the trace id that begins the header of a
// frame with FlagTrace.
const TraceSize = 8

// Frame is the decoded fixed prefix of a frame.
type Frame struct {
	Version    uint8
	Flags      Flags
	Method     Method
	ID         uint64
	HeaderLen  uint32
	PayloadLen uint64
	// Timeout is the requester's remaining time when it sent the frame;
	// zero means no deadline. Relative, so clocks need not agree.
	Timeout time.Duration
	// Trace is the id of the operation a request is part of, carried
	// in its header's first bytes (FlagTrace), not in the prefix: Append
	// and DecodeFrame do not touch it. SetLens and AppendTrace write it,
	// SplitTrace reads it back.
	Trace uint64
}

// SetLens sets f's lengths for a header of hdrLen bytes and a payload of
// payloadLen, and, when f.Trace is set, FlagTrace and the trace id's
// bytes in HeaderLen.
func (f *Frame) SetLens(hdrLen int, payloadLen uint64) {
	f.HeaderLen, f.PayloadLen = uint32(hdrLen), payloadLen
	if f.Trace != 0 {
		f.Flags |= FlagTrace
		f.HeaderLen += TraceSize
	}
}

// AppendTrace appends the bytes that begin f's header: its trace id if it
// has FlagTrace, nothing otherwise.
func (f *Frame) AppendTrace(dst []byte) []byte {
	if f.Flags&FlagTrace == 0 {
		return dst
	}
	return binary.LittleEndian.AppendUint64(dst, f.Trace)
}

// TakeTrace sets f.Trace from b, the first TraceSize bytes of the header
// of a frame with FlagTrace (DecodeFrame has checked that the header
// holds them), and takes them off f.HeaderLen: what is left of the header
// is the message's.
func (f *Frame) TakeTrace(b *[TraceSize]byte) {
	f.Trace = binary.LittleEndian.Uint64(b[:])
	f.HeaderLen -= TraceSize
}

// Append appends the encoded prefix of f to dst. The Version field is
// written as given; zero means Version. A negative Timeout is written as
// 1ns (already expired), one beyond 1<<62 ns (~146 years) as 1<<62 ns.
func (f *Frame) Append(dst []byte) []byte {
	// Put in place: a prefix built on the stack and copied would escape
	// (the checksum takes a slice), one allocation per frame sent.
	dst = slices.Grow(dst, FrameSize)
	n := len(dst)
	dst = dst[:n+FrameSize]
	f.put((*[FrameSize]byte)(dst[n:]))
	return dst
}

func (f *Frame) put(b *[FrameSize]byte) {
	v := f.Version
	if v == 0 {
		v = Version
	}
	b[0], b[1], b[2], b[3] = magic0, magic1, v, byte(f.Flags)
	binary.LittleEndian.PutUint32(b[4:], uint32(f.Method))
	binary.LittleEndian.PutUint64(b[8:], f.ID)
	binary.LittleEndian.PutUint32(b[16:], f.HeaderLen)
	binary.LittleEndian.PutUint64(b[24:], f.PayloadLen)
	t := f.Timeout
	if t < 0 {
		t = 1 // already expired: keep it distinguishable from "no deadline"
	}
	if t > maxTimeout {
		t = maxTimeout // ~146 years: as good as the caller's, and DecodeFrame accepts it
	}
	binary.LittleEndian.PutUint64(b[32:], uint64(t))
	binary.LittleEndian.PutUint32(b[20:], frameCRC(b[:]))
}

func frameCRC(b []byte) uint32 {
	c := crc32.Update(0, castagnoli, b[0:20])
	return crc32.Update(c, castagnoli, b[24:FrameSize])
}

// DecodeFrame decodes a frame prefix. It checks the magic, the checksum and
// the flags, which are the same in every version; it does not check the
// version (see Frame.Version) or the lengths (see Limits.Check). An error
// means the stream cannot be trusted and the connection must be closed.
func DecodeFrame(b []byte) (Frame, error) {
	if len(b) < FrameSize {
		return Frame{}, fmt.Errorf("frame prefix is %d bytes, want %d: %w", len(b), FrameSize, pdc.ErrProtocol)
	}
	if b[0] != magic0 || b[1] != magic1 {
		return Frame{}, fmt.Errorf("bad frame magic %#02x%02x: %w", b[0], b[1], pdc.ErrProtocol)
	}
	if got, want := binary.LittleEndian.Uint32(b[20:]), frameCRC(b); got != want {
		return Frame{}, fmt.Errorf("frame checksum %#08x, computed %#08x: %w", got, want, pdc.ErrProtocol)
	}
	f := Frame{
		Version:    b[2],
		Flags:      Flags(b[3]),
		Method:     Method(binary.LittleEndian.Uint32(b[4:])),
		ID:         binary.LittleEndian.Uint64(b[8:]),
		HeaderLen:  binary.LittleEndian.Uint32(b[16:]),
		PayloadLen: binary.LittleEndian.Uint64(b[24:]),
	}
	t := binary.LittleEndian.Uint64(b[32:])
	if t > maxTimeout {
		return Frame{}, fmt.Errorf("frame timeout %d ns out of range: %w", t, pdc.ErrProtocol)
	}
	f.Timeout = time.Duration(t)
	if f.Flags&^knownFlags != 0 {
		return Frame{}, fmt.Errorf("unknown frame flags %#02x: %w", uint8(f.Flags), pdc.ErrProtocol)
	}
	if f.Flags&FlagCancel != 0 && (f.Flags != FlagCancel || f.HeaderLen != 0 || f.PayloadLen != 0) {
		return Frame{}, fmt.Errorf("cancel frame with flags %#02x, header %d, payload %d: %w",
			uint8(f.Flags), f.HeaderLen, f.PayloadLen, pdc.ErrProtocol)
	}
	if f.Flags&FlagError != 0 && f.Flags&FlagResponse == 0 {
		return Frame{}, fmt.Errorf("error flag on a request frame: %w", pdc.ErrProtocol)
	}
	if f.Flags&FlagTrace != 0 && (f.Flags != FlagTrace || f.HeaderLen < TraceSize) {
		return Frame{}, fmt.Errorf("trace flag with flags %#02x and a header of %d bytes (only a request whose header holds the id): %w",
			uint8(f.Flags), f.HeaderLen, pdc.ErrProtocol)
	}
	if f.Flags&FlagMore != 0 && f.Flags != FlagResponse|FlagMore {
		return Frame{}, fmt.Errorf("more flag with flags %#02x (only a plain response is a stream chunk): %w",
			uint8(f.Flags), pdc.ErrProtocol)
	}
	return f, nil
}

// Limits bound the lengths a peer may announce. A frame beyond them is
// refused before anything is allocated for it.
type Limits struct {
	// MaxHeader bounds a frame's header length. Default 1 MiB.
	MaxHeader uint32
	// MaxPayload bounds a frame's payload length. Default 1 GiB.
	MaxPayload uint64
}

// Default limits.
const (
	DefaultMaxHeader  = 1 << 20
	DefaultMaxPayload = 1 << 30
)

// WithDefaults returns l with zero fields set to their defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxHeader == 0 {
		l.MaxHeader = DefaultMaxHeader
	}
	if l.MaxPayload == 0 {
		l.MaxPayload = DefaultMaxPayload
	}
	return l
}

// Check reports whether f's lengths are within l (after defaults).
func (l Limits) Check(f Frame) error {
	l = l.WithDefaults()
	if f.HeaderLen > l.MaxHeader {
		return fmt.Errorf("frame header of %d bytes exceeds the limit of %d: %w", f.HeaderLen, l.MaxHeader, pdc.ErrTooLarge)
	}
	if f.PayloadLen > l.MaxPayload {
		return fmt.Errorf("frame payload of %d bytes exceeds the limit of %d: %w", f.PayloadLen, l.MaxPayload, pdc.ErrTooLarge)
	}
	return nil
}
