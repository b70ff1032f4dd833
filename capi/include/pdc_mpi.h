/*
 * pdc_mpi.h - the MPI side of pdc's C API. It includes mpi.h only when the
 * program is built with ENABLE_MPI defined, as PDC's does, so that programs
 * without MPI need no MPI headers.
 *
 * Programs include pdc.h; this header exists so that code written for PDC,
 * which includes it by name, compiles unchanged.
 */
#ifndef PDC_MPI_H
#define PDC_MPI_H

#include "pdc_public.h"

#ifdef ENABLE_MPI
#include <mpi.h>
#endif

#endif /* PDC_MPI_H */
