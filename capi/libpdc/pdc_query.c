/*
 * Data queries: the public functions, each calling its Go counterpart in
 * exports_query.go. A pdc_query_t is a C struct holding the handle of the
 * predicate libpdc keeps; C never holds Go memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pdc.h"
#include "_cgo_export.h"

/* wrap returns a new pdc_query_t for handle h (NULL for 0). */
static pdc_query_t *wrap(uint64_t h, pdc_query_t *left, pdc_query_t *right, const char *call)
{
    if (h == 0)
        return NULL;
    pdc_query_t *q = malloc(sizeof *q);
    if (q == NULL) {
        pdcgo_query_free(h);
        fprintf(stderr, "libpdc: %s: out of memory\n", call);
        return NULL;
    }
    q->handle = h;
    q->left   = left;
    q->right  = right;
    return q;
}

static uint64_t handle(pdc_query_t *q) { return q == NULL ? 0 : q->handle; }

pdc_query_t *PDCquery_create(pdcid_t obj_id, pdc_query_op_t op, pdc_var_type_t type, void *value)
{
    return wrap(pdcgo_query_create(obj_id, (int)op, (int)type, value), NULL, NULL, "PDCquery_create");
}

pdc_query_t *PDCquery_and(pdc_query_t *q1, pdc_query_t *q2)
{
    return wrap(pdcgo_query_and(handle(q1), handle(q2)), q1, q2, "PDCquery_and");
}

pdc_query_t *PDCquery_or(pdc_query_t *q1, pdc_query_t *q2)
{
    return wrap(pdcgo_query_or(handle(q1), handle(q2)), q1, q2, "PDCquery_or");
}

perr_t PDCquery_sel_region(pdc_query_t *query, struct pdc_region_info *obj_region)
{
    if (obj_region == NULL)
        return pdcgo_query_sel_region(handle(query), 0, NULL, NULL);
    return pdcgo_query_sel_region(handle(query), obj_region->ndim, obj_region->offset, obj_region->size);
}

perr_t PDCquery_get_nhits(pdc_query_t *query, uint64_t *n) { return pdcgo_query_get_nhits(handle(query), n); }

perr_t PDCquery_get_selection(pdc_query_t *query, pdc_selection_t *sel)
{
    size_t    ndim   = 0;
    uint64_t  nhits  = 0;
    uint64_t *coords = NULL;
    if (sel == NULL) {
        fprintf(stderr, "libpdc: PDCquery_get_selection(query %llu): sel is NULL\n", (unsigned long long)handle(query));
        return FAIL;
    }
    memset(sel, 0, sizeof *sel);
    if (pdcgo_query_get_selection(handle(query), &ndim, &nhits, &coords) != SUCCEED)
        return FAIL;
    sel->query_id     = handle(query);
    sel->ndim         = ndim;
    sel->nhits        = nhits;
    sel->coords       = coords;
    sel->coords_alloc = nhits * ndim;
    return SUCCEED;
}

perr_t PDCquery_get_data(pdcid_t obj_id, pdc_selection_t *sel, void *obj_data)
{
    if (sel == NULL) {
        fprintf(stderr, "libpdc: PDCquery_get_data(obj %llu): sel is NULL\n", (unsigned long long)obj_id);
        return FAIL;
    }
    return pdcgo_query_get_data(obj_id, sel->query_id, sel->ndim, sel->nhits, sel->coords, obj_data);
}

void PDCquery_free(pdc_query_t *query)
{
    if (query == NULL)
        return;
    pdcgo_query_free(query->handle);
    free(query);
}

void PDCquery_free_all(pdc_query_t *query)
{
    if (query == NULL)
        return;
    PDCquery_free_all(query->left);
    PDCquery_free_all(query->right);
    PDCquery_free(query);
}

void PDCselection_free(pdc_selection_t *sel)
{
    if (sel == NULL)
        return;
    free(sel->coords);
    memset(sel, 0, sizeof *sel);
}
