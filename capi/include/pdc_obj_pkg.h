/*
 * pdc_obj_pkg.h - PDC's private header for objects, for programs that include
 * it. PDC's private records are not given out by libpdc: it declares what
 * pdc_obj.h does, with pdc_prop_pkg.h's records.
 */
#ifndef PDC_OBJ_PKG_H
#define PDC_OBJ_PKG_H

#include "pdc_obj.h"
#include "pdc_prop_pkg.h"

#endif /* PDC_OBJ_PKG_H */
