/*
 * stage_bad: bad input to the staging calls and PDCinit. Each call must
 * fail with its error return, print its line on stderr (run.sh checks the
 * lines) and leave the process able to go on: at the end a file is
 * produced and consumed as usual.
 *
 * Runs with a producer dir and a consumer dir on one host.
 */
#include <math.h>
#include <unistd.h>

#include "check.h"
#include "pdc.h"

int main(void)
{
    const char *pdir = getenv("PDC_STAGE_PRODUCER_DIR");
    CHECK(pdir != NULL && getenv("PDC_STAGE_CONSUMER_DIR") != NULL, "set both staging dirs");
    char path[4096];

    /* PDCinit with no servers: fails after $PDC_TIMEOUT, not never. The
     * library must see setenv made after it was loaded. */
    char *tmpdir = strdup(getenv("PDC_TMPDIR"));
    char  empty[] = "/tmp/libpdc-empty-XXXXXX";
    CHECK(mkdtemp(empty) != NULL, "mkdtemp: %s", strerror(errno));
    setenv("PDC_TMPDIR", empty, 1);
    setenv("PDC_TIMEOUT", "1", 1);
    double t0 = now();
    CHECK(PDCinit("nowhere") == 0, "PDCinit without servers succeeded");
    double took = now() - t0;
    CHECK(took >= 0.9 && took < 20, "PDCinit without servers took %.1fs, want about 1s", took);
    setenv("PDC_TIMEOUT", "soon", 1);
    CHECK(PDCinit("bad-timeout") == 0, "PDCinit with PDC_TIMEOUT=soon succeeded");
    rmdir(empty);
    setenv("PDC_TMPDIR", tmpdir, 1);
    setenv("PDC_TIMEOUT", "30", 1);
    free(tmpdir);

    pdcid_t pdc = PDCinit("bad-input");
    CHECK(pdc != 0, "PDCinit failed");

    /* Paths that leave the producer dir, even when the file exists. */
    snprintf(path, sizeof path, "%s/../escape.txt", pdir);
    write_file(path, "escape.txt", 10);
    CHECK(pdc_stage_produce(pdc, "../escape.txt") == -1, "produced a path outside the producer dir");
    CHECK(pdc_stage_produce(pdc, path) == -1, "produced an absolute path outside the producer dir");
    CHECK(pdc_stage_produce(pdc, "/etc/passwd") == -1, "produced /etc/passwd");
    /* Files that are not there or not files. */
    CHECK(pdc_stage_produce(pdc, "missing.bin") == -1, "produced a missing file");
    snprintf(path, sizeof path, "%s/adir/x", pdir);
    mkdirs(path);
    CHECK(pdc_stage_produce(pdc, "adir") == -1, "produced a directory");
    CHECK(pdc_stage_produce(pdc, NULL) == -1, "produced NULL");
    CHECK(pdc_stage_produce(pdc, "") == -1, "produced \"\"");
    /* Handles that are not connections. */
    CHECK(pdc_stage_produce(0, "x") == -1, "produced through handle 0");
    CHECK(pdc_stage_produce(987654321, "x") == -1, "produced through an unknown handle");
    pdcid_t prop = PDCprop_create(PDC_CONT_CREATE, pdc);
    CHECK(prop != 0, "PDCprop_create failed");
    CHECK(pdc_stage_produce(prop, "x") == -1, "produced through a property handle");

    /* A consume of a file nobody produces gives up at its timeout. */
    t0 = now();
    CHECK(pdc_stage_consume(pdc, "never-produced.bin", 1.0) == -1, "consumed a file never produced");
    took = now() - t0;
    CHECK(took >= 0.9 && took < 20, "a 1s consume took %.1fs", took);
    CHECK(pdc_stage_consume(pdc, "never-produced.bin", -1) == -1, "negative timeout accepted");
    CHECK(pdc_stage_consume(pdc, "never-produced.bin", NAN) == -1, "NaN timeout accepted");
    CHECK(pdc_stage_consume(pdc, "../escape.txt", 1) == -1, "consumed into a path outside the consumer dir");
    char *local = (char *)"untouched";
    CHECK(pdc_stage_consume_local(pdc, "never-produced.bin", 0.2, &local) == -1, "consumed a file never produced");
    CHECK(local == NULL, "a failed consume left *local_path set");
    CHECK(pdc_stage_consume_local(pdc, "never-produced.bin", 0.2, NULL) == -1, "NULL local_path accepted");

    /* The process goes on: a file is produced and consumed on this host. */
    snprintf(path, sizeof path, "%s/after/errors.bin", pdir);
    write_file(path, "after/errors.bin", 4096);
    CHECK(pdc_stage_produce(pdc, "after/errors.bin") == 0, "produce after errors failed");
    CHECK(pdc_stage_consume_local(pdc, "after/errors.bin", 10, &local) == 0, "consume after errors failed");
    check_file(local, "after/errors.bin", 4096);
    free(local);

    CHECK(PDCprop_close(prop) == SUCCEED, "PDCprop_close failed");
    CHECK(PDCclose(pdc) == SUCCEED, "PDCclose failed");
    CHECK(PDCclose(pdc) == FAIL, "a second PDCclose succeeded");
    CHECK(pdc_stage_produce(pdc, "after/errors.bin") == -1, "produced through a closed connection");
    printf("bad input: every call failed cleanly and the process went on\n");
    return 0;
}
