/*
 * pdc_analysis_pkg.h - PDC's private header for analysis, for programs that include
 * it. PDC's private records are not given out by libpdc: it declares what
 * pdc_analysis.h does, with pdc_prop_pkg.h's records.
 */
#ifndef PDC_ANALYSIS_PKG_H
#define PDC_ANALYSIS_PKG_H

#include "pdc_analysis.h"
#include "pdc_prop_pkg.h"

#endif /* PDC_ANALYSIS_PKG_H */
