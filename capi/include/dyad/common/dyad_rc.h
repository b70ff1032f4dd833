/*
 * dyad/common/dyad_rc.h - DYAD's return codes, with DYAD's names and
 * values, for programs written against DYAD's headers (see dyad.h).
 * libpdc returns DYAD_RC_OK, DYAD_RC_SYSFAIL, DYAD_RC_NOCTX,
 * DYAD_RC_BADMANAGEDPATH, DYAD_RC_BADBUF, DYAD_RC_BADFIO and
 * DYAD_RC_NOTFOUND; the others exist so that programs naming them compile.
 */
#ifndef DYAD_DTL_DYAD_RC_H
#define DYAD_DTL_DYAD_RC_H

#define DYAD_DLL_EXPORTED
#define DYAD_DLL_HIDDEN
#define DYAD_PFA_ANNOTATE

#ifdef __cplusplus
extern "C" {
#endif

enum dyad_core_return_codes {
    DYAD_RC_OK      = 0,
    DYAD_RC_SYSFAIL = -1,

    DYAD_RC_NOCTX           = -1000,
    DYAD_RC_BADMETADATA     = -1001,
    DYAD_RC_BADFIO          = -1002,
    DYAD_RC_BADMANAGEDPATH  = -1003,
    DYAD_RC_BADDTLMODE      = -1004,
    DYAD_RC_UNTRACKED       = -1005,
    DYAD_RC_BAD_B64DECODE   = -1006,
    DYAD_RC_BAD_COMM_MODE   = -1007,
    DYAD_RC_BAD_CLI_ARG_DEF = -1008,
    DYAD_RC_BAD_CLI_PARSE   = -1009,
    DYAD_RC_BADBUF          = -1010,

    DYAD_RC_FLUXFAIL     = -2000,
    DYAD_RC_BADCOMMIT    = -2001,
    DYAD_RC_NOTFOUND     = -2002,
    DYAD_RC_BADFETCH     = -2003,
    DYAD_RC_BADRPC       = -2004,
    DYAD_RC_BADPACK      = -2005,
    DYAD_RC_BADUNPACK    = -2006,
    DYAD_RC_RPC_FINISHED = -2007,

    DYAD_RC_UCXINIT_FAIL          = -3001,
    DYAD_RC_UCXWAIT_FAIL          = -3002,
    DYAD_RC_UCXEP_FAIL            = -3003,
    DYAD_RC_UCXCOMM_FAIL          = -3004,
    DYAD_RC_UCXMMAP_FAIL          = -3005,
    DYAD_RC_UCXRKEY_PACK_FAILED   = -3006,
    DYAD_RC_UCXRKEY_UNPACK_FAILED = -3007,

    DYAD_RC_MARGOINIT_FAIL = -4001,
};
typedef enum dyad_core_return_codes dyad_rc_t;

#define DYAD_IS_ERROR(code) ((code) < 0)
#define FLUX_IS_ERROR(code) ((code) < 0)

#ifdef __cplusplus
}
#endif

#endif /* DYAD_DTL_DYAD_RC_H */
