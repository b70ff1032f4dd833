/*
 * The public functions of libpdc for object tags and the container and
 * object iterators, defined against the public headers. Each calls its Go
 * counterpart in exports_tags.go.
 */
#include <stdio.h>
#include <stdlib.h>

#include "pdc.h"
#include "_cgo_export.h"

perr_t PDCobj_put_tag(pdcid_t obj_id, const char *tag_name, const void *tag_value, pdc_var_type_t value_type,
                      psize_t value_size)
{
    return pdcgo_obj_put_tag(obj_id, (char *)tag_name, (void *)tag_value, (int)value_type, value_size);
}

perr_t PDCobj_get_tag(pdcid_t obj_id, const char *tag_name, void **tag_value, pdc_var_type_t *value_type,
                      psize_t *value_size)
{
    int    type = PDC_UNKNOWN;
    perr_t rc   = pdcgo_obj_get_tag(obj_id, (char *)tag_name, tag_value, &type, value_size);
    if (rc == SUCCEED && value_type != NULL)
        *value_type = (pdc_var_type_t)type;
    return rc;
}

perr_t PDCobj_del_tag(pdcid_t obj_id, const char *tag_name) { return pdcgo_obj_del_tag(obj_id, (char *)tag_name); }

pdcid_t pdc_obj_open_by_meta_id(pdcid_t cont_id, uint64_t meta_id, pdcid_t obj_create_prop)
{
    return pdcgo_obj_open_by_meta_id(cont_id, meta_id, obj_create_prop);
}
