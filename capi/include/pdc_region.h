/*
 * pdc_region.h - the types of regions (boxes of an object) and of region
 * transfers.
 *
 * Programs include pdc.h; this header exists so that code written for PDC,
 * which includes it by name, compiles unchanged.
 */
#ifndef PDC_REGION_H
#define PDC_REGION_H

#include "pdc_public.h"

/* Which way a region transfer moves data. */
typedef enum {
    PDC_NA    = 0,
    PDC_READ  = 1, /* object to buffer */
    PDC_WRITE = 2  /* buffer to object */
} pdc_access_t;

typedef enum {
    PDC_TRANSFER_STATUS_COMPLETE  = 0,
    PDC_TRANSFER_STATUS_PENDING   = 1,
    PDC_TRANSFER_STATUS_NOT_FOUND = 2
} pdc_transfer_status_t;

struct pdc_region_info {
    pdcid_t   local_id;
    void     *obj;
    size_t    ndim;
    uint64_t *offset;
    uint64_t *size;
    bool      mapping;
    int       registered_op;
    void     *buf;
    size_t    unit;
};

#endif /* PDC_REGION_H */
