/*
 * pdc_client_connect.h - PDC's client header by name: its public functions
 * (tag search, the DART index, PDC_Client_close_all_server: in
 * pdc_client_api.h, which pdc.h includes too) and the helpers PDC's
 * version brings along from PDC's utility library, which PDC's own test
 * programs call (pdc_utils.h).
 *
 * Programs include pdc.h; this header exists so that code written for PDC,
 * which includes it by name, compiles unchanged.
 */
#ifndef PDC_CLIENT_CONNECT_H
#define PDC_CLIENT_CONNECT_H

#include "pdc.h"
#include "pdc_client_api.h"
#include "pdc_utils.h"

#endif /* PDC_CLIENT_CONNECT_H */
