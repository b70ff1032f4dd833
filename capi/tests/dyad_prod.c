/*
 * dyad_prod: a producer written against DYAD's headers, as DYAD's users
 * write one: it writes NFILES files of distinct sizes in $DYAD_PATH_PRODUCER
 * and produces each by its full path once it is closed.
 *
 * usage: dyad_prod NFILES
 */
#include <dyad/client/dyad_client.h>
#include <dyad/core/dyad_ctx.h>

#include "check.h"

int main(int argc, char **argv)
{
    CHECK(argc == 2, "usage: dyad_prod NFILES");
    int         n   = atoi(argv[1]);
    const char *dir = getenv("DYAD_PATH_PRODUCER");
    CHECK(dir != NULL, "DYAD_PATH_PRODUCER is not set");

    CHECK(dyad_init_env(DYAD_COMM_SEND, NULL) == DYAD_RC_OK, "dyad_init_env failed");
    dyad_ctx_t *ctx = dyad_ctx_get();
    CHECK(ctx != NULL, "no context after dyad_init_env");
    for (int i = 0; i < n; i++) {
        char rel[64], path[4096];
        snprintf(rel, sizeof rel, "dyad/data%d.txt", i);
        snprintf(path, sizeof path, "%s/%s", dir, rel);
        write_file(path, rel, 1000 + 4096 * (size_t)i);
        dyad_rc_t rc = dyad_produce(ctx, path);
        CHECK(rc == DYAD_RC_OK, "dyad_produce(%s) = %d", path, rc);
    }
    /* A file outside the producer dir is not DYAD's: ignored, with OK and
     * no report, as DYAD does, so programs may call it on every file. */
    CHECK(dyad_produce(ctx, "/etc/hostname") == DYAD_RC_OK, "dyad_produce of a file outside the producer dir");
    CHECK(dyad_finalize() == DYAD_RC_OK, "dyad_finalize failed");
    CHECK(dyad_ctx_get() == NULL, "a context after dyad_finalize");
    printf("produced %d files\n", n);
    return 0;
}
