/*
 * pdc_transforms_pkg.h - PDC's private header for transforms, for programs that include
 * it. PDC's private records are not given out by libpdc: it declares what
 * pdc_transform.h does, with pdc_prop_pkg.h's records.
 */
#ifndef PDC_TRANSFORMS_PKG_H
#define PDC_TRANSFORMS_PKG_H

#include "pdc_transform.h"
#include "pdc_prop_pkg.h"

#endif /* PDC_TRANSFORMS_PKG_H */
