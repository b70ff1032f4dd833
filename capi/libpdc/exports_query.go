package main

/*
#include <stdint.h>
#include <stdlib.h>
#include "host.h"
#include <string.h>
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/capi"
	"github.com/pdcgo/pdc/region"
)

// Data queries: pdc_query.c defines the public functions over these. A
// pdc_query_t is a C struct holding the handle these take.

// pdcgo_query_create copies the value (as large as typ's elements; NULL
// stays nil).
//
//export pdcgo_query_create
func pdcgo_query_create(obj C.uint64_t, op, typ C.int, value unsafe.Pointer) C.uint64_t {
	var v []byte
	if value != nil {
		if n := region.Type(typ).Size(); n > 0 {
			v = C.GoBytes(value, C.int(n))
		} else {
			v = []byte{}
		}
	}
	return C.uint64_t(lib.QueryCreate(uint64(obj), int(op), int(typ), v))
}

//export pdcgo_query_and
func pdcgo_query_and(q1, q2 C.uint64_t) C.uint64_t {
	return C.uint64_t(lib.QueryAnd(uint64(q1), uint64(q2)))
}

//export pdcgo_query_or
func pdcgo_query_or(q1, q2 C.uint64_t) C.uint64_t {
	return C.uint64_t(lib.QueryOr(uint64(q1), uint64(q2)))
}

//export pdcgo_query_sel_region
func pdcgo_query_sel_region(q C.uint64_t, ndim C.size_t, offset, size *C.uint64_t) C.int {
	n := int(min(ndim, C.size_t(region.MaxDims+1)))
	return C.int(lib.QuerySelRegion(uint64(q), u64s(offset, n), u64s(size, n)))
}

//export pdcgo_query_get_nhits
func pdcgo_query_get_nhits(q C.uint64_t, n *C.uint64_t) C.int {
	if n == nil {
		return C.int(lib.Report(fmt.Sprintf("PDCquery_get_nhits(query %d)", uint64(q)), fmt.Errorf("n is NULL: %w", pdc.ErrInvalid)))
	}
	got, rc := lib.QueryNHits(uint64(q))
	*n = C.uint64_t(got)
	return C.int(rc)
}

// pdcgo_query_get_selection sets *coords to a malloc'd array (NULL for no
// hits).
//
//export pdcgo_query_get_selection
func pdcgo_query_get_selection(q C.uint64_t, ndim *C.size_t, nhits *C.uint64_t, coords **C.uint64_t) C.int {
	sel, rc := lib.QueryGetSelection(uint64(q))
	if rc != 0 {
		return C.int(rc)
	}
	var p unsafe.Pointer
	if len(sel.Coords) > 0 {
		p = cMalloc(len(sel.Coords) * 8)
		if p == nil {
			return C.int(lib.Report(fmt.Sprintf("PDCquery_get_selection(query %d)", uint64(q)),
				fmt.Errorf("out of memory for %d coordinates", len(sel.Coords))))
		}
		copy(unsafe.Slice((*uint64)(p), len(sel.Coords)), sel.Coords)
	}
	*ndim, *nhits, *coords = C.size_t(sel.NDim), C.uint64_t(sel.NHits), (*C.uint64_t)(p)
	return C.int(rc)
}

// pdcgo_query_get_data reads the selection's coords in place (C memory,
// during the call only), not past alloc of them (sel->coords_alloc; 0 is
// not known).
//
//export pdcgo_query_get_data
func pdcgo_query_get_data(obj, q C.uint64_t, ndim C.size_t, nhits C.uint64_t, coords *C.uint64_t, alloc C.uint64_t, data unsafe.Pointer) C.int {
	sel := capi.Selection{NDim: int(min(ndim, C.size_t(region.MaxDims+1))), NHits: uint64(nhits)}
	n, ok := mulU64(uint64(nhits), uint64(sel.NDim))
	if coords != nil && alloc != 0 && (!ok || n > uint64(alloc)) {
		return C.int(lib.Report(fmt.Sprintf("PDCquery_get_data(obj %d, selection of query %d, %d hits)", uint64(obj), uint64(q), uint64(nhits)),
			fmt.Errorf("%d hits of %d coordinates are more than the selection's %d (coords_alloc): %w", uint64(nhits), uint64(ndim), uint64(alloc), pdc.ErrInvalid)))
	}
	if coords != nil && ok && n <= 1<<40/8 {
		sel.Coords = unsafe.Slice((*uint64)(unsafe.Pointer(coords)), n)
	}
	return C.int(lib.QueryGetData(uint64(obj), uint64(q), sel, func(vals []byte) error {
		if len(vals) == 0 {
			return nil
		}
		if data == nil {
			return fmt.Errorf("obj_data is NULL: want room for %d bytes: %w", len(vals), pdc.ErrInvalid)
		}
		C.memcpy(data, unsafe.Pointer(&vals[0]), C.size_t(len(vals)))
		return nil
	}))
}

func mulU64(a, b uint64) (uint64, bool) {
	if a != 0 && b > ^uint64(0)/a {
		return 0, false
	}
	return a * b, true
}

//export pdcgo_query_free
func pdcgo_query_free(q C.uint64_t) { lib.QueryFree(uint64(q)) }
