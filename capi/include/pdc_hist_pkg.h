/*
 * pdc_hist_pkg.h - PDC's private header for histograms, for programs that include
 * it. PDC's private records are not given out by libpdc: it declares what
 * pdc_query.h does, with pdc_prop_pkg.h's records.
 */
#ifndef PDC_HIST_PKG_H
#define PDC_HIST_PKG_H

#include "pdc_query.h"
#include "pdc_prop_pkg.h"

#endif /* PDC_HIST_PKG_H */
