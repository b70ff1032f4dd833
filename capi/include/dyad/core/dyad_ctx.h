/*
 * dyad/core/dyad_ctx.h - DYAD's setup and teardown over libpdc (see
 * dyad.h). One context per process, as in DYAD.
 */
#ifndef DYAD_CORE_DYAD_CTX_H
#define DYAD_CORE_DYAD_CTX_H

#include <stdbool.h>

#include <dyad/common/dyad_dtl.h>
#include <dyad/common/dyad_rc.h>
#include <dyad/common/dyad_structures.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dyad_ctx_get is the process's context, or NULL before dyad_init. */
dyad_ctx_t *dyad_ctx_get(void);

/*
 * dyad_init connects to the pdc servers (as PDCinit) with the given
 * managed dirs: prod_managed_path and cons_managed_path, when not NULL or
 * empty, set $PDC_STAGE_PRODUCER_DIR and $PDC_STAGE_CONSUMER_DIR;
 * shared_storage sets $PDC_STAGE_SHARED; dtl_mode_str, when not NULL or
 * empty, sets $DYAD_DTL_MODE. kvs_namespace, when not NULL or empty, sets
 * $DYAD_KVS_NAMESPACE, which is not applied yet (staged paths share one
 * namespace). debug, check, reinit, async_publish, fsync_write, key_depth,
 * key_bins, service_mux, relative_to_managed_path, dtl_comm_mode and
 * flux_handle are accepted and need nothing: every produce is durable
 * before it returns, and paths are always relative to the managed dirs.
 * A second dyad_init without dyad_finalize returns DYAD_RC_OK and keeps the
 * first connection.
 */
dyad_rc_t dyad_init(bool debug, bool check, bool shared_storage, bool reinit, bool async_publish,
                    bool fsync_write, unsigned int key_depth, unsigned int key_bins,
                    unsigned int service_mux, const char *kvs_namespace, const char *prod_managed_path,
                    const char *cons_managed_path, bool relative_to_managed_path,
                    const char *dtl_mode_str, const dyad_dtl_comm_mode_t dtl_comm_mode,
                    void *flux_handle);

/* dyad_init_env is dyad_init with everything from the environment. */
dyad_rc_t dyad_init_env(const dyad_dtl_comm_mode_t dtl_comm_mode, void *flux_handle);

/* dyad_finalize closes the connection; dyad_ctx_get is NULL after it. */
dyad_rc_t dyad_finalize(void);

#ifdef __cplusplus
}
#endif

#endif /* DYAD_CORE_DYAD_CTX_H */
