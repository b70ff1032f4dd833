// Package gen generates pdc's wire message types, their codecs and typed
// call stubs from one table, internal/wire/messages.wire (docs/design/0022).
// The codecs are the ones that used to be written by hand with protowire:
// the same bytes, the same bounds, no reflection.
//
// # The table
//
// The table is line oriented. Lines starting with "#" are comments on the
// table. Comment lines ("// ...") right before a declaration are its doc
// comment; a comment block followed by a blank line is copied to the
// generated file as it is.
//
//	type Code uint32          // a named scalar declared by hand
//	message Name [options] {  // a message: a struct and its codec
//		Field Type = N [options] // trailing comment
//	}
//
// Field types are uint64, uint32, int64 and int32 (zigzag), bool, string,
// []byte, a named scalar, a message (always written, even empty), *message
// (written when not nil), []message and []string and [][]byte (one field per
// element, empty ones too) and []uint64 (packed). Zero scalars, empty
// strings and empty byte slices are not written.
//
// A call names a method's request and reply; Stub gets one typed method
// per call (calls_gen.go), over the method MethodName declared by hand:
//
//	rpc Name(Request) Reply   // either side may be left out: rpc Name()
//
// Message options: unmarshal=custom (Unmarshal is written by hand),
// sizehint (Marshal into a nil buffer allocates m.sizeHint() bytes), check
// (Unmarshal calls the hand-written m.check(&f) on a clean decode), slab
// (packed fields decode into a shared uintSlab: unmarshal(b, slab)).
// Field options: alias ([]byte that aliases the decoded buffer), presize
// (a repeated message field counted first, so its slice is made to size).
package gen
