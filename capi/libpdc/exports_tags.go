package main

/*
#include <stdint.h>
#include <stdlib.h>
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

// pdcgo_obj_get_tag sets *value to a malloc'd copy of the tag's value
// (NULL for a tag that is not set), *size and *typ.
//
//export pdcgo_obj_get_tag
func pdcgo_obj_get_tag(id C.uint64_t, name *C.char, value *unsafe.Pointer, typ *C.int, size *C.ulonglong) C.int {
	call := fmt.Sprintf("PDCobj_get_tag(%d, %q)", uint64(id), str(name))
	if value == nil || size == nil {
		return C.int(lib.Report(call, fmt.Errorf("tag_value and value_size must not be NULL: pass the addresses of a void * and a psize_t: %w", pdc.ErrInvalid)))
	}
	*value, *size = nil, 0
	tag, rc := lib.ObjGetTag(uint64(id), str(name))
	if rc != capi.Succeed {
		return C.int(rc)
	}
	*typ = C.int(tag.Type)
	if !tag.Found {
		return C.int(rc)
	}
	// malloc(0) may return NULL, which would read as "not set".
	p := C.malloc(C.size_t(max(len(tag.Value), 1)))
	if p == nil {
		return C.int(lib.Report(call, fmt.Errorf("out of memory for %d bytes", len(tag.Value))))
	}
	copy(unsafe.Slice((*byte)(p), len(tag.Value)), tag.Value)
	*value, *size = p, C.ulonglong(len(tag.Value))
	return C.int(rc)
}

//export pdcgo_obj_del_tag
func pdcgo_obj_del_tag(id C.uint64_t, name *C.char) C.int {
	return C.int(lib.ObjDelTag(uint64(id), str(name)))
}

//export pdcgo_obj_open_by_meta_id
func pdcgo_obj_open_by_meta_id(cont, metaID, prop C.uint64_t) C.uint64_t {
	return C.uint64_t(lib.ObjOpenMetaID(uint64(cont), uint64(metaID), uint64(prop)))
}
