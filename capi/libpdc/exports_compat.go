package main

/*
#include <stdint.h>
#include <stdlib.h>
#include "host.h"
*/
import "C"

import (
	"fmt"

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
