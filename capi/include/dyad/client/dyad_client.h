/*
 * dyad/client/dyad_client.h - DYAD's produce and consume over libpdc's
 * staging (pdc_stage.h, which says how each differs from DYAD's: bounded
 * waits, checksums, versions). See dyad.h.
 */
#ifndef DYAD_CORE_DYAD_CORE_H
#define DYAD_CORE_DYAD_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dyad/common/dyad_rc.h>
#include <dyad/common/dyad_structures.h>
#include <dyad/core/dyad_ctx.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dyad_metadata_t is where a produced file is: its path relative to the
 * managed dirs and the rank of the pdc server that owns it. */
struct dyad_metadata {
    char    *fpath;
    uint32_t owner_rank;
};
typedef struct dyad_metadata dyad_metadata_t;

/* dyad_produce is pdc_stage_produce. As in DYAD, an absolute path outside
 * the producer dir is ignored (DYAD_RC_OK, nothing produced), and so is
 * one outside the consumer dir given to the consume calls; a relative path
 * is relative to the managed dir (DYAD's is relative to the working
 * directory). */
dyad_rc_t dyad_produce(dyad_ctx_t *ctx, const char *fname);

/* dyad_get_metadata looks fname up; with should_wait it waits until it has
 * been produced, up to $PDC_TIMEOUT. *mdata is freed with
 * dyad_free_metadata. DYAD_RC_NOTFOUND if it has not been produced (in
 * time); DYAD_RC_UNTRACKED, as DYAD's, for an absolute path outside both
 * managed dirs. */
dyad_rc_t dyad_get_metadata(dyad_ctx_t *ctx, const char *fname, bool should_wait, dyad_metadata_t **mdata);

/* dyad_free_metadata frees *mdata and sets it to NULL. */
dyad_rc_t dyad_free_metadata(dyad_metadata_t **mdata);

/* dyad_consume is pdc_stage_consume with the connection's timeout,
 * $PDC_TIMEOUT (inf: no limit, as DYAD). */
dyad_rc_t dyad_consume(dyad_ctx_t *ctx, const char *fname);

/* dyad_consume_w_metadata is dyad_consume: the record is looked up again,
 * so a newer version produced since mdata was taken is the one placed. */
dyad_rc_t dyad_consume_w_metadata(dyad_ctx_t *ctx, const char *fname, const dyad_metadata_t *mdata);

/* dyad_get_data consumes mdata's file and reads it into memory: *file_data
 * is a buffer allocated with malloc (free it with free()) of *file_len
 * bytes. Unlike DYAD's, the file is also left in the consumer dir. */
dyad_rc_t dyad_get_data(const dyad_ctx_t *ctx, const dyad_metadata_t *mdata, char **file_data, size_t *file_len);

#ifdef __cplusplus
}
#endif

#endif /* DYAD_CORE_DYAD_CORE_H */
