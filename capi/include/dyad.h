/*
 * dyad.h - DYAD's C API over libpdc's staging, so that programs written
 * against DYAD's headers (<dyad/client/dyad_client.h>,
 * <dyad/core/dyad_ctx.h>, ...) build and run unchanged against libpdc:
 * cc prog.c $(pkg-config --cflags --libs pdc). This header includes them
 * all.
 *
 * Environment (read at dyad_init_env and dyad_init; ours win where both
 * are set):
 *
 *   DYAD_PATH_PRODUCER   as PDC_STAGE_PRODUCER_DIR
 *   DYAD_PATH_CONSUMER   as PDC_STAGE_CONSUMER_DIR
 *   DYAD_SHARED_STORAGE  as PDC_STAGE_SHARED
 *   DYAD_DTL_MODE        as PDC_DTL: FLUX_RPC is stream, UCX and MARGO are
 *                        pull; our mode names are accepted too
 *   DYAD_FSYNC_WRITE,    accepted; every produce is durable before it
 *   DYAD_ASYNC_PUBLISH   returns, so neither changes anything
 *   DYAD_KVS_NAMESPACE   as PDC_STAGE_NAMESPACE: the run's namespace of
 *                        staged paths (dyad_init's kvs_namespace too)
 *
 * PDC_TMPDIR, PDC_HOST and PDC_TIMEOUT work as for PDCinit. A DYAD call
 * that fails prints one line to stderr naming the call, the path and the
 * reason, and returns a negative dyad_rc_t.
 */
#ifndef PDC_DYAD_H
#define PDC_DYAD_H

#include <dyad/client/dyad_client.h>
#include <dyad/common/dyad_dtl.h>
#include <dyad/common/dyad_envs.h>
#include <dyad/common/dyad_rc.h>
#include <dyad/common/dyad_structures.h>
#include <dyad/core/dyad_ctx.h>

#endif /* PDC_DYAD_H */
