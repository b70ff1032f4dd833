/*
 * pdc_client_connect.h - the types of tag search through the DART index.
 *
 * Programs include pdc.h; this header exists so that code written for PDC,
 * which includes it by name, compiles unchanged.
 */
#ifndef PDC_CLIENT_CONNECT_H
#define PDC_CLIENT_CONNECT_H

#include "pdc_public.h"

typedef enum { DHT_FULL_HASH = 1, DHT_INITIAL_HASH = 2, DART_HASH = 3 } dart_hash_algo_t;

typedef enum { REF_PRIMARY_ID = 1, REF_SECONDARY_ID = 2, REF_SERVER_ID = 3 } dart_object_ref_type_t;

#endif /* PDC_CLIENT_CONNECT_H */
