// Package capi is the Go side of libpdc, pdc's C library (the C API of
// PDC, plus DYAD-style file staging). Package capi/libpdc turns it into
// libpdc.so with cgo; this package holds everything that is not cgo, so
// that it is tested as Go.
//
// A Lib is the library's state: the handles C programs hold and the
// stream failures are reported on. Its methods mirror the C functions one
// to one, take and return C's conventions translated to Go (ids as uint64,
// SUCCEED/FAIL as Succeed/Fail, 0 for a failed id), and report every
// failure as one line on the Lib's stderr naming the call, its arguments
// and the reason:
//
//	libpdc: PDCcont_open("sim", pdc 1): open container "sim": server rank 0 (127.0.0.1:4000): not found
//
// Handles are ids from one counter, never reused, so C never holds a Go
// pointer (cgo forbids it) and a stale or mistyped id fails with a message
// instead of naming something else. Every call that talks to servers runs
// under a deadline: $PDC_TIMEOUT, read by PDCinit, or the call's own.
//
// A Lib is safe for concurrent use: C programs call from any thread.
package capi
