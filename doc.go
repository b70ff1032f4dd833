// Package pdc holds the error model shared by every part of pdc: the sentinel
// errors that cross the wire and come back as the same values, and the typed
// errors that say which server, object or region failed.
//
// Callers test errors with errors.Is against the sentinels here, whether the
// error was made in their own process or on a server:
//
//	if errors.Is(err, pdc.ErrNotFound) { ... }
//
// The Go client lives in package client; this package has no dependencies so
// that servers and clients can both import it.
package pdc
