package wire

import (
	"context"
	"errors"

	"github.com/pdcgo/pdc"
)

// Code is an error code on the wire. Servers map an error to a Code exactly
// once (CodeOf), clients map it back to the same sentinel (Code.Err).
type Code uint32

// The codes. Values are part of the protocol: never renumber.
const (
	CodeOK            Code = 0
	CodeInternal      Code = 1
	CodeNotFound      Code = 2
	CodeExists        Code = 3
	CodeInvalid       Code = 4
	CodeOutOfRange    Code = 5
	CodeUnavailable   Code = 6
	CodeTimeout       Code = 7
	CodeCanceled      Code = 8
	CodePermission    Code = 9
	CodeUnimplemented Code = 10
	CodeVersion       Code = 11
	CodeTooLarge      Code = 12
	CodeProtocol      Code = 13
	CodeClosed        Code = 14
	CodeChecksum      Code = 15
	CodeStale         Code = 16
	CodeCorrupt       Code = 17
	CodeNoSpace       Code = 18
	CodeIO            Code = 19
)

var codeErrs = [...]error{
	CodeInternal:      pdc.ErrInternal,
	CodeNotFound:      pdc.ErrNotFound,
	CodeExists:        pdc.ErrExists,
	CodeInvalid:       pdc.ErrInvalid,
	CodeOutOfRange:    pdc.ErrOutOfRange,
	CodeUnavailable:   pdc.ErrUnavailable,
	CodeTimeout:       pdc.ErrTimeout,
	CodeCanceled:      pdc.ErrCanceled,
	CodePermission:    pdc.ErrPermission,
	CodeUnimplemented: pdc.ErrUnimplemented,
	CodeVersion:       pdc.ErrVersion,
	CodeTooLarge:      pdc.ErrTooLarge,
	CodeProtocol:      pdc.ErrProtocol,
	CodeClosed:        pdc.ErrClosed,
	CodeChecksum:      pdc.ErrChecksum,
	CodeStale:         pdc.ErrStale,
	CodeCorrupt:       pdc.ErrCorrupt,
	CodeNoSpace:       pdc.ErrNoSpace,
	CodeIO:            pdc.ErrIO,
}

// CodeOf returns the code for err: the code of the first sentinel err wraps,
// the context errors as Timeout and Canceled, a full disk (ENOSPC, EDQUOT)
// as NoSpace and EIO as IO, anything else as Internal.
func CodeOf(err error) Code {
	if err == nil {
		return CodeOK
	}
	for c := CodeNotFound; int(c) < len(codeErrs); c++ {
		if errors.Is(err, codeErrs[c]) {
			return c
		}
	}
	switch s := pdc.NoSpaceOrIO(err); {
	case s == pdc.ErrNoSpace:
		return CodeNoSpace
	case s == pdc.ErrIO:
		return CodeIO
	case errors.Is(err, context.DeadlineExceeded):
		return CodeTimeout
	case errors.Is(err, context.Canceled):
		return CodeCanceled
	}
	return CodeInternal
}

// Err returns the sentinel for c; nil for CodeOK. Codes from a newer peer
// that this build does not know map to pdc.ErrInternal.
func (c Code) Err() error {
	if c == CodeOK {
		return nil
	}
	if int(c) < len(codeErrs) && codeErrs[c] != nil {
		return codeErrs[c]
	}
	return pdc.ErrInternal
}
