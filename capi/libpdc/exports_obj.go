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
	"github.com/pdcgo/pdc/region"
)

// u64s copies n uint64s from C; nil for a NULL pointer or n out of 1 to
// region.MaxDims.
func u64s(p *C.uint64_t, n int) []uint64 {
	if p == nil || n < 1 || n > region.MaxDims {
		return nil
	}
	return append([]uint64(nil), unsafe.Slice((*uint64)(unsafe.Pointer(p)), n)...)
}

// cU64s returns a malloc'd copy of v (at least one element, so that an
// empty array is not NULL).
func cU64s(v []uint64) *C.uint64_t {
	p := (*C.uint64_t)(cMalloc(8 * max(len(v), 1)))
	if p != nil {
		copy(unsafe.Slice((*uint64)(unsafe.Pointer(p)), len(v)), v)
	}
	return p
}

//export pdcgo_prop_obj_dup
func pdcgo_prop_obj_dup(id C.uint64_t) C.uint64_t { return C.uint64_t(lib.PropObjDup(uint64(id))) }

//export pdcgo_prop_set_obj_dims
func pdcgo_prop_set_obj_dims(id C.uint64_t, ndim C.int, dims *C.uint64_t) C.int {
	return C.int(lib.PropSetObjDims(uint64(id), int(ndim), u64s(dims, int(ndim))))
}

//export pdcgo_prop_set_obj_type
func pdcgo_prop_set_obj_type(id C.uint64_t, typ C.int) C.int {
	return C.int(lib.PropSetObjType(uint64(id), int(typ)))
}

//export pdcgo_prop_set_obj_transfer_region_type
func pdcgo_prop_set_obj_transfer_region_type(id C.uint64_t, part C.int) C.int {
	return C.int(lib.PropSetObjTransferRegionType(uint64(id), int(part)))
}

//export pdcgo_prop_set_obj_consistency
func pdcgo_prop_set_obj_consistency(id C.uint64_t, c C.int) C.int {
	return C.int(lib.PropSetObjConsistency(uint64(id), int(c)))
}

//export pdcgo_prop_set_obj_app_name
func pdcgo_prop_set_obj_app_name(id C.uint64_t, name *C.char) C.int {
	return C.int(lib.PropSetObjAppName(uint64(id), str(name)))
}

//export pdcgo_prop_set_obj_time_step
func pdcgo_prop_set_obj_time_step(id C.uint64_t, step C.uint32_t) C.int {
	return C.int(lib.PropSetObjTimeStep(uint64(id), uint32(step)))
}

//export pdcgo_prop_set_obj_user_id
func pdcgo_prop_set_obj_user_id(id C.uint64_t, user C.uint32_t) C.int {
	return C.int(lib.PropSetObjUserID(uint64(id), uint32(user)))
}

//export pdcgo_prop_set_obj_data_loc
func pdcgo_prop_set_obj_data_loc(id C.uint64_t, loc *C.char) C.int {
	return C.int(lib.PropSetObjDataLoc(uint64(id), str(loc)))
}

//export pdcgo_prop_set_obj_tags
func pdcgo_prop_set_obj_tags(id C.uint64_t, tags *C.char) C.int {
	return C.int(lib.PropSetObjTags(uint64(id), str(tags)))
}

//export pdcgo_prop_set_obj_buf
func pdcgo_prop_set_obj_buf(id C.uint64_t, buf unsafe.Pointer) C.int {
	return C.int(lib.PropSetObjBuf(uint64(id), buf))
}

// pdcgo_obj_prop_get_info fills the fields of a struct pdc_obj_prop;
// *dims is malloc'd (pdc.c copies and frees it).
//
//export pdcgo_obj_prop_get_info
func pdcgo_obj_prop_get_info(id C.uint64_t, ndim *C.size_t, dims **C.uint64_t, typ, part, cons *C.int) C.int {
	info, rc := lib.ObjPropGetInfo(uint64(id))
	if rc == capi.Succeed {
		*ndim, *dims = C.size_t(len(info.Dims)), cU64s(info.Dims)
		*typ, *part, *cons = C.int(info.Type), C.int(info.Partition), C.int(info.Consistency)
	}
	return C.int(rc)
}

