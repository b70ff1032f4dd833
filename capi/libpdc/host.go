package main

/*
#include <stdlib.h>
#include "host.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Memory that crosses the API comes from the program's allocator (host.h
// says why), never from cgo's C.malloc or C.CString, which use the core's
// own C library.

// pdcgo_forked tells the library how many forks this copy of it is from
// the first (host.h).
//
//export pdcgo_forked
func pdcgo_forked(generation C.uint) { lib.ForkedGeneration(uint32(generation)) }

// cMalloc is C.malloc through the program's allocator; nil when out of
// memory.
func cMalloc(n int) unsafe.Pointer { return C.pdcgo_malloc(C.size_t(n)) }

// cString is C.CString through the program's allocator; nil when out of
// memory.
func cString(s string) *C.char {
	p := cMalloc(len(s) + 1)
	if p == nil {
		return nil
	}
	b := unsafe.Slice((*byte)(p), len(s)+1)
	copy(b, s)
	b[len(s)] = 0
	return (*C.char)(p)
}

// outString sets *out to a copy of s; the error says what call ran out of
// memory.
func outString(out **C.char, s string) error {
	*out = cString(s)
	if *out == nil {
		return fmt.Errorf("out of memory for a %d-byte string", len(s))
	}
	return nil
}
