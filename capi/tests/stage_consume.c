/*
 * stage_consume: a consumer task, as a DYAD user writes one. It waits for
 * PATH to be produced (up to TIMEOUT seconds), checks the copy in its
 * consumer dir ($PDC_STAGE_CONSUMER_DIR) byte by byte, and consumes it again
 * (a copy already current is not moved).
 *
 * usage: stage_consume PATH SIZE TIMEOUT
 */
#include <limits.h>

#include "check.h"
#include "pdc.h"

int main(int argc, char **argv)
{
    CHECK(argc == 4, "usage: stage_consume PATH SIZE TIMEOUT");
    const char *rel     = argv[1];
    size_t      size    = strtoull(argv[2], NULL, 10);
    double      timeout = strtod(argv[3], NULL);
    const char *dir     = getenv("PDC_STAGE_CONSUMER_DIR");
    CHECK(dir != NULL, "PDC_STAGE_CONSUMER_DIR is not set");

    pdcid_t pdc = PDCinit("consumer");
    CHECK(pdc != 0, "PDCinit failed");
    printf("consuming %s\n", rel);
    fflush(stdout);
    char *local = NULL;
    CHECK(pdc_stage_consume_local(pdc, rel, timeout, &local) == 0, "pdc_stage_consume_local(%s) failed", rel);
    CHECK(local != NULL, "no local path");

    char want[4096], real_want[PATH_MAX], real_local[PATH_MAX];
    snprintf(want, sizeof want, "%s/%s", dir, rel);
    CHECK(realpath(want, real_want) != NULL, "realpath %s: %s", want, strerror(errno));
    CHECK(realpath(local, real_local) != NULL, "realpath %s: %s", local, strerror(errno));
    CHECK(strcmp(real_want, real_local) == 0, "local path %s, want %s", local, want);
    check_file(local, rel, size);
    free(local);

    CHECK(pdc_stage_consume(pdc, rel, 0) == 0, "second pdc_stage_consume(%s) failed", rel);
    check_file(want, rel, size);
    CHECK(PDCclose(pdc) == SUCCEED, "PDCclose failed");
    printf("consumed %s (%zu bytes)\n", rel, size);
    return 0;
}
