/*
 * dyad_cons: a consumer written against DYAD's headers, as DYAD's users
 * write one, started before the producer: it waits for the first of the
 * NFILES files dyad_prod makes with dyad_get_metadata, consumes each by its
 * full path in $DYAD_PATH_CONSUMER, and checks every byte of each; then
 * reads each again through dyad_get_metadata, dyad_get_data and
 * dyad_consume_w_metadata, and checks DYAD's return codes for a missing
 * context and a file never produced.
 *
 * usage: dyad_cons NFILES
 */
#include <dyad/client/dyad_client.h>
#include <dyad/core/dyad_ctx.h>

#include "check.h"

int main(int argc, char **argv)
{
    CHECK(argc == 2, "usage: dyad_cons NFILES");
    int         n   = atoi(argv[1]);
    const char *dir = getenv("DYAD_PATH_CONSUMER");
    CHECK(dir != NULL, "DYAD_PATH_CONSUMER is not set");

    CHECK(dyad_produce(NULL, "x") == DYAD_RC_NOCTX, "dyad_produce without a context");
    CHECK(dyad_ctx_get() == NULL, "a context before dyad_init_env");
    CHECK(dyad_init_env(DYAD_COMM_RECV, NULL) == DYAD_RC_OK, "dyad_init_env failed");
    dyad_ctx_t *ctx = dyad_ctx_get();
    CHECK(ctx != NULL, "no context after dyad_init_env");
    printf("consuming\n");
    fflush(stdout);
    for (int i = 0; i < n; i++) {
        char rel[64], path[4096];
        snprintf(rel, sizeof rel, "dyad/data%d.txt", i);
        snprintf(path, sizeof path, "%s/%s", dir, rel);
        dyad_rc_t rc;
        if (i == 0) {
            /* The producer has not started: this waits for it. */
            dyad_metadata_t *md = NULL;
            rc                  = dyad_get_metadata(ctx, path, true, &md);
            CHECK(rc == DYAD_RC_OK && md != NULL, "dyad_get_metadata(%s, wait) = %d", path, rc);
            CHECK(strcmp(md->fpath, rel) == 0, "metadata path %s, want %s", md->fpath, rel);
            rc = dyad_consume_w_metadata(ctx, path, md);
            CHECK(rc == DYAD_RC_OK, "dyad_consume_w_metadata(%s) = %d", path, rc);
            dyad_free_metadata(&md);
        } else {
            rc = dyad_consume(ctx, path);
            CHECK(rc == DYAD_RC_OK, "dyad_consume(%s) = %d", path, rc);
        }
        check_file(path, rel, 1000 + 4096 * (size_t)i);
        printf("File %d validation: OK\n", i);
    }

    for (int i = 0; i < n; i++) {
        char rel[64], path[4096];
        snprintf(rel, sizeof rel, "dyad/data%d.txt", i);
        snprintf(path, sizeof path, "%s/%s", dir, rel);
        dyad_metadata_t *md = NULL;
        dyad_rc_t        rc = dyad_get_metadata(ctx, path, false, &md);
        CHECK(rc == DYAD_RC_OK && md != NULL, "dyad_get_metadata(%s) = %d", path, rc);
        CHECK(strcmp(md->fpath, rel) == 0, "metadata path %s, want %s", md->fpath, rel);
        char  *data = NULL;
        size_t len  = 0;
        rc          = dyad_get_data(ctx, md, &data, &len);
        CHECK(rc == DYAD_RC_OK, "dyad_get_data(%s) = %d", rel, rc);
        size_t want = 1000 + 4096 * (size_t)i;
        CHECK(len == want, "dyad_get_data(%s): %zu bytes, want %zu", rel, len, want);
        for (size_t j = 0; j < len; j++)
            CHECK((unsigned char)data[j] == pattern(rel, j), "dyad_get_data(%s): byte %zu differs", rel, j);
        free(data);
        rc = dyad_consume_w_metadata(ctx, path, md);
        CHECK(rc == DYAD_RC_OK, "dyad_consume_w_metadata(%s) = %d", path, rc);
        CHECK(dyad_free_metadata(&md) == DYAD_RC_OK && md == NULL, "dyad_free_metadata");
    }

    dyad_metadata_t *md = NULL;
    CHECK(dyad_get_metadata(ctx, "never-produced.txt", false, &md) == DYAD_RC_NOTFOUND && md == NULL,
          "dyad_get_metadata of a file never produced");
    /* Outside the managed dirs: untracked, and consume does nothing. */
    CHECK(dyad_get_metadata(ctx, "/etc/hostname", false, &md) == DYAD_RC_UNTRACKED && md == NULL,
          "dyad_get_metadata of a file outside the managed dirs");
    CHECK(dyad_consume(ctx, "/etc/hostname") == DYAD_RC_OK, "dyad_consume of a file outside the consumer dir");
    CHECK(dyad_finalize() == DYAD_RC_OK, "dyad_finalize failed");
    CHECK(dyad_ctx_get() == NULL, "a context after dyad_finalize");
    printf("consumed %d files\n", n);
    return 0;
}
