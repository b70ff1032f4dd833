/*
 * pdc_config.h - how libpdc was installed, as PDC's pdc_config.h says how
 * PDC was built. ENABLE_MPI is defined when it was installed for MPI
 * (PDC_MPI=1 capi/install.sh PREFIX, or make capi PDC_MPI=1): pdc.h then
 * includes pdc_mpi.h, which needs mpi.h (build with mpicc). A program may
 * also define ENABLE_MPI itself (-DENABLE_MPI).
 */
#ifndef PDC_CONFIG_H
#define PDC_CONFIG_H

/* #undef ENABLE_MPI */

#endif /* PDC_CONFIG_H */
