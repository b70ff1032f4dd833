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

/*
 * Object properties (PDC_OBJ_CREATE). Each setter fails, saying why, on a
 * handle that is not an open object property or a value out of range.
 * Strings are copied; NULL is "".
 *
 * PDCprop_obj_dup returns a new object property with the same settings.
 * PDCprop_set_obj_dims: 1 to 32 dims, none 0; only the first may be
 * PDC_SIZE_UNLIMITED. The object's identity is its name with time step,
 * user id and app name. PDCprop_set_obj_buf keeps buf for
 * PDCobj_buf_retrieve; libpdc never reads or writes it.
 */
pdcid_t PDCprop_obj_dup(pdcid_t prop);
perr_t PDCprop_set_obj_dims(pdcid_t obj_prop, PDC_int_t ndim, uint64_t *dims);
perr_t PDCprop_set_obj_type(pdcid_t obj_prop, pdc_var_type_t type);
perr_t PDCprop_set_obj_transfer_region_type(pdcid_t obj_prop, pdc_region_partition_t region_partition);
perr_t PDCprop_set_obj_consistency_semantics(pdcid_t obj_prop, pdc_consistency_t consistency);
perr_t PDCprop_set_obj_app_name(pdcid_t obj_prop, char *app_name);
perr_t PDCprop_set_obj_time_step(pdcid_t obj_prop, uint32_t time_step);
perr_t PDCprop_set_obj_user_id(pdcid_t obj_prop, uint32_t user_id);
perr_t PDCprop_set_obj_data_loc(pdcid_t obj_prop, char *loc);
perr_t PDCprop_set_obj_tags(pdcid_t obj_prop, char *tags);
perr_t PDCprop_set_obj_buf(pdcid_t obj_prop, void *buf);

/*
 * PDCcont_prop_get_info returns the container property's settings
 * (struct _pdc_cont_prop, in pdc_prop_pkg.h: cont_prop_id and cont_life;
 * pdc is NULL) in a record the caller does not free, as PDC's; it is the
 * calling thread's and its next call overwrites it. NULL on failure.
 */
struct _pdc_cont_prop *PDCcont_prop_get_info(pdcid_t prop_id);

/*
 * PDCobj_prop_get_info returns the property's settings (obj_prop_id is
 * obj_prop; type is PDC_UNKNOWN until set) in one malloc'd block: the
 * caller frees it with free(p), which frees p->dims too (do not free
 * p->dims). NULL on failure.
 */
struct pdc_obj_prop *PDCobj_prop_get_info(pdcid_t obj_prop);

#ifdef __cplusplus
}
#endif

#endif /* PDC_PROP_H */
