// Command libpdc is pdc's C library, libpdc_core.so: build it with
//
//	go build -buildmode=c-shared -o libpdc_core.so ./capi/libpdc
//
// (make capi does, and installs it with libpdc.so, the loader programs
// link (capi/shim: it gives a forked child a fresh copy of this library),
// its headers, capi/include, and a pkg-config file). It is a main package
// only because c-shared needs one; main does nothing. host.h says why
// memory that crosses the API comes from the program's allocator.
//
// Two layers: pdc.c defines the public C functions exactly as the headers
// declare them (the compiler checks each against its prototype) and calls
// Go functions exported in exports.go under internal pdcgo_ names, which
// convert C values and call package capi, where the logic and its tests
// live. The Go exports take no const qualifiers (cgo cannot express them),
// which is why the public functions are C.
package main
