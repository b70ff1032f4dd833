/*
 * The public functions of libpdc for object properties, objects, regions
 * and region transfers, defined against the public headers. Each calls
 * its Go counterpart in exports_obj.go. Structs handed to the caller are
 * one malloc'd block each (arrays and names inside it), so pdcgo_free(p) frees
 * everything.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pdc.h"
#include "_cgo_export.h"
#include "host.h"

pdcid_t PDCprop_obj_dup(pdcid_t prop) { return pdcgo_prop_obj_dup(prop); }

perr_t PDCprop_set_obj_dims(pdcid_t obj_prop, PDC_int_t ndim, uint64_t *dims)
{
    return pdcgo_prop_set_obj_dims(obj_prop, ndim, dims);
}

perr_t PDCprop_set_obj_type(pdcid_t obj_prop, pdc_var_type_t type) { return pdcgo_prop_set_obj_type(obj_prop, (int)type); }

perr_t PDCprop_set_obj_transfer_region_type(pdcid_t obj_prop, pdc_region_partition_t region_partition)
{
    return pdcgo_prop_set_obj_transfer_region_type(obj_prop, (int)region_partition);
}

perr_t PDCprop_set_obj_consistency_semantics(pdcid_t obj_prop, pdc_consistency_t consistency)
{
    return pdcgo_prop_set_obj_consistency(obj_prop, (int)consistency);
}

perr_t PDCprop_set_obj_app_name(pdcid_t obj_prop, char *app_name) { return pdcgo_prop_set_obj_app_name(obj_prop, app_name); }

perr_t PDCprop_set_obj_time_step(pdcid_t obj_prop, uint32_t time_step)
{
    return pdcgo_prop_set_obj_time_step(obj_prop, time_step);
}

perr_t PDCprop_set_obj_user_id(pdcid_t obj_prop, uint32_t user_id) { return pdcgo_prop_set_obj_user_id(obj_prop, user_id); }

perr_t PDCprop_set_obj_data_loc(pdcid_t obj_prop, char *loc) { return pdcgo_prop_set_obj_data_loc(obj_prop, loc); }

perr_t PDCprop_set_obj_tags(pdcid_t obj_prop, char *tags) { return pdcgo_prop_set_obj_tags(obj_prop, tags); }

perr_t PDCprop_set_obj_buf(pdcid_t obj_prop, void *buf) { return pdcgo_prop_set_obj_buf(obj_prop, buf); }

/* fill_prop lays a struct pdc_obj_prop out at p with its dims right after
 * it, in the same block. */
static void fill_prop(struct pdc_obj_prop *p, pdcid_t id, size_t ndim, const uint64_t *dims, int type, int part,
                      int cons)
{
    p->obj_prop_id      = id;
    p->ndim             = ndim;
    p->dims             = (uint64_t *)(p + 1);
    p->type             = (pdc_var_type_t)type;
    p->region_partition = (pdc_region_partition_t)part;
    p->consistency      = (pdc_consistency_t)cons;
    if (ndim > 0)
        memcpy(p->dims, dims, ndim * sizeof *dims);
}

struct pdc_obj_prop *PDCobj_prop_get_info(pdcid_t obj_prop)
{
    size_t    ndim = 0;
    uint64_t *dims = NULL;
    int       type = PDC_UNKNOWN, part = 0, cons = 0;
    if (pdcgo_obj_prop_get_info(obj_prop, &ndim, &dims, &type, &part, &cons) != SUCCEED)
        return NULL;
    struct pdc_obj_prop *p = pdcgo_malloc(sizeof *p + ndim * sizeof(uint64_t));
    if (p == NULL) {
        pdcgo_free(dims);
        fprintf(stderr, "libpdc: PDCobj_prop_get_info(%llu): out of memory\n", (unsigned long long)obj_prop);
        return NULL;
    }
    fill_prop(p, obj_prop, ndim, dims, type, part, cons);
    pdcgo_free(dims);
    return p;
}

pdcid_t PDCobj_create(pdcid_t cont_id, const char *obj_name, pdcid_t obj_create_prop)
{
    return pdcgo_obj_create(cont_id, (char *)obj_name, obj_create_prop);
}

pdcid_t PDCobj_open(const char *obj_name, pdcid_t pdc) { return pdcgo_obj_open((char *)obj_name, pdc); }

pdcid_t PDCobj_open_col(const char *obj_name, pdcid_t pdc) { return pdcgo_obj_open_col((char *)obj_name, pdc); }

perr_t PDCobj_close(pdcid_t obj_id) { return pdcgo_obj_close(obj_id); }

perr_t PDCobj_del(pdcid_t obj_id) { return pdcgo_obj_del(obj_id); }

