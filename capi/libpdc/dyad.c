/*
 * DYAD's C API (dyad.h) over libpdc's staging: the context is one pdc
 * connection, and each call is the pdc_stage_* call it corresponds to.
 */
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dyad.h"
#include "pdc.h"
#include "_cgo_export.h"
#include "host.h"

struct dyad_ctx {
    pdcid_t pdc;
};

/* The context is per process, as DYAD's; the lock orders init and
 * finalize against each other. Calls in between only read ctx.pdc, which
 * libpdc checks: a finalized connection fails cleanly. */
static pthread_mutex_t  dyad_lock = PTHREAD_MUTEX_INITIALIZER;
static struct dyad_ctx  dyad_the_ctx;
static struct dyad_ctx *dyad_current;

dyad_ctx_t *dyad_ctx_get(void)
{
    pthread_mutex_lock(&dyad_lock);
    dyad_ctx_t *ctx = dyad_current;
    pthread_mutex_unlock(&dyad_lock);
    return ctx;
}

static dyad_rc_t dyad_connect(void)
{
    dyad_rc_t rc = DYAD_RC_OK;
    pthread_mutex_lock(&dyad_lock);
    if (dyad_current == NULL) {
        pdcid_t pdc = PDCinit("dyad");
        if (pdc == 0)
            rc = DYAD_RC_NOCTX; /* PDCinit said why */
        else {
            dyad_the_ctx.pdc = pdc;
            dyad_current     = &dyad_the_ctx;
        }
    }
    pthread_mutex_unlock(&dyad_lock);
    return rc;
}

/* dyad_setenv sets name to value unless value is NULL or empty. */
static void dyad_setenv(const char *name, const char *value)
{
    if (value != NULL && value[0] != '\0')
        setenv(name, value, 1);
}

dyad_rc_t dyad_init(bool debug, bool check, bool shared_storage, bool reinit, bool async_publish,
                    bool fsync_write, unsigned int key_depth, unsigned int key_bins,
                    unsigned int service_mux, const char *kvs_namespace, const char *prod_managed_path,
                    const char *cons_managed_path, bool relative_to_managed_path,
                    const char *dtl_mode_str, const dyad_dtl_comm_mode_t dtl_comm_mode,
                    void *flux_handle)
{
    (void)debug, (void)check, (void)reinit, (void)async_publish, (void)fsync_write;
    (void)key_depth, (void)key_bins, (void)service_mux, (void)relative_to_managed_path;
    (void)dtl_comm_mode, (void)flux_handle;
    /* The arguments reach the connection through the environment, where
     * libpdc reads its settings, so that they mean what the variables do. */
    dyad_setenv("PDC_STAGE_PRODUCER_DIR", prod_managed_path);
    dyad_setenv("PDC_STAGE_CONSUMER_DIR", cons_managed_path);
    if (shared_storage)
        setenv("PDC_STAGE_SHARED", "1", 1);
    dyad_setenv("DYAD_DTL_MODE", dtl_mode_str);
    dyad_setenv("DYAD_KVS_NAMESPACE", kvs_namespace);
    return dyad_connect();
}

dyad_rc_t dyad_init_env(const dyad_dtl_comm_mode_t dtl_comm_mode, void *flux_handle)
{
    (void)dtl_comm_mode, (void)flux_handle;
    return dyad_connect();
}

dyad_rc_t dyad_finalize(void)
{
    pthread_mutex_lock(&dyad_lock);
    dyad_ctx_t *ctx = dyad_current;
    dyad_current    = NULL;
    pthread_mutex_unlock(&dyad_lock);
    if (ctx != NULL && PDCclose(ctx->pdc) != SUCCEED)
        return DYAD_RC_SYSFAIL;
    return DYAD_RC_OK;
}

/* dyad_bad reports a call refused before it reached libpdc, in libpdc's
 * one-line form. */
static dyad_rc_t dyad_bad(dyad_rc_t rc, const char *call, const char *fname, const char *why)
{
    fprintf(stderr, "libpdc: %s(\"%s\"): %s\n", call, fname != NULL ? fname : "(null)", why);
    return rc;
}

static const char *no_ctx = "no DYAD context: call dyad_init or dyad_init_env first";

/* under says whether path is dir or inside it, comparing as written and
 * with dir's symbolic links resolved. */
