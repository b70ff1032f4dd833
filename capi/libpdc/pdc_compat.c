/*
 * The rest of PDC's public API: what programs written for PDC call besides
 * the object, region, query and tag functions. Some are done here in C
 * (printing, overlap of boxes, freeing), buffer mapping and region locks
 * in Go; the rest report, naming the call, that pdc does not implement
 * them (analysis and transform registration, histograms) and fail, so a
 * program that uses one links and fails clearly when it calls it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pdc.h"
#include "pdc_prop_pkg.h"
#include "_cgo_export.h"
#include "host.h"

#define UNIMPLEMENTED(call, why) pdcgo_unimplemented((char *)(call), (char *)(why))

/* PDC prints its timers here when built with PDC_TIMING; pdc keeps none
 * (`pdc status` and the servers' logs show what a cluster did). */
int PDC_timing_report(const char *prefix)
{
    (void)prefix;
    return 0;
}

/* The slot PDCcont_prop_get_info returns: PDC returns its own record,
 * which the caller does not free; this is the calling thread's, and its
 * next call overwrites it (as PDCobj_buf_retrieve's slot). */
static _Thread_local struct _pdc_cont_prop cont_prop_slot;

struct _pdc_cont_prop *PDCcont_prop_get_info(pdcid_t prop_id)
{
    int lifetime = 0;
    if (pdcgo_cont_prop_lifetime(prop_id, &lifetime) != SUCCEED)
        return NULL;
    cont_prop_slot.pdc          = NULL;
    cont_prop_slot.cont_prop_id = prop_id;
    cont_prop_slot.cont_life    = (pdc_lifetime_t)lifetime;
    return &cont_prop_slot;
}

/* PDCregion_free frees a region info's offset and size arrays, as PDC's
 * (not the struct itself). */
void PDCregion_free(struct pdc_region_info *region)
{
    if (region == NULL)
        return;
    pdcgo_free(region->offset);
    pdcgo_free(region->size);
    region->offset = NULL;
    region->size   = NULL;
}

/* PDC_region_overlap_detect: 1 if the boxes overlap, with the overlap in
 * *output_offset and *output_size (malloc'd, ndim each; the caller frees
 * them), else 0 with both NULL; -1 on bad arguments. */
int PDC_region_overlap_detect(int ndim, uint64_t *offset1, uint64_t *size1, uint64_t *offset2, uint64_t *size2,
                              uint64_t **output_offset, uint64_t **output_size)
{
    if (ndim <= 0 || !offset1 || !size1 || !offset2 || !size2 || !output_offset || !output_size) {
        fprintf(stderr, "libpdc: PDC_region_overlap_detect(ndim %d): ndim must be positive and no pointer NULL\n",
                ndim);
        return -1;
    }
    *output_offset = NULL;
    *output_size   = NULL;
    uint64_t lo[ndim], hi[ndim];
    for (int i = 0; i < ndim; i++) {
        lo[i] = offset1[i] > offset2[i] ? offset1[i] : offset2[i];
        uint64_t e1 = offset1[i] + size1[i], e2 = offset2[i] + size2[i];
        hi[i]       = e1 < e2 ? e1 : e2;
        if (hi[i] <= lo[i])
            return 0;
    }
    uint64_t *off = pdcgo_malloc(ndim * sizeof *off), *size = pdcgo_malloc(ndim * sizeof *size);
    if (off == NULL || size == NULL) {
        pdcgo_free(off);
        pdcgo_free(size);
        fprintf(stderr, "libpdc: PDC_region_overlap_detect: out of memory\n");
        return -1;
    }
    for (int i = 0; i < ndim; i++) {
        off[i]  = lo[i];
        size[i] = hi[i] - lo[i];
    }
    *output_offset = off;
    *output_size   = size;
    return 1;
}

/* PDCquery_print prints the query's comparisons and the region it is
 * restricted to, in PDC's layout. */
