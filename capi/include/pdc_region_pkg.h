/*
 * pdc_region_pkg.h - PDC's private header for regions, for programs that include
 * it. PDC's private records are not given out by libpdc: it declares what
 * pdc_region.h does, with pdc_prop_pkg.h's records.
 */
#ifndef PDC_REGION_PKG_H
#define PDC_REGION_PKG_H

#include "pdc_region.h"
#include "pdc_prop_pkg.h"

#endif /* PDC_REGION_PKG_H */
