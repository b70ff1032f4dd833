/*
 * pdc_timing.h - PDC's header of its client and server timers, by name.
 * pdc keeps no client timers: PDC_timing_report (pdc.h) prints nothing.
 *
 * Programs include pdc.h; this header exists so that code written for PDC,
 * which includes it by name, compiles unchanged.
 */
#ifndef PDC_TIMING_H
#define PDC_TIMING_H

#include "pdc.h"

#endif /* PDC_TIMING_H */
