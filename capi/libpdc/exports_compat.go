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

	"github.com/pdcgo/pdc/capi"
)

// PDC's functions that programs call and pdc_compat.c defines.

// pdcgo_unimplemented reports a call of PDC's API that pdc does not
// provide, naming it and why; it returns FAIL.
//
//export pdcgo_unimplemented
func pdcgo_unimplemented(call, why *C.char) C.int {
	return C.int(lib.Unimplemented(C.GoString(call), C.GoString(why)))
}

//export pdcgo_cont_prop_lifetime
func pdcgo_cont_prop_lifetime(id C.uint64_t, lifetime *C.int) C.int {
	l, rc := lib.ContPropLifetime(uint64(id))
	*lifetime = C.int(l)
	return C.int(rc)
}

// pdcgo_query_text describes a query for PDCquery_print: *text, and the
// region it is restricted to (*ndim 0 if none) in *off and *size, are
// malloc'd; the caller frees them.
//
//export pdcgo_query_text
func pdcgo_query_text(h C.uint64_t, text **C.char, ndim *C.size_t, off, size **C.uint64_t) C.int {
	t, within, rc := lib.QueryText(uint64(h))
	if rc != capi.Succeed {
		return C.int(rc)
	}
	if err := outString(text, t); err != nil {
		return C.int(lib.Report(fmt.Sprintf("PDCquery_print(query %d)", uint64(h)), err))
	}
	*ndim, *off, *size = 0, nil, nil
	if within != nil {
		*ndim, *off, *size = C.size_t(len(within.Off)), cU64s(within.Off), cU64s(within.Size)
	}
	return C.int(rc)
}

// pdcgo_buf_obj_map takes buf, C memory: PDCreg_release_lock reads or
// writes it, inside the call, until PDCbuf_obj_unmap.
//
//export pdcgo_buf_obj_map
func pdcgo_buf_obj_map(buf unsafe.Pointer, typ C.int, local, obj, remote C.uint64_t) C.int {
	return C.int(lib.BufObjMap(buf, int(typ), uint64(local), uint64(obj), uint64(remote)))
}

//export pdcgo_buf_obj_unmap
func pdcgo_buf_obj_unmap(obj, reg C.uint64_t) C.int {
	return C.int(lib.BufObjUnmap(uint64(obj), uint64(reg)))
}

//export pdcgo_reg_obtain_lock
func pdcgo_reg_obtain_lock(obj, reg C.uint64_t, access, mode C.int) C.int {
	return C.int(lib.RegObtainLock(uint64(obj), uint64(reg), int(access), int(mode)))
}

//export pdcgo_reg_release_lock
func pdcgo_reg_release_lock(obj, reg C.uint64_t, access C.int) C.int {
	return C.int(lib.RegReleaseLock(uint64(obj), uint64(reg), int(access)))
}