static bool under(const char *path, const char *dir)
{
    char   real[PATH_MAX];
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    if (strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0'))
        return true;
    if (realpath(dir, real) == NULL)
        return false;
    n = strlen(real);
    return strncmp(path, real, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

/* untracked says whether fname is an absolute path outside the managed
 * dir (the producer's, or the consumer's): DYAD ignores such a file
 * (produce and consume do nothing and succeed; get_metadata says
 * DYAD_RC_UNTRACKED), so programs call it on every file they write or
 * read. A relative path is relative to the managed dir, as in pdc_stage.h. */
static const char *managed_dir(bool producer)
{
    const char *dir = pdcgo_getenv(producer ? "PDC_STAGE_PRODUCER_DIR" : "PDC_STAGE_CONSUMER_DIR");
    if (dir == NULL || dir[0] == '\0')
        dir = pdcgo_getenv(producer ? "DYAD_PATH_PRODUCER" : "DYAD_PATH_CONSUMER");
    return dir != NULL && dir[0] != '\0' ? dir : NULL;
}

static bool untracked(const char *fname, bool producer)
{
    const char *dir = managed_dir(producer);
    return fname[0] == '/' && dir != NULL && !under(fname, dir);
}

/* untracked_by_all: outside every managed dir this process has. */
static bool untracked_by_all(const char *fname)
{
    const char *p = managed_dir(true), *c = managed_dir(false);
    return fname[0] == '/' && (p != NULL || c != NULL) && (p == NULL || !under(fname, p)) &&
           (c == NULL || !under(fname, c));
}

dyad_rc_t dyad_produce(dyad_ctx_t *ctx, const char *fname)
{
    if (ctx == NULL)
        return dyad_bad(DYAD_RC_NOCTX, "dyad_produce", fname, no_ctx);
    if (fname == NULL)
        return dyad_bad(DYAD_RC_BADBUF, "dyad_produce", fname, "fname is NULL");
    if (untracked(fname, true))
        return DYAD_RC_OK;
    return pdc_stage_produce(ctx->pdc, fname) == 0 ? DYAD_RC_OK : DYAD_RC_SYSFAIL;
}

dyad_rc_t dyad_consume(dyad_ctx_t *ctx, const char *fname)
{
    if (ctx == NULL)
        return dyad_bad(DYAD_RC_NOCTX, "dyad_consume", fname, no_ctx);
    if (fname == NULL)
        return dyad_bad(DYAD_RC_BADBUF, "dyad_consume", fname, "fname is NULL");
    if (untracked(fname, false))
        return DYAD_RC_OK;
    return pdc_stage_consume(ctx->pdc, fname, 0) == 0 ? DYAD_RC_OK : DYAD_RC_SYSFAIL;
}

dyad_rc_t dyad_consume_w_metadata(dyad_ctx_t *ctx, const char *fname, const dyad_metadata_t *mdata)
{
    (void)mdata;
    return dyad_consume(ctx, fname);
}

dyad_rc_t dyad_get_metadata(dyad_ctx_t *ctx, const char *fname, bool should_wait, dyad_metadata_t **mdata)
{
    if (ctx == NULL)
        return dyad_bad(DYAD_RC_NOCTX, "dyad_get_metadata", fname, no_ctx);
    if (fname == NULL || mdata == NULL)
        return dyad_bad(DYAD_RC_BADBUF, "dyad_get_metadata", fname, "fname or mdata is NULL");
    *mdata = NULL;
    if (untracked_by_all(fname))
        return DYAD_RC_UNTRACKED;
    dyad_metadata_t *m = pdcgo_calloc(1, sizeof *m);
    if (m == NULL)
        return dyad_bad(DYAD_RC_SYSFAIL, "dyad_get_metadata", fname, "out of memory");
    if (pdcgo_stage_lookup(ctx->pdc, (char *)fname, should_wait, &m->fpath, &m->owner_rank) != 0) {
        pdcgo_free(m);
        return DYAD_RC_NOTFOUND;
    }
    *mdata = m;
    return DYAD_RC_OK;
}

dyad_rc_t dyad_free_metadata(dyad_metadata_t **mdata)
{
    if (mdata == NULL || *mdata == NULL)
        return DYAD_RC_OK;
    pdcgo_free((*mdata)->fpath);
    pdcgo_free(*mdata);
    *mdata = NULL;
    return DYAD_RC_OK;
}

dyad_rc_t dyad_get_data(const dyad_ctx_t *ctx, const dyad_metadata_t *mdata, char **file_data, size_t *file_len)
{
    const char *fname = mdata != NULL ? mdata->fpath : NULL;
    if (ctx == NULL)
        return dyad_bad(DYAD_RC_NOCTX, "dyad_get_data", fname, no_ctx);
    if (fname == NULL || file_data == NULL || file_len == NULL)
        return dyad_bad(DYAD_RC_BADBUF, "dyad_get_data", fname, "mdata, its fpath, file_data or file_len is NULL");
    *file_data = NULL;
    *file_len  = 0;
    char *local = NULL;
    if (pdc_stage_consume_local(ctx->pdc, fname, 0, &local) != 0)
        return DYAD_RC_SYSFAIL;
    dyad_rc_t rc = DYAD_RC_BADFIO;
    FILE     *f  = fopen(local, "rb");
    if (f == NULL) {
        dyad_bad(rc, "dyad_get_data", fname, "cannot open the consumed copy");
        goto out;
    }
    if (fseek(f, 0, SEEK_END) != 0) {
        dyad_bad(rc, "dyad_get_data", fname, "cannot seek in the consumed copy");
        goto close;
    }
    long size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        dyad_bad(rc, "dyad_get_data", fname, "cannot size the consumed copy");
        goto close;
    }
    /* One byte more, so that an empty file is a buffer too. */
    char *buf = pdcgo_malloc((size_t)size + 1);
    if (buf == NULL) {
        rc = dyad_bad(DYAD_RC_SYSFAIL, "dyad_get_data", fname, "out of memory");
        goto close;
    }
    if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        pdcgo_free(buf);
        dyad_bad(rc, "dyad_get_data", fname, "short read of the consumed copy");
        goto close;
    }
    *file_data = buf;
    *file_len  = (size_t)size;
    rc         = DYAD_RC_OK;
close:
    fclose(f);
out:
    pdcgo_free(local);
    return rc;
}
