/*
 * limits: sizes and counts a caller passes that are out of bounds. Each
 * call fails before it touches the caller's memory, prints its one line
 * naming the call and the size, and the program goes on (no abort, no
 * crash).
 */
#include <unistd.h>

#include "check.h"
#include "pdc.h"

static void test_kvtag_sizes(void)
{
    char        v[8] = "abc";
    uint32_t    sizes[] = {0x80000000u, 100000000u, 65537u};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        pdc_kvtag_t q   = {.name = "x", .size = sizes[i], .type = PDC_STRING, .value = v};
        int         n   = -1;
        uint64_t   *ids = (uint64_t *)v;
        CHECK(PDC_Client_query_kvtag(&q, &n, &ids) == FAIL, "a %u-byte tag value in an 8-byte buffer accepted", sizes[i]);
        CHECK(n == 0 && ids == NULL, "a failed query set n %d ids %p", n, (void *)ids);
    }
}

/* Counts of transfer arrays: the line names the array and the count the
 * caller passed, and a count past any array is not read. */
static void test_transfer_counts(void)
{
    pdcid_t x[2] = {5, 6};
    CHECK(PDCregion_transfer_wait_all(x, -3) == FAIL, "wait_all of -3 transfers");
    CHECK(PDCregion_transfer_start_all(x, 0) == FAIL, "start_all of no transfers");
    CHECK(PDCregion_transfer_start_all(x, 1 << 30) == FAIL, "start_all of 2^30 transfers from a 2-element array");
    CHECK(PDCregion_transfer_wait_all(NULL, 2) == FAIL, "wait_all of NULL");
}

int main(void)
{
    pdcid_t pdc = PDCinit("limits");
    CHECK(pdc != 0, "PDCinit failed");
    test_kvtag_sizes();
    test_transfer_counts();

    /* The process goes on: a good query works. */
    char        v[] = "abc";
    pdc_kvtag_t q   = {.name = "limits-none", .size = sizeof v, .type = PDC_STRING, .value = v};
    int         n   = -1;
    uint64_t   *ids = NULL;
    CHECK(PDC_Client_query_kvtag(&q, &n, &ids) == SUCCEED && n == 0, "a good query after the bad ones");
    CHECK(PDCclose(pdc) == SUCCEED, "PDCclose");
    printf("limits: every call behaved\n");
    return 0;
}
