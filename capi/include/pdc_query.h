/*
 * pdc_query.h - the types of data queries (value ranges over object data).
 *
 * Programs include pdc.h; this header exists so that code written for PDC,
 * which includes it by name, compiles unchanged.
 */
#ifndef PDC_QUERY_H
#define PDC_QUERY_H

#include "pdc_public.h"
#include "pdc_region.h"

typedef enum {
    PDC_OP_NONE = 0,
    PDC_GT      = 1,
    PDC_LT      = 2,
    PDC_GTE     = 3,
    PDC_LTE     = 4,
    PDC_EQ      = 5
} pdc_query_op_t;

/*
 * A data query: a handle to a predicate libpdc keeps, over one object.
 * Made by PDCquery_create, _and and _or (malloc'd by libpdc), released by
 * PDCquery_free or _free_all; never copy or change one. handle names the
 * predicate inside libpdc (it is never 0); left and right are the queries
 * an _and or _or was made of (NULL for PDCquery_create's), which
 * PDCquery_free_all frees too. A query belongs to its object's connection:
 * after PDCclose every call on it fails (free it still).
 */
typedef struct pdc_query_t {
    uint64_t            handle;
    struct pdc_query_t *left;
    struct pdc_query_t *right;
} pdc_query_t;

/*
 * What PDCquery_get_selection found: nhits hits, ndim coordinates each
 * (coords[i*ndim + d] is hit i's in dim d), in row-major order. coords is
 * malloc'd (NULL with 0 hits): PDCselection_free frees it; coords_alloc
 * is how many coordinates it holds (nhits * ndim; 0 in a selection made
 * by hand means not known). query_id names the query it came from, for
 * PDCquery_get_data, which refuses nhits * ndim past coords_alloc.
 */
typedef struct pdc_selection_t {
    pdcid_t   query_id;
    size_t    ndim;
    uint64_t  nhits;
    uint64_t *coords;
    uint64_t  coords_alloc;
} pdc_selection_t;

#ifdef __cplusplus
extern "C" {
#endif

/*
 * PDCquery_create: the elements of object obj_id that compare by op with
 * *value, an element of type type, which must be the object's type (a
 * PDC_FLOAT object takes a float). Comparisons happen in that type on the
 * data servers. NULL, after printing why, for an unknown op or type, a
 * NULL value, a type that is not the object's, or a bad obj_id.
 *
 * PDCquery_and, _or: a new query of q1 and q2, which must be over the
 * same object and stay valid and unchanged. It is restricted to their
 * region (PDCquery_sel_region), which must be the same if both have one.
 * A query holds at most 1024 comparisons, ANDs and ORs (the servers'
 * limit; PDCquery_and(q, q) has twice as many as q, plus one).
 *
 * PDCquery_sel_region restricts query to the box obj_region->offset/size
 * (ndim dims, the object's), which must lie inside the object; only
 * ndim, offset and size are read.
 *
 * PDCquery_get_nhits sets *n to the number of elements that satisfy the
 * query; _get_selection fills *sel with their coordinates (each call runs
 * the query, seeing the data as a read would). PDCquery_get_data writes
 * the sel->nhits values into obj_data (elements of the object's type, in
 * the selection's order, elements of obj_id's type). For the queried
 * object the query runs again: it fails if it no longer hits sel->nhits
 * elements. Another object is read at sel->coords: it has ndim dims
 * holding them, and the box spanning the hits must fit in 1 GiB.
 *
 * PDCquery_free releases query (NULL is a no-op); queries made from it
 * stay valid. PDCquery_free_all releases query and the queries it was
 * made of, recursively, each once even if reached twice
 * (PDCquery_and(q, q)). A query it freed must not be used or freed again,
 * so two queries sharing one cannot both be given to it.
 * PDCselection_free frees sel->coords and zeroes *sel.
 */
pdc_query_t *PDCquery_create(pdcid_t obj_id, pdc_query_op_t op, pdc_var_type_t type, void *value);
pdc_query_t *PDCquery_and(pdc_query_t *q1, pdc_query_t *q2);
pdc_query_t *PDCquery_or(pdc_query_t *q1, pdc_query_t *q2);
perr_t PDCquery_sel_region(pdc_query_t *query, struct pdc_region_info *obj_region);
perr_t PDCquery_get_nhits(pdc_query_t *query, uint64_t *n);
perr_t PDCquery_get_selection(pdc_query_t *query, pdc_selection_t *sel);
perr_t PDCquery_get_data(pdcid_t obj_id, pdc_selection_t *sel, void *obj_data);
void PDCquery_free(pdc_query_t *query);
void PDCquery_free_all(pdc_query_t *query);
void PDCselection_free(pdc_selection_t *sel);

/*
 * PDCquery_print prints the query's comparisons and the region it is
 * restricted to; PDCselection_print the number of hits and the first and
 * last ten, PDCselection_print_all every hit (each hit's coordinates in
 * parentheses), to stdout. PDCquery_get_histogram fails with a report:
 * pdc keeps no per-region histograms.
 */
void   PDCquery_print(pdc_query_t *query);
void   PDCselection_print(pdc_selection_t *sel);
void   PDCselection_print_all(pdc_selection_t *sel);
perr_t PDCquery_get_histogram(pdcid_t obj_id);

#ifdef __cplusplus
}
#endif

#endif /* PDC_QUERY_H */