//export pdcgo_obj_create
func pdcgo_obj_create(cont C.uint64_t, name *C.char, prop C.uint64_t) C.uint64_t {
	return C.uint64_t(lib.ObjCreate(uint64(cont), str(name), uint64(prop)))
}

//export pdcgo_obj_open
func pdcgo_obj_open(name *C.char, pdcID C.uint64_t) C.uint64_t {
	return C.uint64_t(lib.ObjOpen(str(name), uint64(pdcID)))
}

//export pdcgo_obj_open_col
func pdcgo_obj_open_col(name *C.char, pdcID C.uint64_t) C.uint64_t {
	return C.uint64_t(lib.ObjOpenCol(str(name), uint64(pdcID)))
}

//export pdcgo_obj_close
func pdcgo_obj_close(id C.uint64_t) C.int { return C.int(lib.ObjClose(uint64(id))) }

//export pdcgo_obj_del
func pdcgo_obj_del(id C.uint64_t) C.int { return C.int(lib.ObjDel(uint64(id))) }

// pdcgo_obj_get_info fills the fields of a struct pdc_obj_info and its
// struct pdc_obj_prop; *name and *dims are malloc'd (pdc.c copies and
// frees them).
//
//export pdcgo_obj_get_info
func pdcgo_obj_get_info(id C.uint64_t, name **C.char, metaID *C.uint64_t, server *C.int, pdcServer *C.uint32_t, ndim *C.size_t, dims **C.uint64_t, typ, part, cons *C.int) C.int {
	info, rc := lib.ObjGetInfo(uint64(id))
	if rc == capi.Succeed {
		if err := outString(name, info.Name); err != nil {
			return C.int(lib.Report(fmt.Sprintf("PDCobj_get_info(%d)", uint64(id)), err))
		}
		*metaID, *server, *pdcServer = C.uint64_t(info.MetaID), C.int(info.MetaServer), C.uint32_t(info.PDCMetaServer)
		*ndim, *dims = C.size_t(len(info.Prop.Dims)), cU64s(info.Prop.Dims)
		*typ, *part, *cons = C.int(info.Prop.Type), C.int(info.Prop.Partition), C.int(info.Prop.Consistency)
	}
	return C.int(rc)
}

//export pdcgo_obj_set_dims
func pdcgo_obj_set_dims(id C.uint64_t, ndim C.int, dims *C.uint64_t) C.int {
	return C.int(lib.ObjSetDims(uint64(id), int(ndim), u64s(dims, int(ndim))))
}

// pdcgo_obj_get_dims sets *ndim and *dims, a malloc'd array the caller
// frees.
//
//export pdcgo_obj_get_dims
func pdcgo_obj_get_dims(id C.uint64_t, ndim *C.int, dims **C.uint64_t) C.int {
	if ndim == nil || dims == nil {
		return C.int(lib.Report(fmt.Sprintf("PDCobj_get_dims(%d)", uint64(id)),
			fmt.Errorf("ndim and dims must not be NULL: pass the addresses of an int and a uint64_t *: %w", pdc.ErrInvalid)))
	}
	d, rc := lib.ObjGetDims(uint64(id))
	if rc == capi.Succeed {
		*ndim, *dims = C.int(len(d)), cU64s(d)
	}
	return C.int(rc)
}

//export pdcgo_obj_flush_start
func pdcgo_obj_flush_start(id C.uint64_t) C.int { return C.int(lib.ObjFlushStart(uint64(id))) }

//export pdcgo_obj_flush_all_start
func pdcgo_obj_flush_all_start() C.int { return C.int(lib.ObjFlushAllStart()) }

//export pdcgo_obj_buf_retrieve
func pdcgo_obj_buf_retrieve(id C.uint64_t, buf *unsafe.Pointer) C.int {
	b, rc := lib.ObjBufRetrieve(uint64(id))
	if rc == capi.Succeed {
		*buf = b
	}
	return C.int(rc)
}

//export pdcgo_obj_put_data
func pdcgo_obj_put_data(name *C.char, data unsafe.Pointer, size C.uint64_t, cont C.uint64_t) C.uint64_t {
	return C.uint64_t(lib.ObjPutData(str(name), data, uint64(size), uint64(cont)))
}

