/*
 * The public functions of libpdc for object tags and the container and
 * object iterators, defined against the public headers. Each calls its Go
 * counterpart in exports_tags.go.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pdc.h"
#include "_cgo_export.h"
#include "host.h"

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

pdcid_t pdc_obj_open_created(pdcid_t cont_id, uint64_t meta_id, pdcid_t obj_create_prop)
{
    return pdcgo_obj_open_created(cont_id, meta_id, obj_create_prop);
}

/*
 * Iterators. The struct is C memory holding the Go iterator's id (a
 * cursor that holds a page of the listing per server, at its current
 * item): C never holds a Go pointer. iter_next moves the same struct on
 * and returns it; past the last item (or on a failure, which it reports)
 * the Go iterator ends, and iter_next frees the struct and returns NULL.
 */
struct pdc_cont_iter {
    uint64_t id;
};
struct pdc_obj_iter {
    uint64_t id;
};

cont_handle *PDCcont_iter_start(void)
{
    uint64_t id = pdcgo_cont_iter_start();
    if (id == 0)
        return NULL;
    cont_handle *h = pdcgo_malloc(sizeof *h);
    if (h == NULL) {
        pdcgo_iter_end(id);
        fprintf(stderr, "libpdc: PDCcont_iter_start(): out of memory\n");
        return NULL;
    }
    h->id = id;
    return h;
}

pbool_t PDCcont_iter_null(cont_handle *chandle) { return chandle == NULL; }

cont_handle *PDCcont_iter_next(cont_handle *chandle)
{
    if (chandle == NULL)
        return NULL;
    if (pdcgo_iter_next(chandle->id))
        return chandle;
    pdcgo_free(chandle);
    return NULL;
}

struct pdc_cont_info *PDCcont_iter_get_info(cont_handle *chandle)
{
    if (chandle == NULL) {
        fprintf(stderr, "libpdc: PDCcont_iter_get_info(NULL): the iteration is over (PDCcont_iter_null)\n");
        return NULL;
    }
    uint64_t local_id = 0, meta_id = 0;
    char    *name = NULL;
    if (pdcgo_cont_iter_get_info(chandle->id, &local_id, &meta_id, &name) != SUCCEED)
        return NULL;
    struct pdc_cont_info *info = pdcgo_malloc(sizeof *info);
    if (info == NULL) {
        pdcgo_free(name);
        fprintf(stderr, "libpdc: PDCcont_iter_get_info(): out of memory\n");
        return NULL;
    }
    info->name     = name;
    info->local_id = local_id;
    info->meta_id  = meta_id;
    return info;
}

obj_handle *PDCobj_iter_start(pdcid_t cont_id)
{
    uint64_t id = pdcgo_obj_iter_start(cont_id);
    if (id == 0)
        return NULL;
    obj_handle *h = pdcgo_malloc(sizeof *h);
    if (h == NULL) {
        pdcgo_iter_end(id);
        fprintf(stderr, "libpdc: PDCobj_iter_start(cont %llu): out of memory\n", (unsigned long long)cont_id);
        return NULL;
    }
    h->id = id;
    return h;
}

pbool_t PDCobj_iter_null(obj_handle *ohandle) { return ohandle == NULL; }

obj_handle *PDCobj_iter_next(obj_handle *ohandle, pdcid_t cont_id)
{
    (void)cont_id; /* the iterator walks the container iter_start was given */
    if (ohandle == NULL)
        return NULL;
    if (pdcgo_iter_next(ohandle->id))
        return ohandle;
    pdcgo_free(ohandle);
    return NULL;
}

struct pdc_obj_info *PDCobj_iter_get_info(obj_handle *ohandle)
{
    if (ohandle == NULL) {
        fprintf(stderr, "libpdc: PDCobj_iter_get_info(NULL): the iteration is over (PDCobj_iter_null)\n");
        return NULL;
    }
    char     *name    = NULL;
    uint64_t  meta_id = 0, local_id = 0, *dims = NULL;
    int       server = 0, type = PDC_UNKNOWN, part = 0, cons = 0;
    size_t    ndim = 0;
    uint32_t  pdc_server = 0;
    if (pdcgo_obj_iter_get_info(ohandle->id, &name, &meta_id, &local_id, &server, &pdc_server, &ndim, &dims,
                                &type, &part, &cons) != SUCCEED)
        return NULL;
    /* One block, as PDCobj_get_info: info, prop, dims, name. */
    size_t               nlen = strlen(name) + 1;
    struct pdc_obj_info *info = pdcgo_malloc(sizeof *info + sizeof(struct pdc_obj_prop) + ndim * sizeof(uint64_t) + nlen);
    if (info == NULL) {
        pdcgo_free(name);
        pdcgo_free(dims);
        fprintf(stderr, "libpdc: PDCobj_iter_get_info(): out of memory\n");
        return NULL;
    }
    struct pdc_obj_prop *p = (struct pdc_obj_prop *)(info + 1);
    p->obj_prop_id         = 0;
    p->ndim                = ndim;
    p->dims                = (uint64_t *)(p + 1);
    p->type                = (pdc_var_type_t)type;
    p->region_partition    = (pdc_region_partition_t)part;
    p->consistency         = (pdc_consistency_t)cons;
    if (ndim > 0)
        memcpy(p->dims, dims, ndim * sizeof(uint64_t));
    info->obj_pt = p;
    info->name   = (char *)(p->dims + ndim);
    memcpy(info->name, name, nlen);
    info->meta_id            = meta_id;
    info->local_id           = local_id;
    info->server_id          = server;
    info->metadata_server_id = pdc_server;
    pdcgo_free(name);
    pdcgo_free(dims);
    return info;
}

perr_t pdc_obj_tag_names(pdcid_t obj_id, int *n, char **names) { return pdcgo_obj_tag_names(obj_id, n, names); }

perr_t pdc_cont_obj_names(pdcid_t cont_id, int *n, char **names) { return pdcgo_cont_obj_names(cont_id, n, names); }