void PDCquery_print(pdc_query_t *query)
{
    if (query == NULL) {
        fprintf(stderr, "libpdc: PDCquery_print(NULL): query is NULL\n");
        return;
    }
    char     *text = NULL;
    size_t    ndim = 0;
    uint64_t *off = NULL, *size = NULL;
    if (pdcgo_query_text(query->handle, &text, &ndim, &off, &size) != SUCCEED)
        return;
    pdcgo_printf("Value selection: \n%s\n", text);
    if (ndim > 0) {
        pdcgo_printf("Spatial selection: \n  ndim      = %zu\n  start    count\n", ndim);
        for (size_t i = 0; i < ndim; i++)
            pdcgo_printf("  %5" PRIu64 "    %5" PRIu64 "\n", off[i], size[i]);
    }
    pdcgo_printf("\n");
    fflush(stdout);
    pdcgo_free(text);
    pdcgo_free(off);
    pdcgo_free(size);
}

static void print_coords(pdc_selection_t *sel, uint64_t from, uint64_t to)
{
    for (uint64_t i = from; i < to; i++) {
        pdcgo_printf(" ,(");
        for (size_t d = 0; d < sel->ndim; d++)
            pdcgo_printf(d ? ",%" PRIu64 : "%" PRIu64, sel->coords[i * sel->ndim + d]);
        pdcgo_printf(")");
    }
}

/* selection_ok says whether sel's coordinates can be read: nhits * ndim
 * within coords_alloc when that is known. */
static int selection_ok(pdc_selection_t *sel, const char *call)
{
    if (sel == NULL) {
        fprintf(stderr, "libpdc: %s(NULL): sel is NULL\n", call);
        return 0;
    }
    if (sel->nhits > 0 && (sel->coords == NULL || sel->ndim == 0 ||
                           (sel->coords_alloc > 0 && sel->nhits > sel->coords_alloc / sel->ndim))) {
        fprintf(stderr,
                "libpdc: %s: %" PRIu64 " hits of %zu coordinates are more than the selection holds (%" PRIu64
                " coords_alloc, coords %p)\n",
                call, sel->nhits, sel->ndim, sel->coords_alloc, (void *)sel->coords);
        return 0;
    }
    return 1;
}

/* PDCselection_print prints the number of hits and the first and last
 * ten, PDCselection_print_all every hit, each hit's coordinates in
 * parentheses. */
void PDCselection_print(pdc_selection_t *sel)
{
    if (!selection_ok(sel, "PDCselection_print"))
        return;
    pdcgo_printf("== %" PRIu64 " hits, allocated %" PRIu64 " coordinates!\n== Coordinates:\n", sel->nhits,
           sel->coords_alloc);
    if (sel->nhits > 20) {
        print_coords(sel, 0, 10);
        pdcgo_printf(" , ... ");
        print_coords(sel, sel->nhits - 10, sel->nhits);
    }
    else
        print_coords(sel, 0, sel->nhits);
    pdcgo_printf("\n\n");
    fflush(stdout);
}

void PDCselection_print_all(pdc_selection_t *sel)
{
    if (!selection_ok(sel, "PDCselection_print_all"))
        return;
    pdcgo_printf("== %" PRIu64 " hits, allocated %" PRIu64 " coordinates!\n== Coordinates:\n", sel->nhits,
           sel->coords_alloc);
    print_coords(sel, 0, sel->nhits);
    pdcgo_printf("\n\n");
    fflush(stdout);
}

perr_t PDCquery_get_histogram(pdcid_t obj_id)
{
    char call[64];
    snprintf(call, sizeof call, "PDCquery_get_histogram(%" PRIu64 ")", (uint64_t)obj_id);
    return UNIMPLEMENTED(call, "pdc keeps no per-region histograms; a query's hits come from the data servers");
}

/* Analysis (pdc_analysis.h). */
#define NO_ANALYSIS "analysis functions run on PDC's servers from a shared library; pdc has no such plug-ins"

