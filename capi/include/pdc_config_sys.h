/*
 * pdc_config_sys.h - PDC installs its build settings under this name too
 * (its pdc_config.h includes it). libpdc's one setting that programs see,
 * ENABLE_MPI, is in pdc_config.h; PDC's other build options (Lustre, the
 * server's region cache, checkpoint, profiling, Julia, multithreading)
 * are server-side choices that do not apply to libpdc, so none is defined.
 */
#ifndef PDC_CONFIG_SYS_H
#define PDC_CONFIG_SYS_H

#include "pdc_config.h"

#endif /* PDC_CONFIG_SYS_H */
