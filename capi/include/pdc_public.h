/*
 * pdc_public.h - the basic types of pdc's C API (libpdc): handles, error
 * codes, sizes, lifetimes and tags.
 *
 * Programs include pdc.h; this header exists so that code written for PDC,
 * which includes it by name, compiles unchanged.
 */
#ifndef PDC_PUBLIC_H
#define PDC_PUBLIC_H

#include <stdint.h>
#include <stdlib.h>
#include "pdc_generic.h"

/* The result of a call that returns no handle: SUCCEED or FAIL. A call that
 * fails has printed one line to stderr naming the call, what it acted on
 * and why; the process goes on. */
typedef int perr_t;
#define SUCCEED 0
#define FAIL    (-1)

/* A handle: to a connection (PDCinit), a property, a container, ... It is a
 * number, not a pointer; 0 is never a handle and is what a failing call
 * that returns one returns. Handles are never reused within a process, so
 * a stale handle fails cleanly instead of naming something else. */
typedef uint64_t pdcid_t;

typedef unsigned long long psize_t;
typedef bool               pbool_t;

/* PDC's names for C's int, float and double (PDCprop_set_obj_dims takes a
 * PDC_int_t ndim). */
typedef int    PDC_int_t;
typedef float  PDC_float_t;
typedef double PDC_double_t;

/* A dimension that can grow (the first dimension of an object). */
#define PDC_SIZE_UNLIMITED UINT64_MAX

/* Whether a container outlives the cluster: transient containers are
 * deleted, with their objects, when the servers are stopped (pdc down,
 * close_server). */
typedef enum { PDC_PERSIST = 0, PDC_TRANSIENT = 1 } pdc_lifetime_t;

/* PDC's choice of the server a client talks to. pdc has no such setting:
 * the values exist so that code written for PDC compiles. */
typedef enum { PDC_SERVER_DEFAULT = 0, PDC_SERVER_PER_CLIENT = 1 } pdc_server_selection_t;

/* A key/value tag, as tag searches take and return it. */
typedef struct pdc_kvtag_t {
    char    *name;
    uint32_t size;
    int8_t   type; /* a pdc_var_type_t */
    void    *value;
} pdc_kvtag_t;

#endif /* PDC_PUBLIC_H */
