package dtl

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/pdcgo/pdc/internal/wire"
)

// The side channels (pull's bulk connection, push's endpoint, shm's Unix
// socket) speak fixed-size little-endian headers, each starting with a
// magic and the protocol version, so that a stray or corrupted peer is
// refused before anything is trusted.

const protoVersion = 1

// tokenSize is the length of a capability token: 128 random bits, known
// only to the two ends of one transfer (it travels in the authenticated RPC).
const tokenSize = 16

type token [tokenSize]byte

const (
	magicPull    = "PDCB" // receiver -> sender: pull request
	magicPullAck = "PDCb" // sender -> receiver: pull answer
	magicPush    = "PDCP" // sender -> receiver: push header
	magicPushAck = "PDCp" // receiver -> sender: push acknowledgement
	magicShm     = "PDCS" // receiver -> sender: shm request
	magicShmAck  = "PDCs" // sender -> receiver: shm answer (+ descriptor)
)

// maxStatusMsg bounds an error message in an answer.
const maxStatusMsg = 4 << 10

func checkMagic(b []byte, magic string) error {
	if string(b[:4]) != magic {
		return fmt.Errorf("header starts %q, want %q: %w", b[:4], magic, ErrBadPack)
	}
	if b[4] != protoVersion {
		return fmt.Errorf("%s header of protocol version %d; this build speaks %d: %w", magic, b[4], protoVersion, ErrBadPack)
	}
	return nil
}

// request names a handle (pull, shm) or registration (push) and proves
// the right to it.
type request struct {
	id    uint64
	token token
	off   uint64 // pull: where to start; push: unused
	size  uint64 // pull: how many bytes; push: how many follow
}

const requestSize = 48

func (r *request) put(b []byte, magic string) []byte {
	return r.putFlags(b, magic, 0)
}

func (r *request) putFlags(b []byte, magic string, flags byte) []byte {
	b = append(b, magic...)
	b = append(b, protoVersion, flags, 0, 0)
	b = binary.LittleEndian.AppendUint64(b, r.id)
	b = append(b, r.token[:]...)
	b = binary.LittleEndian.AppendUint64(b, r.off)
	return binary.LittleEndian.AppendUint64(b, r.size)
}

func (r *request) decode(b []byte, magic string) error {
	if err := checkMagic(b, magic); err != nil {
		return err
	}
	r.id = binary.LittleEndian.Uint64(b[8:])
	copy(r.token[:], b[16:32])
	r.off = binary.LittleEndian.Uint64(b[32:])
	r.size = binary.LittleEndian.Uint64(b[40:])
	return nil
}

// answer is a status, a size or offset, and an error message of msgLen
// bytes following it when the status is not OK.
type answer struct {
	code   wire.Code
	off    uint64
	size   uint64
	msgLen uint32
}

const answerSize = 32

func (a *answer) put(b []byte, magic string) []byte {
	b = append(b, magic...)
	b = append(b, protoVersion, 0, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(a.code))
	b = binary.LittleEndian.AppendUint32(b, a.msgLen)
	b = binary.LittleEndian.AppendUint64(b, a.off)
	return binary.LittleEndian.AppendUint64(b, a.size)
}

func (a *answer) decode(b []byte, magic string) error {
	if err := checkMagic(b, magic); err != nil {
		return err
	}
	a.code = wire.Code(binary.LittleEndian.Uint32(b[8:]))
	a.msgLen = binary.LittleEndian.Uint32(b[12:])
	a.off = binary.LittleEndian.Uint64(b[16:])
	a.size = binary.LittleEndian.Uint64(b[24:])
	if a.msgLen > maxStatusMsg {
		return fmt.Errorf("%s answer with a %d-byte message (limit %d): %w", magic, a.msgLen, maxStatusMsg, ErrBadPack)
	}
	if (a.code == wire.CodeOK) != (a.msgLen == 0) {
		return fmt.Errorf("%s answer with code %d and a %d-byte message: %w", magic, a.code, a.msgLen, ErrBadPack)
	}
	return nil
}

// errAnswer encodes err as an answer with its message.
func errAnswer(magic string, err error) []byte {
	msg := err.Error()
	if len(msg) > maxStatusMsg {
		msg = msg[:maxStatusMsg]
	}
	if msg == "" {
		msg = "error"
	}
	a := answer{code: wire.CodeOf(err), msgLen: uint32(len(msg))}
	return append(a.put(nil, magic), msg...)
}

// showKey quotes a key for messages: the part before its first NUL (keys
// put a readable name there and binary after it), at most 200 bytes.
func showKey(k []byte) string {
	if i := bytes.IndexByte(k, 0); i >= 0 {
		k = k[:i]
	}
	if len(k) > 200 {
		return strconv.Quote(string(k[:200])) + "..."
	}
	return strconv.Quote(string(k))
}
