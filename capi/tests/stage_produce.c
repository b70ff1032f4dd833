/*
 * stage_produce: a producer task, as a DYAD user writes one. It writes PATH
 * (SIZE bytes) in its producer dir ($PDC_STAGE_PRODUCER_DIR), closes it and
 * produces it. With "abs" it names the file by its absolute path.
 *
 * usage: stage_produce PATH SIZE [abs]
 */
#include "check.h"
#include "pdc.h"

int main(int argc, char **argv)
{
    CHECK(argc == 3 || argc == 4, "usage: stage_produce PATH SIZE [abs]");
    const char *rel  = argv[1];
    size_t      size = strtoull(argv[2], NULL, 10);
    const char *dir  = getenv("PDC_STAGE_PRODUCER_DIR");
    CHECK(dir != NULL, "PDC_STAGE_PRODUCER_DIR is not set");

    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    write_file(path, rel, size);

    pdcid_t pdc = PDCinit("producer");
    CHECK(pdc != 0, "PDCinit failed");
    const char *name = argc == 4 ? path : rel;
    CHECK(pdc_stage_produce(pdc, name) == 0, "pdc_stage_produce(%s) failed", name);
    CHECK(PDCclose(pdc) == SUCCEED, "PDCclose failed");
    printf("produced %s (%zu bytes)\n", name, size);
    return 0;
}
