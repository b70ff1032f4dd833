/*
 * dyad/common/dyad_dtl.h - DYAD's transport modes and directions (see
 * dyad.h). The direction a program passes to dyad_init is accepted and
 * not needed: every libpdc connection can both produce and consume.
 */
#ifndef DYAD_COMMON_DYAD_DTL_H
#define DYAD_COMMON_DYAD_DTL_H

#ifdef __cplusplus
extern "C" {
#endif

enum dyad_dtl_mode {
    DYAD_DTL_UCX      = 0,
    DYAD_DTL_MARGO    = 1,
    DYAD_DTL_FLUX_RPC = 2,
    DYAD_DTL_DEFAULT  = 2,
    DYAD_DTL_END      = 3
};
typedef enum dyad_dtl_mode dyad_dtl_mode_t;

enum dyad_dtl_comm_mode {
    DYAD_COMM_NONE = 0,
    DYAD_COMM_RECV = 1,
    DYAD_COMM_SEND = 2,
    DYAD_COMM_END  = 3
};
typedef enum dyad_dtl_comm_mode dyad_dtl_comm_mode_t;

#ifdef __cplusplus
}
#endif

#endif /* DYAD_COMMON_DYAD_DTL_H */