//export pdcgo_obj_get_data
func pdcgo_obj_get_data(id C.uint64_t, data unsafe.Pointer, size C.uint64_t) C.int {
	return C.int(lib.ObjGetData(uint64(id), data, uint64(size)))
}

//export pdcgo_region_create
func pdcgo_region_create(ndim C.uint64_t, offset, size *C.uint64_t) C.uint64_t {
	return C.uint64_t(lib.RegionCreate(uint64(ndim), u64s(offset, int(min(uint64(ndim), region.MaxDims+1))),
		u64s(size, int(min(uint64(ndim), region.MaxDims+1)))))
}

//export pdcgo_region_close
func pdcgo_region_close(id C.uint64_t) C.int { return C.int(lib.RegionClose(uint64(id))) }

// pdcgo_region_get_info sets *ndim and *offset, *size: malloc'd arrays
// (pdc.c copies and frees them).
//
//export pdcgo_region_get_info
func pdcgo_region_get_info(id C.uint64_t, ndim *C.size_t, offset, size **C.uint64_t) C.int {
	box, rc := lib.RegionGetInfo(uint64(id))
	if rc == capi.Succeed {
		*ndim, *offset, *size = C.size_t(box.Ndim()), cU64s(box.Off), cU64s(box.Size)
	}
	return C.int(rc)
}

// pdcgo_region_transfer_create takes buf, C memory: the transfer reads or
// writes it through a slice over it (cgo allows Go to hold C pointers)
// until it is waited or closed, never after.
//
//export pdcgo_region_transfer_create
func pdcgo_region_transfer_create(buf unsafe.Pointer, access C.int, obj, local, remote C.uint64_t) C.uint64_t {
	return C.uint64_t(lib.TransferCreate(buf, int(access), uint64(obj), uint64(local), uint64(remote)))
}

// pdcgo_region_transfer_now: buf as pdcgo_region_transfer_create's, held
// only until it returns.
//
//export pdcgo_region_transfer_now
func pdcgo_region_transfer_now(obj C.uint64_t, buf unsafe.Pointer, access C.int, ndim C.uint64_t, offset, size *C.uint64_t) C.int {
	n := int(min(uint64(ndim), region.MaxDims+1))
	return C.int(lib.TransferNow(uint64(obj), buf, int(access), uint64(ndim), u64s(offset, n), u64s(size, n)))
}

//export pdcgo_region_transfer_start
func pdcgo_region_transfer_start(id C.uint64_t) C.int { return C.int(lib.TransferStart(uint64(id))) }

// pdcgo_region_transfer_start_all: the Lib checks n before it reads p.
//
//export pdcgo_region_transfer_start_all
func pdcgo_region_transfer_start_all(p *C.uint64_t, n C.int) C.int {
	return C.int(lib.TransferStartAll(unsafe.Pointer(p), int(n)))
}

//export pdcgo_region_transfer_wait
func pdcgo_region_transfer_wait(id C.uint64_t) C.int { return C.int(lib.TransferWait(uint64(id))) }

//export pdcgo_region_transfer_wait_all
func pdcgo_region_transfer_wait_all(p *C.uint64_t, n C.int) C.int {
	return C.int(lib.TransferWaitAll(unsafe.Pointer(p), int(n)))
}

//export pdcgo_region_transfer_status
func pdcgo_region_transfer_status(id C.uint64_t, status *C.int) C.int {
	if status == nil {
		return C.int(lib.Report(fmt.Sprintf("PDCregion_transfer_status(%d, NULL)", uint64(id)),
			fmt.Errorf("completed is NULL: pass the address of a pdc_transfer_status_t: %w", pdc.ErrInvalid)))
	}
	s, rc := lib.TransferStatus(uint64(id))
	if rc == capi.Succeed {
		*status = C.int(s)
	}
	return C.int(rc)
}

//export pdcgo_region_transfer_close
func pdcgo_region_transfer_close(id C.uint64_t) C.int { return C.int(lib.TransferClose(uint64(id))) }
