package main

/*
#include <stdint.h>
#include <stdlib.h>
#include "host.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/pdcgo/pdc"
)

// Tag search and the DART index: pdc_search.c defines the public
// functions over these.

// idsOut hands ids to C: *n and *ids (malloc'd; NULL for none). call names
// the C function for the report should malloc fail.
func idsOut(call string, got []uint64, rc int, n *C.int, ids **C.uint64_t) C.int {
	if rc != 0 {
		return C.int(rc)
	}
	if len(got) > int(^uint32(0)>>1) {
		return C.int(lib.Report(call, fmt.Errorf("%d matches do not fit in an int: %w", len(got), pdc.ErrInvalid)))
	}
	if len(got) == 0 {
		return C.int(rc)
	}
	p := cMalloc(len(got) * 8)
	if p == nil {
		return C.int(lib.Report(call, fmt.Errorf("out of memory for %d ids", len(got))))
	}
	copy(unsafe.Slice((*uint64)(p), len(got)), got)
	*n, *ids = C.int(len(got)), (*C.uint64_t)(p)
	return C.int(rc)
}

func outsOK(call string, n *C.int, ids **C.uint64_t) bool {
	if n == nil || ids == nil {
		lib.Report(call, fmt.Errorf("n_res and pdc_ids must not be NULL: pass the addresses of an int and a uint64_t *: %w", pdc.ErrInvalid))
		return false
	}
	*n, *ids = 0, nil
	return true
}

// pdcgo_query_kvtag: value may be NULL (any value). The Lib checks size
// before it reads value.
//
//export pdcgo_query_kvtag
func pdcgo_query_kvtag(name *C.char, size C.uint32_t, typ C.int, value unsafe.Pointer, n *C.int, ids **C.uint64_t) C.int {
	call := fmt.Sprintf("PDC_Client_query_kvtag(%q, pdc_var_type_t %d, %d bytes)", str(name), int(typ), uint32(size))
	if !outsOK(call, n, ids) {
		return -1
	}
	got, rc := lib.QueryKVTag(str(name), int(typ), value, uint64(size))
	return idsOut(call, got, rc, n, ids)
}

// pdcgo_query_tags: names may be NULL (no names wanted); else *names is
// one block of the names, each ended by a NUL, in the ids' order.
//
//export pdcgo_query_tags
func pdcgo_query_tags(pdcID C.uint64_t, query *C.char, n *C.int, ids **C.uint64_t, names **C.char) C.int {
	call := fmt.Sprintf("pdc_query_tags(pdc %d, %q)", uint64(pdcID), str(query))
	if !outsOK(call, n, ids) {
		return -1
	}
	if names != nil {
		*names = nil
	}
	ms, rc := lib.QueryTags(uint64(pdcID), str(query), names != nil)
	got := make([]uint64, len(ms))
	for i, m := range ms {
		got[i] = m.ID
	}
	if rc := idsOut(call, got, rc, n, ids); rc != 0 || names == nil || len(ms) == 0 {
		return rc
	}
	strs := make([]string, len(ms))
	for i, m := range ms {
		strs[i] = m.Name
	}
	if rc := namesOut(call, strs, names); rc != 0 {
		C.pdcgo_free(unsafe.Pointer(*ids))
		*n, *ids = 0, nil
		return rc
	}
	return 0
}

// namesOut sets *out to one block (malloc'd) of names, each ended by a
// NUL; nil for none.
func namesOut(call string, names []string, out **C.char) C.int {
	*out = nil
	if len(names) == 0 {
		return 0
	}
	size := 0
	for _, s := range names {
		size += len(s) + 1
	}
	p := cMalloc(size)
	if p == nil {
		return C.int(lib.Report(call, fmt.Errorf("out of memory for %d names", len(names))))
	}
	b := unsafe.Slice((*byte)(p), size)[:0]
	for _, s := range names {
		b = append(append(b, s...), 0)
	}
	*out = (*C.char)(p)
	return 0
}

//export pdcgo_dart_insert
func pdcgo_dart_insert(algo C.int, key, value *C.char, ref C.int, id C.uint64_t) C.int {
	return C.int(lib.DARTInsert(int(algo), str(key), str(value), int(ref), uint64(id)))
}

//export pdcgo_dart_delete
func pdcgo_dart_delete(algo C.int, key, value *C.char, ref C.int, id C.uint64_t) C.int {
	return C.int(lib.DARTDelete(int(algo), str(key), str(value), int(ref), uint64(id)))
}

//export pdcgo_dart_search
func pdcgo_dart_search(algo C.int, query *C.char, ref C.int, n *C.int, ids **C.uint64_t) C.int {
	call := fmt.Sprintf("PDC_Client_search_obj_ref_through_dart(%d, %q, %d)", int(algo), str(query), int(ref))
	if !outsOK(call, n, ids) {
		return -1
	}
	got, rc := lib.DARTSearch(int(algo), str(query), int(ref))
	return idsOut(call, got, rc, n, ids)
}

//export pdcgo_close_all_server
func pdcgo_close_all_server() C.int { return C.int(lib.CloseAllServer()) }
