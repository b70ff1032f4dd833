package dtl

import "github.com/pdcgo/pdc"

// dtlError is a transport error that also matches the pdc sentinel it
// refines, so that it crosses the wire as that sentinel's code.
type dtlError struct {
	msg  string
	base error
}

func (e *dtlError) Error() string        { return e.msg }
func (e *dtlError) Is(target error) bool { return target == e.base }

// Errors, after DYAD's return codes.
var (
	// ErrBadMode: an unknown mode, or one this pair of peers cannot use
	// (shm across hosts). DYAD_RC_BADDTLMODE.
	ErrBadMode error = &dtlError{"pdc: dtl: bad transport mode", pdc.ErrInvalid}
	// ErrBadBuffer: the receiver's sink cannot take the payload (too small,
	// none given). DYAD_RC_BADBUF.
	ErrBadBuffer error = &dtlError{"pdc: dtl: bad buffer", pdc.ErrInvalid}
	// ErrBadPack: a request, answer or transport header that does not
	// decode or does not add up. DYAD_RC_BADPACK / DYAD_RC_BADUNPACK.
	ErrBadPack error = &dtlError{"pdc: dtl: bad pack or unpack", pdc.ErrProtocol}
	// ErrNotFound: no payload under that key, or a handle or registration
	// that does not exist (any more). DYAD_RC_NOTFOUND.
	ErrNotFound error = &dtlError{"pdc: dtl: not found", pdc.ErrNotFound}
	// ErrPeerFailed: the other side went away or broke the transfer.
	// DYAD_RC_UCXCOMM_FAIL, DYAD_RC_FLUXFAIL and kin.
	ErrPeerFailed error = &dtlError{"pdc: dtl: peer failed", pdc.ErrUnavailable}
	// ErrTimeout: the caller's deadline passed; it also matches
	// context.DeadlineExceeded.
	ErrTimeout = pdc.ErrTimeout
)

var allErrors = []error{ErrBadMode, ErrBadBuffer, ErrBadPack, ErrNotFound, ErrPeerFailed}