pdcid_t PDCobj_data_iter_create(pdcid_t obj_id, pdcid_t reg_id)
{
    (void)obj_id, (void)reg_id;
    UNIMPLEMENTED("PDCobj_data_iter_create", NO_ANALYSIS);
    return 0;
}

pdcid_t PDCobj_data_block_iterator_create(pdcid_t obj_id, pdcid_t reg_id, int contig_blocks)
{
    (void)obj_id, (void)reg_id, (void)contig_blocks;
    UNIMPLEMENTED("PDCobj_data_block_iterator_create", NO_ANALYSIS);
    return 0;
}

size_t PDCobj_data_getSliceCount(pdcid_t iter)
{
    (void)iter;
    UNIMPLEMENTED("PDCobj_data_getSliceCount", NO_ANALYSIS);
    return 0;
}

size_t PDCobj_data_getNextBlock(pdcid_t iter, void **nextBlock, size_t *dims)
{
    (void)iter, (void)dims;
    if (nextBlock != NULL)
        *nextBlock = NULL;
    UNIMPLEMENTED("PDCobj_data_getNextBlock", NO_ANALYSIS);
    return 0;
}

perr_t PDCobj_analysis_register(char *func, pdcid_t iterIn, pdcid_t iterOut)
{
    (void)func, (void)iterIn, (void)iterOut;
    return UNIMPLEMENTED("PDCobj_analysis_register", NO_ANALYSIS);
}

int PDCiter_get_nextId(void)
{
    UNIMPLEMENTED("PDCiter_get_nextId", NO_ANALYSIS);
    return -1;
}

/* Transforms (pdc_transform.h). */
#define NO_TRANSFORMS "transforms run on PDC's servers from a shared library; pdc has no such plug-ins"

perr_t PDCobj_transform_register(char *func, pdcid_t obj_id, int current_state, int next_state,
                                 pdc_obj_transform_t op_type, pdc_data_movement_t when)
{
    (void)func, (void)obj_id, (void)current_state, (void)next_state, (void)op_type, (void)when;
    return UNIMPLEMENTED("PDCobj_transform_register", NO_TRANSFORMS);
}

perr_t PDCbuf_map_transform_register(char *func, void *buf, pdcid_t src_region_id, pdcid_t dest_object_id,
                                     pdcid_t dest_region_id, int current_state, int next_state,
                                     pdc_data_movement_t when)
{
    (void)func, (void)buf, (void)src_region_id, (void)dest_object_id, (void)dest_region_id;
    (void)current_state, (void)next_state, (void)when;
    return UNIMPLEMENTED("PDCbuf_map_transform_register", NO_TRANSFORMS);
}

/* Buffer mapping and region locks (pdc_region.h): PDC's older I/O path,
 * done with region transfers (capi/bufmap.go). */
perr_t PDCbuf_obj_map(void *buf, pdc_var_type_t local_type, pdcid_t local_reg, pdcid_t remote_obj,
                      pdcid_t remote_reg)
{
    return pdcgo_buf_obj_map(buf, (int)local_type, local_reg, remote_obj, remote_reg);
}

perr_t PDCbuf_obj_unmap(pdcid_t remote_obj_id, pdcid_t remote_reg_id)
{
    return pdcgo_buf_obj_unmap(remote_obj_id, remote_reg_id);
}

perr_t PDCreg_obtain_lock(pdcid_t obj_id, pdcid_t reg_id, pdc_access_t access_type, pdc_lock_mode_t lock_mode)
{
    return pdcgo_reg_obtain_lock(obj_id, reg_id, (int)access_type, (int)lock_mode);
}

perr_t PDCreg_release_lock(pdcid_t obj_id, pdcid_t reg_id, pdc_access_t access_type)
{
    return pdcgo_reg_release_lock(obj_id, reg_id, (int)access_type);
}
