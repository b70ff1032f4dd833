/*
 * pdc_obj.h - the types of objects: named n-dimensional arrays in a
 * container.
 *
 * Programs include pdc.h; this header exists so that code written for PDC,
 * which includes it by name, compiles unchanged.
 */
#ifndef PDC_OBJ_H
#define PDC_OBJ_H

#include "pdc_public.h"
#include "pdc_prop.h"

struct pdc_obj_info {
    char                *name;
    pdcid_t              meta_id;
    pdcid_t              local_id;
    int                  server_id;
    uint32_t             metadata_server_id;
    struct pdc_obj_prop *obj_pt;
};

/* An iterator over a container's objects (opaque). */
typedef struct pdc_obj_iter obj_handle;

#endif /* PDC_OBJ_H */
