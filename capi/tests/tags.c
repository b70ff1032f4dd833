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

    /* Delete: then get_tag succeeds with nothing, and a second delete
     * succeeds too, as in PDC. */
    CHECK(PDCobj_del_tag(obj, "step") == SUCCEED, "del_tag failed");
    CHECK(PDCobj_get_tag(again, "step", &value, &type, &size) == SUCCEED, "get_tag of a deleted tag failed");
    CHECK(value == NULL && size == 0 && type == PDC_UNKNOWN, "deleted tag: %p, %llu bytes, type %d", value, size, type);
    CHECK(PDCobj_del_tag(obj, "step") == SUCCEED, "deleting a tag not set failed");
    CHECK(PDCobj_get_tag(obj, "units", NULL, &type, &size) == FAIL, "get_tag into NULL");
    CHECK(PDCobj_put_tag(cont, "x", "y", PDC_STRING, 2) == FAIL, "put_tag on a container");

    CHECK(PDCobj_close(again) == SUCCEED, "PDCobj_close failed");
    CHECK(PDCobj_close(obj) == SUCCEED, "PDCobj_close failed");
    CHECK(PDCcont_close(cont) == SUCCEED, "PDCcont_close failed");
}

/* test_iter: the container and object iterators (compare PDC's
 * cont_iter.c and obj_iter.c). */
static void test_iter(pdcid_t pdc)
{
    char cname[64], ename[64];
    snprintf(cname, sizeof cname, "iter-c-%d", (int)getpid());
    snprintf(ename, sizeof ename, "iter-e-%d", (int)getpid());
    pdcid_t cprop = PDCprop_create(PDC_CONT_CREATE, pdc);
    pdcid_t cont  = PDCcont_create(cname, cprop);
    pdcid_t empty = PDCcont_create(ename, cprop);
    CHECK(cont != 0 && empty != 0, "PDCcont_create failed");
    pdcid_t  prop    = PDCprop_create(PDC_OBJ_CREATE, pdc);
    uint64_t dims[2] = {3, 7};
    CHECK(PDCprop_set_obj_dims(prop, 2, dims) == SUCCEED && PDCprop_set_obj_type(prop, PDC_DOUBLE) == SUCCEED, "prop");
    const char *names[3] = {"b", "a", "c"};
    pdcid_t     objs[3];
    for (int i = 0; i < 3; i++)
        CHECK((objs[i] = PDCobj_create(cont, names[i], prop)) != 0, "PDCobj_create %s failed", names[i]);

    /* The containers this process has open, with our handles. */
    int found = 0, total = 0;
    for (cont_handle *h = PDCcont_iter_start(); !PDCcont_iter_null(h); h = PDCcont_iter_next(h)) {
        struct pdc_cont_info *info = PDCcont_iter_get_info(h);
        CHECK(info != NULL && info->meta_id != 0, "PDCcont_iter_get_info failed");
        if (strcmp(info->name, cname) == 0) {
            CHECK(info->local_id == cont, "local id %llu, want %llu", (unsigned long long)info->local_id,
                  (unsigned long long)cont);
            found++;
        }
        if (strcmp(info->name, ename) == 0)
            found++;
        total++;
        free(info->name);
        free(info);
    }
    CHECK(found == 2, "the iterator found %d of our 2 containers among %d", found, total);

    /* Our container's objects, in meta id order, as PDCobj_get_info describes them. */
    const char *want[3]  = {"a", "b", "c"};
    pdcid_t     local[3] = {objs[1], objs[0], objs[2]};
    int         n = 0, seen[3] = {0, 0, 0};
    uint64_t    last = 0;
    obj_handle *h    = PDCobj_iter_start(cont);
    for (; !PDCobj_iter_null(h); h = PDCobj_iter_next(h, cont), n++) {
        CHECK(n < 3, "more than 3 objects");
        struct pdc_obj_info *info = PDCobj_iter_get_info(h);
        CHECK(info != NULL, "PDCobj_iter_get_info failed");
        int k = -1;
        for (int i = 0; i < 3; i++)
            if (strcmp(info->name, want[i]) == 0)
                k = i;
        CHECK(k >= 0 && !seen[k]++, "object %d: %s is not one of a, b, c, or listed twice", n, info->name);
        CHECK(info->meta_id > last, "object %d: meta id %llu after %llu", n, (unsigned long long)info->meta_id,
              (unsigned long long)last);
        last = info->meta_id;
        CHECK(info->local_id == local[k] && info->obj_pt->ndim == 2 && info->obj_pt->dims[0] == 3 &&
                  info->obj_pt->dims[1] == 7 && info->obj_pt->type == PDC_DOUBLE,
              "object %d: %s local %llu ndim %zu", n, info->name, (unsigned long long)info->local_id,
              info->obj_pt->ndim);
        struct pdc_obj_info *now = PDCobj_get_info(local[k]);
        CHECK(now != NULL && now->meta_id == info->meta_id, "meta id differs from PDCobj_get_info's");
        free(now);
        free(info);
    }
    CHECK(n == 3, "%d objects, want 3", n);
    /* Nothing in an empty container: NULL, and no failure. */
    CHECK(PDCobj_iter_null(PDCobj_iter_start(empty)), "objects in an empty container");
    /* A bad container: NULL, with a line saying why. */
    CHECK(PDCobj_iter_start(prop) == NULL, "iterated a property");
    /* Leaving an iteration early: the rest goes with PDCclose. */
    h = PDCobj_iter_start(cont);
    CHECK(h != NULL, "PDCobj_iter_start failed");

    for (int i = 0; i < 3; i++)
        CHECK(PDCobj_close(objs[i]) == SUCCEED, "PDCobj_close failed");
    CHECK(PDCcont_close(cont) == SUCCEED && PDCcont_close(empty) == SUCCEED, "PDCcont_close failed");
}

int main(void)
{
    pdcid_t pdc = PDCinit("pdc");
    CHECK(pdc != 0, "PDCinit failed");
    test_obj_tags(pdc);
    test_iter(pdc);
    CHECK(PDCclose(pdc) == SUCCEED, "PDCclose failed");
    printf("tags: ok\n");
    return 0;
}
