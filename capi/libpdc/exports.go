package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include -Wall -Werror
#include <stdint.h>
#include <stdlib.h>
#include "host.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/capi"
)

// lib is the state of the library: one per process, as in PDC. It reads
// the environment through C's getenv: Go keeps its own copy, taken when the
// library was loaded, which misses a setenv the program made since.
var lib = capi.New(capi.Config{Getenv: getenv})

func getenv(key string) string {
	ck := C.CString(key)
	defer C.free(unsafe.Pointer(ck))
	v := C.pdcgo_getenv(ck)
	if v == nil {
		return ""
	}
	return C.GoString(v)
}

func str(s *C.char) string { return C.GoString(s) } // NULL reads as ""

//export pdcgo_init
func pdcgo_init(name *C.char) C.uint64_t { return C.uint64_t(lib.Init(str(name))) }

// pdcgo_last_error: a NULL buf asks for the length only, whatever n says;
// of buf it touches only the line and its NUL, whatever n says past them.
//
//export pdcgo_last_error
func pdcgo_last_error(buf *C.char, n C.size_t) C.size_t {
	msg := lib.LastReport()
	if buf != nil && n > 0 {
		dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), min(uint64(n), uint64(len(msg))+1))
		k := copy(dst[:len(dst)-1], msg)
		dst[k] = 0
	}
	return C.size_t(len(msg))
}

//export pdcgo_report_errors
func pdcgo_report_errors(on C.int) { lib.SetReports(on != 0) }

//export pdcgo_close
func pdcgo_close(id C.uint64_t) C.int { return C.int(lib.Close(uint64(id))) }

//export pdcgo_prop_create
func pdcgo_prop_create(typ C.int, pdcID C.uint64_t) C.uint64_t {
	return C.uint64_t(lib.PropCreate(int(typ), uint64(pdcID)))
}

//export pdcgo_prop_close
func pdcgo_prop_close(id C.uint64_t) C.int { return C.int(lib.PropClose(uint64(id))) }

//export pdcgo_prop_set_cont_lifetime
func pdcgo_prop_set_cont_lifetime(id C.uint64_t, lifetime C.int) C.int {
	return C.int(lib.PropSetContLifetime(uint64(id), int(lifetime)))
}

//export pdcgo_cont_create
func pdcgo_cont_create(name *C.char, prop C.uint64_t) C.uint64_t {
	return C.uint64_t(lib.ContCreate(str(name), uint64(prop)))
}

//export pdcgo_cont_create_col
func pdcgo_cont_create_col(name *C.char, prop C.uint64_t) C.uint64_t {
	return C.uint64_t(lib.ContCreateCol(str(name), uint64(prop)))
}

//export pdcgo_cont_open
func pdcgo_cont_open(name *C.char, pdcID C.uint64_t) C.uint64_t {
	return C.uint64_t(lib.ContOpen(str(name), uint64(pdcID)))
}

//export pdcgo_cont_open_col
func pdcgo_cont_open_col(name *C.char, pdcID C.uint64_t) C.uint64_t {
	return C.uint64_t(lib.ContOpenCol(str(name), uint64(pdcID)))
}

//export pdcgo_cont_get_id
func pdcgo_cont_get_id(name *C.char, pdcID C.uint64_t) C.uint64_t {
	return C.uint64_t(lib.ContGetID(str(name), uint64(pdcID)))
}

// pdcgo_cont_get_info fills the fields of a struct pdc_cont_info, which
// pdc.c allocates; *outName is malloc'd.
//
//export pdcgo_cont_get_info
func pdcgo_cont_get_info(name *C.char, localID, metaID *C.uint64_t, outName **C.char) C.int {
	info, rc := lib.ContGetInfo(str(name))
	if rc == capi.Succeed {
		*localID, *metaID = C.uint64_t(info.LocalID), C.uint64_t(info.MetaID)
		if err := outString(outName, info.Name); err != nil {
			return C.int(lib.Report(fmt.Sprintf("PDCcont_get_info(%q)", str(name)), err))
		}
	}
	return C.int(rc)
}

//export pdcgo_cont_persist
func pdcgo_cont_persist(id C.uint64_t) C.int { return C.int(lib.ContPersist(uint64(id))) }

//export pdcgo_cont_del
func pdcgo_cont_del(id C.uint64_t) C.int { return C.int(lib.ContDel(uint64(id))) }

//export pdcgo_cont_close
func pdcgo_cont_close(id C.uint64_t) C.int { return C.int(lib.ContClose(uint64(id))) }

//export pdcgo_cont_put_tag
func pdcgo_cont_put_tag(id C.uint64_t, name *C.char, value unsafe.Pointer, typ C.int, size C.ulonglong) C.int {
	return C.int(lib.ContPutTag(uint64(id), str(name), value, int(typ), uint64(size)))
}

// pdcgo_cont_get_tag sets *value to a malloc'd copy of the tag's value
// (NULL for a tag that is not set), *size and *typ.
//
//export pdcgo_cont_get_tag
func pdcgo_cont_get_tag(id C.uint64_t, name *C.char, value *unsafe.Pointer, typ *C.int, size *C.ulonglong) C.int {
	return getTag("PDCcont_get_tag", lib.ContGetTag, id, name, value, typ, size)
}

