/*
 * pdc_client_server_common.h - PDC's header of what its client and server
 * share, by name. Programs written for PDC include it for
 * PDC_get_elapsed_time_double (pdc_utils.h); the rest of PDC's (its
 * metadata records, RPC arguments and requests) describes PDC's servers,
 * which pdc's are not, and is not here: a program that uses it does not
 * compile, naming what it uses.
 *
 * Programs include pdc.h; this header exists so that code written for PDC,
 * which includes it by name, compiles unchanged.
 */
#ifndef PDC_CLIENT_SERVER_COMMON_H
#define PDC_CLIENT_SERVER_COMMON_H

#include "pdc.h"
#include "pdc_utils.h"

#endif /* PDC_CLIENT_SERVER_COMMON_H */
