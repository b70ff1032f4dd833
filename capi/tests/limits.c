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
    CHECK(PDCregion_transfer_start_all(x, 0) == SUCCEED, "start_all of no transfers failed");
    CHECK(PDCregion_transfer_wait_all(NULL, 0) == SUCCEED, "wait_all of no transfers failed");
    CHECK(PDCregion_transfer_start_all(x, 1 << 30) == FAIL, "start_all of 2^30 transfers from a 2-element array");
    CHECK(PDCregion_transfer_wait_all(NULL, 2) == FAIL, "wait_all of NULL");
}

/* A selection whose nhits is past the coordinates it holds (coords_alloc)
 * is refused before they are read. */
static void test_selection_counts(pdcid_t pdc)
{
    char name[64];
    snprintf(name, sizeof name, "limits-%d", (int)getpid());
    pdcid_t  cont = PDCcont_create(name, PDCprop_create(PDC_CONT_CREATE, pdc));
    pdcid_t  prop = PDCprop_create(PDC_OBJ_CREATE, pdc);
    uint64_t dims = 1 << 20;
    CHECK(cont != 0 && PDCprop_set_obj_dims(prop, 1, &dims) == SUCCEED && PDCprop_set_obj_type(prop, PDC_INT) == SUCCEED,
          "setup");
    char aname[80], bname[80];
    snprintf(aname, sizeof aname, "%s-a", name);
    snprintf(bname, sizeof bname, "%s-b", name);
    pdcid_t a = PDCobj_create(cont, aname, prop), b = PDCobj_create(cont, bname, prop);
    int     zero = 0;
    CHECK(a != 0 && b != 0, "objects");
    pdc_query_t *q = PDCquery_create(a, PDC_GT, PDC_INT, &zero);
    CHECK(q != NULL, "query");
    uint64_t        coords[4] = {0, 1, 2, 3};
    int             out[4];
    pdc_selection_t sel = {.query_id = q->handle, .ndim = 1, .nhits = 1 << 30, .coords = coords, .coords_alloc = 4};
    CHECK(PDCquery_get_data(b, &sel, out) == FAIL, "get_data of 2^30 hits from 4 coords");
    sel.nhits = 4;
    CHECK(PDCquery_get_data(b, &sel, out) == SUCCEED && out[3] == 0, "get_data of the 4 hits");
    PDCquery_free(q);
    CHECK(PDCobj_close(a) == SUCCEED && PDCobj_close(b) == SUCCEED && PDCcont_del(cont) == SUCCEED, "cleanup");
}

int main(void)
{
    pdcid_t pdc = PDCinit("limits");
    CHECK(pdc != 0, "PDCinit failed");
    test_kvtag_sizes();
    test_transfer_counts();
    test_selection_counts(pdc);

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