struct pdc_obj_info *PDCobj_get_info(pdcid_t obj)
{
    char     *name = NULL;
    uint64_t  meta_id = 0, *dims = NULL;
    int       server = 0, type = PDC_UNKNOWN, part = 0, cons = 0;
    size_t    ndim = 0;
    uint32_t  pdc_server = 0;
    if (pdcgo_obj_get_info(obj, &name, &meta_id, &server, &pdc_server, &ndim, &dims, &type, &part, &cons) != SUCCEED)
        return NULL;
    size_t               nlen = strlen(name) + 1;
    struct pdc_obj_info *info = pdcgo_malloc(sizeof *info + sizeof(struct pdc_obj_prop) + ndim * sizeof(uint64_t) + nlen);
    if (info == NULL) {
        pdcgo_free(name);
        pdcgo_free(dims);
        fprintf(stderr, "libpdc: PDCobj_get_info(%llu): out of memory\n", (unsigned long long)obj);
        return NULL;
    }
    info->obj_pt = (struct pdc_obj_prop *)(info + 1);
    fill_prop(info->obj_pt, 0, ndim, dims, type, part, cons);
    info->name = (char *)(info->obj_pt->dims + ndim);
    memcpy(info->name, name, nlen);
    info->meta_id            = meta_id;
    info->local_id           = obj;
    info->server_id          = server;
    info->metadata_server_id = pdc_server;
    pdcgo_free(name);
    pdcgo_free(dims);
    return info;
}

perr_t PDCobj_set_dims(pdcid_t obj_id, int ndim, uint64_t *dims) { return pdcgo_obj_set_dims(obj_id, ndim, dims); }

perr_t PDCobj_get_dims(pdcid_t obj_id, int *ndim, uint64_t **dims) { return pdcgo_obj_get_dims(obj_id, ndim, dims); }

perr_t PDCobj_flush_start(pdcid_t obj_id) { return pdcgo_obj_flush_start(obj_id); }

perr_t PDCobj_flush_all_start(void) { return pdcgo_obj_flush_all_start(); }

void **PDCobj_buf_retrieve(pdcid_t obj_id)
{
    static __thread void *slot;
    void                 *buf = NULL;
    if (pdcgo_obj_buf_retrieve(obj_id, &buf) != SUCCEED)
        return NULL;
    slot = buf;
    return &slot;
}

pdcid_t PDCobj_put_data(const char *obj_name, void *data, uint64_t size, pdcid_t cont_id)
{
    return pdcgo_obj_put_data((char *)obj_name, data, size, cont_id);
}

perr_t PDCobj_get_data(pdcid_t obj_id, void *data, uint64_t size) { return pdcgo_obj_get_data(obj_id, data, size); }

pdcid_t PDCregion_create(psize_t ndims, uint64_t *offset, uint64_t *size)
{
    return pdcgo_region_create(ndims, offset, size);
}

perr_t PDCregion_close(pdcid_t region_id) { return pdcgo_region_close(region_id); }

struct pdc_region_info *PDCregion_get_info(pdcid_t reg_id)
{
    size_t    ndim   = 0;
    uint64_t *offset = NULL, *size = NULL;
    if (pdcgo_region_get_info(reg_id, &ndim, &offset, &size) != SUCCEED)
        return NULL;
    struct pdc_region_info *info = pdcgo_malloc(sizeof *info + 2 * ndim * sizeof(uint64_t));
    if (info == NULL) {
        pdcgo_free(offset);
        pdcgo_free(size);
        fprintf(stderr, "libpdc: PDCregion_get_info(%llu): out of memory\n", (unsigned long long)reg_id);
        return NULL;
    }
    memset(info, 0, sizeof *info);
    info->local_id = reg_id;
    info->ndim     = ndim;
    info->offset   = (uint64_t *)(info + 1);
    info->size     = info->offset + ndim;
    memcpy(info->offset, offset, ndim * sizeof(uint64_t));
    memcpy(info->size, size, ndim * sizeof(uint64_t));
    pdcgo_free(offset);
    pdcgo_free(size);
    return info;
}

pdcid_t PDCregion_transfer_create(void *buf, pdc_access_t access_type, pdcid_t obj_id, pdcid_t local_reg,
                                  pdcid_t remote_reg)
{
    return pdcgo_region_transfer_create(buf, (int)access_type, obj_id, local_reg, remote_reg);
}

perr_t PDCregion_transfer_start(pdcid_t transfer_request_id) { return pdcgo_region_transfer_start(transfer_request_id); }

perr_t pdc_region_transfer_now(pdcid_t obj_id, void *buf, pdc_access_t access_type, psize_t ndim, const uint64_t *offset,
                               const uint64_t *size)
{
    return pdcgo_region_transfer_now(obj_id, buf, (int)access_type, ndim, (uint64_t *)offset, (uint64_t *)size);
}

perr_t PDCregion_transfer_start_all(pdcid_t *transfer_request_id, int size)
{
    return pdcgo_region_transfer_start_all(transfer_request_id, size);
}

perr_t PDCregion_transfer_wait(pdcid_t transfer_request_id) { return pdcgo_region_transfer_wait(transfer_request_id); }

perr_t PDCregion_transfer_wait_all(pdcid_t *transfer_request_id, int size)
{
    return pdcgo_region_transfer_wait_all(transfer_request_id, size);
}

perr_t PDCregion_transfer_status(pdcid_t transfer_request_id, pdc_transfer_status_t *completed)
{
    int    status = PDC_TRANSFER_STATUS_NOT_FOUND;
    perr_t rc     = pdcgo_region_transfer_status(transfer_request_id, completed == NULL ? NULL : &status);
    if (rc == SUCCEED)
        *completed = (pdc_transfer_status_t)status;
    return rc;
}

perr_t PDCregion_transfer_close(pdcid_t transfer_request_id) { return pdcgo_region_transfer_close(transfer_request_id); }
