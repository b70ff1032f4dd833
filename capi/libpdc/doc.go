// Command libpdc is pdc's C library, libpdc.so: build it with
//
//	go build -buildmode=c-shared -o libpdc.so ./capi/libpdc
//
// (make capi does, and installs it with its headers, capi/include, and a
// pkg-config file). It is a main package only because c-shared needs one;
// main does nothing.
//
// Two layers: pdc.c defines the public C functions exactly as the headers
// declare them (the compiler checks each against its prototype) and calls
// Go functions exported in exports.go under internal pdcgo_ names, which
// convert C values and call package capi, where the logic and its tests
// live. The Go exports take no const qualifiers (cgo cannot express them),
// which is why the public functions are C.
package main
