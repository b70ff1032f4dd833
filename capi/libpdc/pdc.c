/*
 * The public functions of libpdc, defined against the public headers so
 * that the compiler checks every definition against its prototype. Each
 * calls its Go counterpart in exports.go.
 */
#include <stdio.h>
#include <stdlib.h>

#include "pdc.h"
#include "_cgo_export.h"
#include "host.h"

pdcid_t PDCinit(const char *pdc_name) { return pdcgo_init((char *)pdc_name); }

perr_t PDCclose(pdcid_t pdc) { return pdcgo_close(pdc); }

size_t pdc_last_error(char *buf, size_t len) { return pdcgo_last_error(buf, len); }

void pdc_report_errors(int on) { pdcgo_report_errors(on); }

pdcid_t PDCprop_create(pdc_prop_type_t type, pdcid_t pdc) { return pdcgo_prop_create((int)type, pdc); }

perr_t PDCprop_close(pdcid_t prop) { return pdcgo_prop_close(prop); }

perr_t PDCprop_set_cont_lifetime(pdcid_t cont_prop, pdc_lifetime_t lifetime)
{
    return pdcgo_prop_set_cont_lifetime(cont_prop, (int)lifetime);
}

pdcid_t PDCcont_create(const char *cont_name, pdcid_t cont_prop)
{
    return pdcgo_cont_create((char *)cont_name, cont_prop);
}

pdcid_t PDCcont_create_col(const char *cont_name, pdcid_t cont_prop)
{
    return pdcgo_cont_create_col((char *)cont_name, cont_prop);
}

pdcid_t PDCcont_open(const char *cont_name, pdcid_t pdc) { return pdcgo_cont_open((char *)cont_name, pdc); }

pdcid_t PDCcont_open_col(const char *cont_name, pdcid_t pdc)
{
    return pdcgo_cont_open_col((char *)cont_name, pdc);
}

pdcid_t PDCcont_get_id(const char *cont_name, pdcid_t pdc) { return pdcgo_cont_get_id((char *)cont_name, pdc); }

struct pdc_cont_info *PDCcont_get_info(const char *cont_name)
{
    uint64_t local_id = 0, meta_id = 0;
    char    *name = NULL;
    if (pdcgo_cont_get_info((char *)cont_name, &local_id, &meta_id, &name) != SUCCEED)
        return NULL;
    struct pdc_cont_info *info = pdcgo_malloc(sizeof *info);
    if (info == NULL) {
        pdcgo_free(name);
        fprintf(stderr, "libpdc: PDCcont_get_info(\"%s\"): out of memory\n", cont_name);
        return NULL;
    }
    info->name     = name;
    info->local_id = local_id;
    info->meta_id  = meta_id;
    return info;
}

perr_t PDCcont_persist(pdcid_t cont) { return pdcgo_cont_persist(cont); }

perr_t PDCcont_del(pdcid_t cont) { return pdcgo_cont_del(cont); }

perr_t PDCcont_close(pdcid_t cont) { return pdcgo_cont_close(cont); }

perr_t PDCcont_put_tag(pdcid_t cont, const char *tag_name, const void *tag_value, pdc_var_type_t value_type,
                       psize_t value_size)
{
    return pdcgo_cont_put_tag(cont, (char *)tag_name, (void *)tag_value, (int)value_type, value_size);
}

perr_t PDCcont_get_tag(pdcid_t cont, const char *tag_name, void **tag_value, pdc_var_type_t *value_type,
                       psize_t *value_size)
{
    int    type = PDC_UNKNOWN;
    perr_t rc   = pdcgo_cont_get_tag(cont, (char *)tag_name, tag_value, &type, value_size);
    if (rc == SUCCEED && value_type != NULL)
        *value_type = (pdc_var_type_t)type;
    return rc;
}

perr_t PDCcont_del_tag(pdcid_t cont, const char *tag_name) { return pdcgo_cont_del_tag(cont, (char *)tag_name); }

perr_t PDCcont_put_objids(pdcid_t cont_id, int nobj, pdcid_t *obj_ids)
{
    return pdcgo_cont_put_objids(cont_id, nobj, obj_ids);
}

perr_t PDCcont_get_objids(pdcid_t cont_id, int *nobj, pdcid_t **obj_ids)
{
    return pdcgo_cont_get_objids(cont_id, nobj, obj_ids);
}

perr_t PDCcont_del_objids(pdcid_t cont_id, int nobj, pdcid_t *obj_ids)
{
    return pdcgo_cont_del_objids(cont_id, nobj, obj_ids);
}

int pdc_stage_produce(pdcid_t pdc, const char *path) { return pdcgo_stage_produce(pdc, (char *)path); }

int pdc_stage_consume(pdcid_t pdc, const char *path, double timeout_seconds)
{
    return pdcgo_stage_consume(pdc, (char *)path, timeout_seconds);
}

int pdc_stage_consume_newer(pdcid_t pdc, const char *path, uint64_t version, double timeout_seconds)
{
    return pdcgo_stage_consume_newer(pdc, (char *)path, version, timeout_seconds);
}

int pdc_stage_consume_local(pdcid_t pdc, const char *path, double timeout_seconds, char **local_path)
{
    return pdcgo_stage_consume_local(pdc, (char *)path, timeout_seconds, local_path);
}
