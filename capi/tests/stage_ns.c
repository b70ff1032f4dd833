/*
 * stage_ns: staging namespaces through DYAD's and libpdc's C API, the
 * namespace given by $DYAD_KVS_NAMESPACE or $PDC_STAGE_NAMESPACE.
 *
 *   stage_ns absent REL         REL (in $DYAD_PATH_CONSUMER) has not been
 *                               produced in this namespace: dyad_get_metadata
 *                               says DYAD_RC_NOTFOUND, whatever other
 *                               namespaces hold
 *   stage_ns newer REL VERSION  prints "waiting", then consumes a version
 *                               of REL newer than VERSION
 *                               (pdc_stage_consume_newer) and prints it
 */
#include <dyad/client/dyad_client.h>
#include <dyad/core/dyad_ctx.h>
#include <inttypes.h>

#include "check.h"
#include "pdc.h"
#include "pdc_stage.h"

int main(int argc, char **argv)
{
    CHECK(argc >= 3, "usage: stage_ns absent REL | stage_ns newer REL VERSION");
    const char *rel = argv[2];
    if (strcmp(argv[1], "absent") == 0) {
        const char *dir = getenv("DYAD_PATH_CONSUMER");
        CHECK(dir != NULL, "DYAD_PATH_CONSUMER is not set");
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, rel);
        mkdirs(path); /* a missing consumer dir would say "not found" too */
        CHECK(dyad_init_env(DYAD_COMM_RECV, NULL) == DYAD_RC_OK, "dyad_init_env failed");
        dyad_metadata_t *md = NULL;
        dyad_rc_t        rc = dyad_get_metadata(dyad_ctx_get(), path, false, &md);
        CHECK(rc == DYAD_RC_NOTFOUND && md == NULL, "dyad_get_metadata(%s) in namespace %s = %d, want DYAD_RC_NOTFOUND (%d)", path,
              getenv("DYAD_KVS_NAMESPACE"), rc, DYAD_RC_NOTFOUND);
        CHECK(dyad_finalize() == DYAD_RC_OK, "dyad_finalize failed");
        printf("absent\n");
        return 0;
    }
    CHECK(strcmp(argv[1], "newer") == 0 && argc == 4, "usage: stage_ns newer REL VERSION");
    uint64_t version = strtoull(argv[3], NULL, 10);
    pdcid_t  pdc     = PDCinit("stage_ns");
    CHECK(pdc != 0, "PDCinit failed");
    printf("waiting\n");
    fflush(stdout);
    CHECK(pdc_stage_consume_newer(pdc, rel, version, 120) == 0, "pdc_stage_consume_newer(%s, %" PRIu64 ")", rel, version);
    CHECK(PDCclose(pdc) == SUCCEED, "PDCclose failed");
    printf("consumed %s newer than %" PRIu64 "\n", rel, version);
    return 0;
}
