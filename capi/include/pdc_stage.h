/*
 * pdc_stage.h - file staging: a producer task writes a file, a consumer task
 * on another node waits for it and gets it moved to its node. This is
 * DYAD's producer/consumer API over pdc servers.
 *
 * Setup, per task, in the environment (DYAD's variables in brackets):
 *
 *   PDC_STAGE_PRODUCER_DIR  [DYAD_PATH_PRODUCER]   where producers write files
 *   PDC_STAGE_CONSUMER_DIR  [DYAD_PATH_CONSUMER]   where consumed files appear
 *   PDC_STAGE_SHARED        [DYAD_SHARED_STORAGE]  1: producer dirs are on storage
 *                                                  every node sees; link or copy
 *                                                  instead of fetching
 *   PDC_STAGE_NAMESPACE     [DYAD_KVS_NAMESPACE]   the run's namespace: files
 *                                                  produced in one are consumed
 *                                                  in it only, so a re-run with
 *                                                  the same names waits for its
 *                                                  own files (default: the
 *                                                  default namespace)
 *   PDC_HOST                                       this node's name, as the pdc
 *                                                  servers know it (default the
 *                                                  kernel's host name)
 *
 * On every node that produces, one pdc server serves that node's producer
 * dir: `pdc server --stage-producer-dir DIR` (or `pdc up ...
 * --stage-producer-dir DIR`). Paths are relative to the producer or
 * consumer dir, or absolute inside it; a file keeps its relative path from
 * one dir to the other.
 *
 * The pdc argument is a connection from PDCinit (where DYAD takes the
 * dyad_ctx_t from dyad_init). Every function is safe to call from any
 * thread. A failing call returns -1 and prints one line to stderr naming
 * the call, the path and the reason; it never aborts the process.
 */
#ifndef PDC_STAGE_H
#define PDC_STAGE_H

#include "pdc_public.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * pdc_stage_produce records a file the caller has written and closed in its
 * producer dir, so that consumers anywhere can get it.
 *
 * As dyad_produce(ctx, fname): call it once the file is complete; it does
 * not copy the file, which stays where it is and is served from there by
 * this node's server.
 *
 * Unlike dyad_produce:
 *  - its size and a CRC-32C of its contents are recorded, and every consumer
 *    checks its copy against them: a file changed after produce is an error
 *    on the consumer, never silently different bytes;
 *  - each produce of a path makes a new version, which consumers holding an
 *    older copy fetch again;
 *  - empty files are valid files;
 *  - a path outside the producer dir, a missing file or a directory is an
 *    error that says so, where dyad_produce ignores a path outside its
 *    managed dir and returns success;
 *  - the record is durable on the metadata server before the call returns.
 *
 * Returns 0, or -1 on failure.
 */
int pdc_stage_produce(pdcid_t pdc, const char *path);

/*
 * pdc_stage_consume waits until path has been produced (by any task, on any
 * node), then makes it available at the same relative path in the consumer
 * dir, and returns once the copy there is complete and verified.
 *
 * As dyad_consume(ctx, fname): the caller then opens the file in its
 * consumer dir as any other; it blocks until the producer has produced it.
 *
 * Unlike dyad_consume:
 *  - the wait is bounded: timeout_seconds > 0 is how long to wait, in all,
 *    for the produce and the move (INFINITY: no limit, as dyad_consume);
 *    0 means the connection's default, $PDC_TIMEOUT (default 30 s), as for
 *    every other call; a negative or NaN timeout fails at once. When the
 *    time is up, the call fails, saying whether the file was never produced
 *    or the move did not finish;
 *  - the copy is checked against the CRC-32C recorded at produce before it
 *    is put in place, written to a temporary file and renamed, so the
 *    consumer dir never holds a partial or wrong file under the name;
 *  - the wait is a notification from the metadata server, not polling;
 *  - a copy already holding the current version is not moved again, and
 *    consumers of one file on one node move it once between them;
 *  - a file produced on this node (or, with PDC_STAGE_SHARED, on shared
 *    storage) is reflinked or copied on the node instead of fetched, and
 *    hard-linked only with PDC_STAGE_LINK=1 (then never write to it: it
 *    is the producer's own file);
 *  - empty files are valid files.
 *
 * Returns 0, or -1 on failure.
 */
int pdc_stage_consume(pdcid_t pdc, const char *path, double timeout_seconds);

/*
 * pdc_stage_consume_local is pdc_stage_consume that also says where the
 * file is: on success *local_path is its absolute path in the consumer dir,
 * a string allocated with malloc that the caller frees with free(). On
 * failure *local_path is NULL. local_path must not be NULL.
 *
 * Returns 0, or -1 on failure.
 */
int pdc_stage_consume_local(pdcid_t pdc, const char *path, double timeout_seconds, char **local_path);

/*
 * pdc_stage_consume_newer is pdc_stage_consume that waits for a version of
 * path newer than version, even if that version (or an older one) has
 * been produced: a consumer that has version V waits for the next produce.
 * Where the path's record was removed (pdc stage rm), the versions count
 * from 1 again and its next produce ends the wait. version 0 is
 * pdc_stage_consume.
 *
 * Returns 0, or -1 on failure.
 */
int pdc_stage_consume_newer(pdcid_t pdc, const char *path, uint64_t version, double timeout_seconds);

#ifdef __cplusplus
}
#endif

#endif /* PDC_STAGE_H */