// getTag hands a tag, got by get, to C: *value a malloc'd copy of its
// value (NULL for a tag that is not set), *size and *typ.
func getTag(call string, get func(uint64, string) (capi.Tag, int), id C.uint64_t, name *C.char, value *unsafe.Pointer, typ *C.int, size *C.ulonglong) C.int {
	call = fmt.Sprintf("%s(%d, %q)", call, uint64(id), str(name))
	if value == nil || size == nil {
		return C.int(lib.Report(call, fmt.Errorf("tag_value and value_size must not be NULL: pass the addresses of a void * and a psize_t: %w", pdc.ErrInvalid)))
	}
	*value, *size = nil, 0
	tag, rc := get(uint64(id), str(name))
	if rc != capi.Succeed {
		return C.int(rc)
	}
	*typ = C.int(tag.Type)
	if !tag.Found {
		return C.int(rc)
	}
	// malloc(0) may return NULL, which would read as "not set".
	p := cMalloc(max(len(tag.Value), 1))
	if p == nil {
		return C.int(lib.Report(call, fmt.Errorf("out of memory for %d bytes", len(tag.Value))))
	}
	copy(unsafe.Slice((*byte)(p), len(tag.Value)), tag.Value)
	*value, *size = p, C.ulonglong(len(tag.Value))
	return C.int(rc)
}

//export pdcgo_cont_del_tag
func pdcgo_cont_del_tag(id C.uint64_t, name *C.char) C.int {
	return C.int(lib.ContDelTag(uint64(id), str(name)))
}

//export pdcgo_stage_produce
func pdcgo_stage_produce(pdcID C.uint64_t, path *C.char) C.int {
	return C.int(lib.StageProduce(uint64(pdcID), str(path)))
}

//export pdcgo_stage_consume
func pdcgo_stage_consume(pdcID C.uint64_t, path *C.char, timeout C.double) C.int {
	return C.int(lib.StageConsume(uint64(pdcID), str(path), float64(timeout)))
}

//export pdcgo_stage_consume_newer
func pdcgo_stage_consume_newer(pdcID C.uint64_t, path *C.char, version C.uint64_t, timeout C.double) C.int {
	return C.int(lib.StageConsumeNewer(uint64(pdcID), str(path), uint64(version), float64(timeout)))
}

//export pdcgo_stage_consume_local
func pdcgo_stage_consume_local(pdcID C.uint64_t, path *C.char, timeout C.double, out **C.char) C.int {
	if out == nil {
		// Checked first: a consume whose result cannot be handed back
		// would move the file for nothing.
		return C.int(lib.Report(fmt.Sprintf("pdc_stage_consume_local(pdc %d, %q, %gs, NULL)", uint64(pdcID), str(path), float64(timeout)),
			fmt.Errorf("local_path is NULL: pass the address of a char * to receive the path: %w", pdc.ErrInvalid)))
	}
	*out = nil
	local, rc := lib.StageConsumeLocal(uint64(pdcID), str(path), float64(timeout))
	if rc == capi.Succeed {
		if err := outString(out, local); err != nil {
			return C.int(lib.Report(fmt.Sprintf("pdc_stage_consume_local(pdc %d, %q)", uint64(pdcID), str(path)), err))
		}
	}
	return C.int(rc)
}

//export pdcgo_cont_put_objids
func pdcgo_cont_put_objids(cont C.uint64_t, nobj C.int, ids *C.uint64_t) C.int {
	return C.int(lib.ContPutObjIDs(uint64(cont), int(nobj), unsafe.Pointer(ids)))
}

//export pdcgo_cont_del_objids
func pdcgo_cont_del_objids(cont C.uint64_t, nobj C.int, ids *C.uint64_t) C.int {
	return C.int(lib.ContDelObjIDs(uint64(cont), int(nobj), unsafe.Pointer(ids)))
}

// pdcgo_cont_get_objids sets *nobj and *ids: a malloc'd array, NULL for
// none.
//
//export pdcgo_cont_get_objids
func pdcgo_cont_get_objids(cont C.uint64_t, nobj *C.int, ids **C.uint64_t) C.int {
	call := fmt.Sprintf("PDCcont_get_objids(cont %d)", uint64(cont))
	if nobj == nil || ids == nil {
		return C.int(lib.Report(call, fmt.Errorf("nobj and obj_ids must not be NULL: pass the addresses of an int and a pdcid_t *: %w", pdc.ErrInvalid)))
	}
	*nobj, *ids = 0, nil
	got, rc := lib.ContGetObjIDs(uint64(cont))
	return idsOut(call, got, rc, nobj, ids)
}

//export pdcgo_stage_lookup
func pdcgo_stage_lookup(pdcID C.uint64_t, path *C.char, wait C.int, rel **C.char, owner *C.uint32_t) C.int {
	r, o, rc := lib.StageLookup(uint64(pdcID), str(path), wait != 0)
	if rc == capi.Succeed {
		if err := outString(rel, r); err != nil {
			return C.int(lib.Report(fmt.Sprintf("pdc_stage_lookup(pdc %d, %q)", uint64(pdcID), str(path)), err))
		}
		*owner = C.uint32_t(o)
	}
	return C.int(rc)
}

// The interposer's calls (capi/preload): no public header declares them;
// libpdc_preload.so finds them with dlsym.

//export pdcgo_preload_consume
func pdcgo_preload_consume(pdcID C.uint64_t, path *C.char) C.int {
	return C.int(lib.StagePreloadConsume(uint64(pdcID), str(path)))
}

//export pdcgo_preload_produce
func pdcgo_preload_produce(pdcID C.uint64_t, path *C.char) C.int {
	return C.int(lib.StagePreloadProduce(uint64(pdcID), str(path)))
}
