/*
 * pdc_cont_pkg.h - PDC's private header for containers, for programs that include
 * it. PDC's private records are not given out by libpdc: it declares what
 * pdc_cont.h does, with pdc_prop_pkg.h's records.
 */
#ifndef PDC_CONT_PKG_H
#define PDC_CONT_PKG_H

#include "pdc_cont.h"
#include "pdc_prop_pkg.h"

#endif /* PDC_CONT_PKG_H */
