/*
 * pdc_analysis.h - PDC's analysis functions: iterators over an object's
 * data that feed functions PDC's servers load from a shared library. pdc
 * has no such plug-ins: each function reports the call and fails (0 for
 * an id or a count, -1 for PDCiter_get_nextId). Query data on the servers
 * with pdc_query.h instead.
 */
#ifndef PDC_ANALYSIS_H
#define PDC_ANALYSIS_H

#include "pdc_public.h"

#ifdef __cplusplus
extern "C" {
#endif

pdcid_t PDCobj_data_iter_create(pdcid_t obj_id, pdcid_t reg_id);
pdcid_t PDCobj_data_block_iterator_create(pdcid_t obj_id, pdcid_t reg_id, int contig_blocks);
size_t  PDCobj_data_getSliceCount(pdcid_t iter);
size_t  PDCobj_data_getNextBlock(pdcid_t iter, void **nextBlock, size_t *dims);
perr_t  PDCobj_analysis_register(char *func, pdcid_t iterIn, pdcid_t iterOut);
int     PDCiter_get_nextId(void);

#ifdef __cplusplus
}
#endif

#endif /* PDC_ANALYSIS_H */
