// Package wire defines pdc's bytes on the wire: the fixed frame prefix that
// every message starts with, the limits that bound every length before
// anything is allocated, the error codes that carry pdc's sentinel errors
// across processes, and the schema'd message headers.
//
// # Frames
//
// A frame is a 40-byte prefix, then HeaderLen bytes of header, then PayloadLen
// bytes of payload:
//
//	off size field
//	  0    2 magic "PD"
//	  2    1 version (1)
//	  3    1 flags (response, error, cancel, more, trace)
//	  4    4 method
//	  8    8 request id (chosen by the client; responses echo it)
//	 16    4 header length
//	 20    4 CRC-32C of bytes 0..19 and 24..39
//	 24    8 payload length
//	 32    8 timeout: the caller's remaining time in nanoseconds (0: none)
//
// A request with the trace flag begins its header with the 8-byte id of
// the operation it is part of (docs/design/0031); a client sends it only
// to a server whose Hello says it reads it.
//
// All integers are little-endian. The prefix layout is fixed for every
// version, so a peer can always skip a frame of a version it does not speak
// and answer it with an error. The CRC catches garbage and desynchronised
// streams before a length from it is trusted.
//
// # Headers
//
// Headers use the protobuf wire format (field number, type, value), encoded
// and decoded with protowire by code generated from one table, messages.wire
// (go generate; docs/design/0022): its field numbers are the schema, unknown
// fields are skipped, so old and new peers interoperate within a version.
//
// Payloads are raw bytes: they follow the header unencoded so they can be
// written from the caller's buffer (writev) and read into the receiver's.
package wire

//go:generate go run gen.go
