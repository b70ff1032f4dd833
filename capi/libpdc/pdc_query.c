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
#include "host.h"

/* wrap returns a new pdc_query_t for handle h (NULL for 0). */
static pdc_query_t *wrap(uint64_t h, pdc_query_t *left, pdc_query_t *right, const char *call)
{
    if (h == 0)
        return NULL;
    pdc_query_t *q = pdcgo_malloc(sizeof *q);
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
    return pdcgo_query_get_data(obj_id, sel->query_id, sel->ndim, sel->nhits, sel->coords, sel->coords_alloc, obj_data);
}

void PDCquery_free(pdc_query_t *query)
{
    if (query == NULL)
        return;
    pdcgo_query_free(query->handle);
    pdcgo_free(query);
}

/* qset is a set of queries by address, keeping the order they were added
 * in: an open-addressing table (slot, cap a power of 2, at most half
 * full) and the members (all, n). */
struct qset {
    pdc_query_t **slot;
    size_t        cap;
    pdc_query_t **all;
    size_t        n;
};

static size_t qhash(const pdc_query_t *q, size_t cap)
{
    return (size_t)(((uint64_t)(uintptr_t)q * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

/* qset_add adds q: 1 if it is new, 0 if it was in s, -1 out of memory. */
static int qset_add(struct qset *s, pdc_query_t *q)
{
    if (s->cap > 0) {
        for (size_t h = qhash(q, s->cap); s->slot[h] != NULL; h = (h + 1) & (s->cap - 1))
            if (s->slot[h] == q)
                return 0;
    }
    if (2 * (s->n + 1) > s->cap) {
        size_t        cap  = s->cap > 0 ? 2 * s->cap : 16;
        pdc_query_t **slot = pdcgo_calloc(cap, sizeof *slot);
        pdc_query_t **all  = pdcgo_realloc(s->all, cap / 2 * sizeof *all);
        if (all != NULL)
            s->all = all;
        if (slot == NULL || all == NULL) {
            pdcgo_free(slot);
            return -1;
        }
        for (size_t i = 0; i < s->n; i++) {
            size_t h = qhash(all[i], cap);
            while (slot[h] != NULL)
                h = (h + 1) & (cap - 1);
            slot[h] = all[i];
        }
        pdcgo_free(s->slot);
        s->slot = slot;
        s->cap  = cap;
    }
    size_t h = qhash(q, s->cap);
    while (s->slot[h] != NULL)
        h = (h + 1) & (s->cap - 1);
    s->slot[h]     = q;
    s->all[s->n++] = q;
    return 1;
}

/* PDCquery_free_all frees query and every query it was made of, each once:
 * _and and _or may share one (PDCquery_and(q, q)), so the same query can
 * be reached more than once. The queries are collected first (s.all is
 * also the work list), then freed. */
void PDCquery_free_all(pdc_query_t *query)
{
    if (query == NULL)
        return;
    struct qset s  = {0};
    int         ok = qset_add(&s, query) >= 0;
    for (size_t i = 0; ok && i < s.n; i++) {
        pdc_query_t *q = s.all[i];
        if ((q->left != NULL && qset_add(&s, q->left) < 0) || (q->right != NULL && qset_add(&s, q->right) < 0))
            ok = 0;
    }
    if (ok) {
        for (size_t i = 0; i < s.n; i++)
            PDCquery_free(s.all[i]);
    }
    else {
        /* A leak, never a double free. */
        fprintf(stderr, "libpdc: PDCquery_free_all(query %llu): out of memory: the queries are not freed\n",
                (unsigned long long)query->handle);
    }
    pdcgo_free(s.slot);
    pdcgo_free(s.all);
}

void PDCselection_free(pdc_selection_t *sel)
{
    if (sel == NULL)
        return;
    pdcgo_free(sel->coords);
    memset(sel, 0, sizeof *sel);
}
