/*
 * pdc_query.h - the types of data queries (value ranges over object data).
 *
 * Programs include pdc.h; this header exists so that code written for PDC,
 * which includes it by name, compiles unchanged.
 */
#ifndef PDC_QUERY_H
#define PDC_QUERY_H

#include "pdc_public.h"

typedef enum {
    PDC_OP_NONE = 0,
    PDC_GT      = 1,
    PDC_LT      = 2,
    PDC_GTE     = 3,
    PDC_LTE     = 4,
    PDC_EQ      = 5
} pdc_query_op_t;

#endif /* PDC_QUERY_H */
