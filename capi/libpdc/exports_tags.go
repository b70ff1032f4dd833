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
	"github.com/pdcgo/pdc/capi"
)

//export pdcgo_obj_put_tag
func pdcgo_obj_put_tag(id C.uint64_t, name *C.char, value unsafe.Pointer, typ C.int, size C.ulonglong) C.int {
	return C.int(lib.ObjPutTag(uint64(id), str(name), value, int(typ), uint64(size)))
}

// pdcgo_obj_get_tag is as pdcgo_cont_get_tag.
//
//export pdcgo_obj_get_tag
func pdcgo_obj_get_tag(id C.uint64_t, name *C.char, value *unsafe.Pointer, typ *C.int, size *C.ulonglong) C.int {
	return getTag("PDCobj_get_tag", lib.ObjGetTag, id, name, value, typ, size)
}

//export pdcgo_obj_del_tag
func pdcgo_obj_del_tag(id C.uint64_t, name *C.char) C.int {
	return C.int(lib.ObjDelTag(uint64(id), str(name)))
}

// pdcgo_obj_tag_names: *names as pdcgo_query_tags's.
//
//export pdcgo_obj_tag_names
func pdcgo_obj_tag_names(id C.uint64_t, n *C.int, names **C.char) C.int {
	call := fmt.Sprintf("pdc_obj_tag_names(%d)", uint64(id))
	if n == nil || names == nil {
		return C.int(lib.Report(call, fmt.Errorf("n and names must not be NULL: %w", pdc.ErrInvalid)))
	}
	*n, *names = 0, nil
	got, rc := lib.ObjTagNames(uint64(id))
	if rc != 0 {
		return C.int(rc)
	}
	if rc := namesOut(call, got, names); rc != 0 {
		return rc
	}
	*n = C.int(len(got))
	return 0
}

// pdcgo_cont_obj_names: *names as pdcgo_query_tags's.
//
//export pdcgo_cont_obj_names
func pdcgo_cont_obj_names(id C.uint64_t, n *C.int, names **C.char) C.int {
	call := fmt.Sprintf("pdc_cont_obj_names(cont %d)", uint64(id))
	if n == nil || names == nil {
		return C.int(lib.Report(call, fmt.Errorf("n and names must not be NULL: %w", pdc.ErrInvalid)))
	}
	*n, *names = 0, nil
	got, rc := lib.ContObjNames(uint64(id))
	if rc != 0 {
		return C.int(rc)
	}
	if rc := namesOut(call, got, names); rc != 0 {
		return rc
	}
	*n = C.int(len(got))
	return 0
}

//export pdcgo_obj_open_by_meta_id
func pdcgo_obj_open_by_meta_id(cont, metaID, prop C.uint64_t) C.uint64_t {
	return C.uint64_t(lib.ObjOpenMetaID(uint64(cont), uint64(metaID), uint64(prop)))
}

//export pdcgo_obj_open_created
func pdcgo_obj_open_created(cont, metaID, prop C.uint64_t) C.uint64_t {
	return C.uint64_t(lib.ObjOpenCreated(uint64(cont), uint64(metaID), uint64(prop)))
}

// pdcgo_cont_iter_start returns the iterator's id, at its first
// container: 0 for none or on failure (which it reports).
//
//export pdcgo_cont_iter_start
func pdcgo_cont_iter_start() C.uint64_t {
	id, _ := lib.ContIterStart()
	return C.uint64_t(id)
}

//export pdcgo_obj_iter_start
func pdcgo_obj_iter_start(cont C.uint64_t) C.uint64_t {
	id, _ := lib.ObjIterStart(uint64(cont))
	return C.uint64_t(id)
}

// pdcgo_iter_next moves the iterator to its next item and returns 1, or
// ends it and returns 0 past the last item or on failure (which it
// reports).
//
//export pdcgo_iter_next
func pdcgo_iter_next(id C.uint64_t) C.int {
	if lib.IterNext(uint64(id)) {
		return 1
	}
	return 0
}

// pdcgo_cont_iter_get_info is pdcgo_cont_get_info for the iterator's
// current container.
//
//export pdcgo_cont_iter_get_info
func pdcgo_cont_iter_get_info(id C.uint64_t, localID, metaID *C.uint64_t, outName **C.char) C.int {
	info, rc := lib.ContIterInfo(uint64(id))
	if rc == capi.Succeed {
		*localID, *metaID = C.uint64_t(info.LocalID), C.uint64_t(info.MetaID)
		if err := outString(outName, info.Name); err != nil {
			return C.int(lib.Report("PDCcont_iter_get_info", err))
		}
	}
	return C.int(rc)
}

// pdcgo_obj_iter_get_info is pdcgo_obj_get_info for the iterator's
// current object; *localID is this process's open handle to it, 0 if
// none.
//
//export pdcgo_obj_iter_get_info
func pdcgo_obj_iter_get_info(id C.uint64_t, name **C.char, metaID, localID *C.uint64_t, server *C.int, pdcServer *C.uint32_t, ndim *C.size_t, dims **C.uint64_t, typ, part, cons *C.int) C.int {
	info, rc := lib.ObjIterInfo(uint64(id))
	if rc == capi.Succeed {
		if err := outString(name, info.Name); err != nil {
			return C.int(lib.Report("PDCobj_iter_get_info", err))
		}
		*metaID, *localID, *server, *pdcServer = C.uint64_t(info.MetaID), C.uint64_t(info.LocalID), C.int(info.MetaServer), C.uint32_t(info.PDCMetaServer)
		*ndim, *dims = C.size_t(len(info.Prop.Dims)), cU64s(info.Prop.Dims)
		*typ, *part, *cons = C.int(info.Prop.Type), C.int(info.Prop.Partition), C.int(info.Prop.Consistency)
	}
	return C.int(rc)
}

//export pdcgo_iter_end
func pdcgo_iter_end(id C.uint64_t) { lib.IterEnd(uint64(id)) }
