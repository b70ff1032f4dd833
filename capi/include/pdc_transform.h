/*
 * pdc_transform.h - PDC's transforms: functions PDC's servers load from a
 * shared library and run on data as it moves. pdc has no such plug-ins:
 * each function reports the call and fails. The types are PDC's.
 */
#ifndef PDC_TRANSFORM_H
#define PDC_TRANSFORM_H

#include "pdc_public.h"

typedef enum {
    PDC_TESTING       = 0,
    PDC_FILE_IO       = 1,
    PDC_DATA_MAP      = 2,
    PDC_PRE_ANALYSIS  = 4,
    PDC_POST_ANALYSIS = 8
} pdc_obj_transform_t;

typedef enum { DECR_STATE = -100, INCR_STATE = 100, _STATIC_STATE = 0 } pdc_state_next_t;

typedef enum { DATA_IN = 1, DATA_OUT = 2, DATA_RELOCATION = 4 } pdc_data_movement_t;

#ifdef __cplusplus
extern "C" {
#endif

perr_t PDCobj_transform_register(char *func, pdcid_t obj_id, int current_state, int next_state,
                                 pdc_obj_transform_t op_type, pdc_data_movement_t when);
perr_t PDCbuf_map_transform_register(char *func, void *buf, pdcid_t src_region_id, pdcid_t dest_object_id,
                                     pdcid_t dest_region_id, int current_state, int next_state,
                                     pdc_data_movement_t when);

#ifdef __cplusplus
}
#endif

#endif /* PDC_TRANSFORM_H */
