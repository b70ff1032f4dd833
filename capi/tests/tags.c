/*
 * tags: object tags as a PDC program uses them (compare PDC's
 * kvtag_add_get.c and kvtag_query.c), found again by
 * PDC_Client_query_kvtag, with the failures each call must report.
 */
#include <unistd.h>

#include "check.h"
#include "pdc.h"

/* query_one checks that a query for name=value finds exactly want. */
static void query_one(const char *name, const char *value, uint64_t want)
{
    pdc_kvtag_t kv  = {.name = (char *)name, .size = (uint32_t)strlen(value) + 1, .type = PDC_STRING,
                       .value = (void *)value};
    int         n   = -1;
    uint64_t   *ids = NULL;
    CHECK(PDC_Client_query_kvtag(&kv, &n, &ids) == SUCCEED, "query %s=%s failed", name, value);
    CHECK(n == 1 && ids[0] == want, "query %s=%s: %d ids, first %llu, want %llu", name, value, n,
          n > 0 ? (unsigned long long)ids[0] : 0ULL, (unsigned long long)want);
    free(ids);
}

static void test_obj_tags(pdcid_t pdc)
{
    char cname[64], oname[64];
    snprintf(cname, sizeof cname, "tags-c-%d", (int)getpid());
    snprintf(oname, sizeof oname, "tags-o-%d", (int)getpid());
    pdcid_t cont = PDCcont_create(cname, PDCprop_create(PDC_CONT_CREATE, pdc));
    CHECK(cont != 0, "PDCcont_create failed");
    pdcid_t  prop = PDCprop_create(PDC_OBJ_CREATE, pdc);
    uint64_t dims[1] = {16};
    CHECK(PDCprop_set_obj_dims(prop, 1, dims) == SUCCEED && PDCprop_set_obj_type(prop, PDC_INT) == SUCCEED, "prop");
    pdcid_t obj = PDCobj_create(cont, oname, prop);
    CHECK(obj != 0, "PDCobj_create failed");

    /* Tags keep the type they were stored with. */
    const char *units = "kelvin";
    int64_t     step  = 42;
    CHECK(PDCobj_put_tag(obj, "units", units, PDC_STRING, strlen(units) + 1) == SUCCEED, "put_tag units failed");
    CHECK(PDCobj_put_tag(obj, "step", &step, PDC_INT64, sizeof step) == SUCCEED, "put_tag step failed");
    CHECK(PDCobj_put_tag(obj, "abcd", "1234", PDC_STRING, 5) == SUCCEED, "put_tag abcd failed");
    void          *value = NULL;
    pdc_var_type_t type  = PDC_UNKNOWN;
    psize_t        size  = 0;
    CHECK(PDCobj_get_tag(obj, "units", &value, &type, &size) == SUCCEED, "get_tag units failed");
    CHECK(type == PDC_STRING && size == 7 && strcmp(value, "kelvin") == 0, "units: type %d size %llu", type, size);
    free(value);
    CHECK(PDCobj_get_tag(obj, "step", &value, NULL, &size) == SUCCEED, "get_tag step failed");
    CHECK(size == 8 && *(int64_t *)value == 42, "step: size %llu", size);
    free(value);

    /* Another handle, opened by name, sees them. */
    pdcid_t again = PDCobj_open(oname, pdc);
    CHECK(again != 0, "PDCobj_open failed");
    CHECK(PDCobj_get_tag(again, "step", &value, &type, &size) == SUCCEED, "get_tag step through open failed");
    CHECK(type == PDC_INT64 && size == 8 && *(int64_t *)value == 42, "step: type %d size %llu", type, size);
    free(value);

    /* The DART case, on the tags themselves: abcd=1234 is found by
     * exact, prefix, suffix and infix queries. */
    struct pdc_obj_info *info = PDCobj_get_info(obj);
    CHECK(info != NULL, "PDCobj_get_info failed");
    uint64_t meta_id = info->meta_id;
    free(info);
    query_one("abcd", "1234", meta_id);
    query_one("ab*", "12*", meta_id);
    query_one("*cd", "*34", meta_id);
    query_one("*bc*", "*23*", meta_id);

    /* Delete: then get_tag succeeds with nothing, and a second delete fails. */
    CHECK(PDCobj_del_tag(obj, "step") == SUCCEED, "del_tag failed");
    CHECK(PDCobj_get_tag(again, "step", &value, &type, &size) == SUCCEED, "get_tag of a deleted tag failed");
    CHECK(value == NULL && size == 0 && type == PDC_UNKNOWN, "deleted tag: %p, %llu bytes, type %d", value, size, type);
    CHECK(PDCobj_del_tag(obj, "step") == FAIL, "deleted a tag twice");
    CHECK(PDCobj_get_tag(obj, "units", NULL, &type, &size) == FAIL, "get_tag into NULL");
    CHECK(PDCobj_put_tag(cont, "x", "y", PDC_STRING, 2) == FAIL, "put_tag on a container");

    CHECK(PDCobj_close(again) == SUCCEED, "PDCobj_close failed");
    CHECK(PDCobj_close(obj) == SUCCEED, "PDCobj_close failed");
    CHECK(PDCcont_close(cont) == SUCCEED, "PDCcont_close failed");
}

int main(void)
{
    pdcid_t pdc = PDCinit("pdc");
    CHECK(pdc != 0, "PDCinit failed");
    test_obj_tags(pdc);
    CHECK(PDCclose(pdc) == SUCCEED, "PDCclose failed");
    printf("tags: ok\n");
    return 0;
}
