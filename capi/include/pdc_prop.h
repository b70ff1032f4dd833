/*
 * pdc_prop.h - properties: the settings a container or object is created
 * with.
 *
 * Programs include pdc.h; this header exists so that code written for PDC,
 * which includes it by name, compiles unchanged.
 */
#ifndef PDC_PROP_H
#define PDC_PROP_H

#include "pdc_public.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { PDC_CONT_CREATE = 0, PDC_OBJ_CREATE = 1 } pdc_prop_type_t;

/* How an object's data is spread over the data servers. */
typedef enum {
    PDC_OBJ_STATIC     = 0, /* the whole object on one data server */
    PDC_REGION_STATIC  = 1, /* rows split in blocks over all data servers (default) */
    PDC_REGION_DYNAMIC = 2, /* each written region on the least-loaded data server */
    PDC_REGION_LOCAL   = 3  /* the data server on the writer's host */
} pdc_region_partition_t;

/* When a write becomes visible to readers. */
typedef enum {
    PDC_CONSISTENCY_DEFAULT  = 0,
    PDC_CONSISTENCY_POSIX    = 1, /* a transfer completes inside its start */
    PDC_CONSISTENCY_COMMIT   = 2,
    PDC_CONSISTENCY_SESSION  = 3,
    PDC_CONSISTENCY_EVENTUAL = 4
} pdc_consistency_t;

struct pdc_obj_prop {
    pdcid_t                obj_prop_id;
    size_t                 ndim;
    uint64_t              *dims;
    pdc_var_type_t         type;
    pdc_region_partition_t region_partition;
    pdc_consistency_t      consistency;
};

/*
 * PDCprop_create makes a property of the given type for the connection pdc
 * (from PDCinit). Containers created with it belong to that connection.
 * A container property starts as PDC_PERSIST. An object property
 * (PDC_OBJ_CREATE) starts with no dims and no type (set both before
 * PDCobj_create), PDC_REGION_STATIC and PDC_CONSISTENCY_DEFAULT.
 *
 * Returns the property's handle, or 0.
 */
pdcid_t PDCprop_create(pdc_prop_type_t type, pdcid_t pdc);

/*
 * PDCprop_close releases a property. Containers created with it are not
 * affected. Closing a handle that is not an open property fails.
 */
perr_t PDCprop_close(pdcid_t prop);

#ifdef __cplusplus
}
#endif

#endif /* PDC_PROP_H */
