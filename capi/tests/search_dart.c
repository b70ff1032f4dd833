/*
 * search_dart: the DART index as a PDC program uses it (compare PDC's
 * dart_test.c and kvtag_query.c): key "abcd" with value "1234" is found by
 * abcd=1234, ab*=12*, *cd=*34 and *bc*=*23*; deleting it removes every
 * suffix entry too; tag queries that match nothing return 0 ids, many
 * times in one process; bad input fails with one line each.
 */
#include <unistd.h>

#include "check.h"
#include "pdc.h"

static int search(const char *q, uint64_t **ids)
{
    int n = -1;
    *ids  = NULL;
    CHECK(PDC_Client_search_obj_ref_through_dart(DART_HASH, (char *)q, REF_PRIMARY_ID, &n, ids) == SUCCEED,
          "search %s failed", q);
    CHECK(n >= 0 && (n == 0) == (*ids == NULL), "search %s: n %d, ids %p", q, n, (void *)*ids);
    return n;
}

static int has(const uint64_t *ids, int n, uint64_t id)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == id)
            return 1;
    return 0;
}

int main(void)
{
    pdcid_t pdc = PDCinit("pdc");
    CHECK(pdc != 0, "PDCinit failed");
    uint64_t id = 1000000 + (uint64_t)getpid(), other = id + 1;

    CHECK(PDC_Client_insert_obj_ref_into_dart(DHT_FULL_HASH, "abcd", "1234", REF_PRIMARY_ID, id) == SUCCEED,
          "insert abcd=1234 failed");
    CHECK(PDC_Client_insert_obj_ref_into_dart(DART_HASH, "abxy", "1299", REF_PRIMARY_ID, other) == SUCCEED,
          "insert abxy=1299 failed");

    const char *queries[] = {"abcd=1234", "ab*=12*", "*cd=*34", "*bc*=*23*"};
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < sizeof queries / sizeof *queries; i++) {
            uint64_t *ids;
            int       n = search(queries[i], &ids);
            CHECK(has(ids, n, id), "%s: %d ids, not %llu", queries[i], n, (unsigned long long)id);
            CHECK(has(ids, n, other) == (i == 1), "%s: the other entry found: %d", queries[i], has(ids, n, other));
            free(ids);
        }
    }
    uint64_t *ids;
    CHECK(search("abcd=9*", &ids) == 0, "abcd=9* matched");
    CHECK(search("*zz*=*", &ids) == 0, "*zz*=* matched");

    /* Delete: no query finds it by any suffix, the other entry stays. */
    CHECK(PDC_Client_delete_obj_ref_from_dart(DHT_FULL_HASH, "abcd", "1234", REF_PRIMARY_ID, id) == SUCCEED,
          "delete failed");
    for (size_t i = 0; i < sizeof queries / sizeof *queries; i++) {
        int n = search(queries[i], &ids);
        CHECK(!has(ids, n, id), "%s still finds the deleted entry", queries[i]);
        free(ids);
    }
    int n = search("ab*=12*", &ids);
    CHECK(n == 1 && ids[0] == other, "ab*=12* after delete: %d ids", n);
    free(ids);

    /* Tag queries: no object has these tags; 0 ids, many times. */
    for (int i = 0; i < 10; i++) {
        int32_t     v   = 42;
        pdc_kvtag_t num = {.name = "nosuchtag", .size = sizeof v, .type = PDC_INT, .value = &v};
        pdc_kvtag_t txt = {.name = "nosuch*", .size = 5, .type = PDC_STRING, .value = "*bc*"};
        n = -1;
        ids = (uint64_t *)&n; /* must be reset */
        CHECK(PDC_Client_query_kvtag(&num, &n, &ids) == SUCCEED && n == 0 && ids == NULL, "query_kvtag int");
        n = -1;
        CHECK(PDC_Client_query_kvtag(&txt, &n, &ids) == SUCCEED && n == 0 && ids == NULL, "query_kvtag string");
    }
    pdc_kvtag_t *kv = malloc(sizeof *kv);
    kv->name = strdup("k");
    kv->value = strdup("v");
    kv->size = 2;
    kv->type = PDC_STRING;
    CHECK(PDC_free_kvtag(&kv) == SUCCEED && kv == NULL, "PDC_free_kvtag");

    /* Bad input: one line each. */
    CHECK(PDC_Client_search_obj_ref_through_dart(0, "a=b", REF_PRIMARY_ID, &n, &ids) == FAIL, "algo 0");
    CHECK(PDC_Client_search_obj_ref_through_dart(DART_HASH, "abcd", REF_PRIMARY_ID, &n, &ids) == FAIL, "no =");
    CHECK(PDC_Client_search_obj_ref_through_dart(DART_HASH, "a=b", REF_PRIMARY_ID, NULL, &ids) == FAIL, "NULL n");
    CHECK(PDC_Client_insert_obj_ref_into_dart(DART_HASH, "a*", "1", REF_PRIMARY_ID, id) == FAIL, "key with *");
    CHECK(PDC_Client_delete_obj_ref_from_dart(DART_HASH, "a", "1", 7, id) == FAIL, "ref 7");
    pdc_kvtag_t bad = {.name = "x", .size = 4, .type = PDC_STRING, .value = "a*b"};
    CHECK(PDC_Client_query_kvtag(&bad, &n, &ids) == FAIL, "misplaced *");
    CHECK(PDC_Client_query_kvtag(NULL, &n, &ids) == FAIL, "NULL kvtag");

    CHECK(PDCclose(pdc) == SUCCEED, "PDCclose failed");
    /* No connection left to search through. */
    CHECK(PDC_Client_search_obj_ref_through_dart(DART_HASH, "a=b", REF_PRIMARY_ID, &n, &ids) == FAIL, "closed");
    printf("search_dart: ok\n");
    return 0;
}
