/*
 * compat: what PDC's own test programs expect of the API, where a stricter
 * answer would make them fail (compare PDC's obj_life.c, obj_info.c,
 * kvtag_add_get.c, vpicio.c and bdcats.c): an object made from a property
 * whose dims and type were never set, transfers started and waited in
 * batches of none, tags deleted that were not set, regions closed
 * through PDCobj_close, and the container iterator over this process's
 * handles, started with an argument, and metadata_server_id as PDC
 * places objects.
 */
#include <unistd.h>

#include "check.h"
#include "pdc.h"
#include "pdc_prop_pkg.h"

/* A property never given dims or a type makes a shapeless object (ndim 0,
 * PDC_UNKNOWN) that holds tags and metadata; region I/O on it fails. */
static void test_shapeless(pdcid_t pdc, pdcid_t cont, const char *name)
{
    pdcid_t prop = PDCprop_create(PDC_OBJ_CREATE, pdc);
    int     user = 7;
    CHECK(prop != 0 && PDCprop_set_obj_buf(prop, &user) == SUCCEED, "property");
    pdcid_t obj = PDCobj_create(cont, name, prop);
    CHECK(obj != 0, "PDCobj_create from an unset property failed");

    struct pdc_obj_info *info = PDCobj_get_info(obj);
    CHECK(info != NULL, "PDCobj_get_info failed");
    CHECK(info->obj_pt->ndim == 0 && info->obj_pt->type == PDC_UNKNOWN && strcmp(info->name, name) == 0,
          "info: ndim %zu type %d name %s", info->obj_pt->ndim, info->obj_pt->type, info->name);
    free(info);
    void **buf = PDCobj_buf_retrieve(obj);
    CHECK(buf != NULL && *buf == &user, "buf_retrieve: %p", buf ? *buf : NULL);

    int step = 3;
    CHECK(PDCobj_put_tag(obj, "step", &step, PDC_INT, sizeof step) == SUCCEED, "put_tag failed");
    pdcid_t again = PDCobj_open(name, pdc);
    CHECK(again != 0, "PDCobj_open failed");
    void          *value = NULL;
    pdc_var_type_t type  = PDC_UNKNOWN;
    psize_t        size  = 0;
    CHECK(PDCobj_get_tag(again, "step", &value, &type, &size) == SUCCEED, "get_tag failed");
    CHECK(type == PDC_INT && size == sizeof step && *(int *)value == 3, "tag: type %d size %llu", type,
          (unsigned long long)size);
    free(value);
    CHECK(PDCobj_close(again) == SUCCEED, "close");

    /* Region I/O fails with a report naming the object (one line). */
    uint64_t off = 0, len = 4;
    int      data[4];
    pdcid_t  reg = PDCregion_create(1, &off, &len);
    CHECK(PDCregion_transfer_create(data, PDC_WRITE, obj, reg, reg) == 0, "a transfer on a shapeless object");
    CHECK(PDCregion_close(reg) == SUCCEED, "region close");

    CHECK(PDCobj_del(obj) == SUCCEED && PDCobj_close(obj) == SUCCEED, "delete");
    CHECK(PDCprop_close(prop) == SUCCEED, "prop close");
}

/* start_all and wait_all of no transfers succeed, with an array or none. */
static void test_no_transfers(void)
{
    pdcid_t ids[1] = {0};
    CHECK(PDCregion_transfer_start_all(ids, 0) == SUCCEED, "start_all of 0 failed");
    CHECK(PDCregion_transfer_wait_all(ids, 0) == SUCCEED, "wait_all of 0 failed");
    CHECK(PDCregion_transfer_start_all(NULL, 0) == SUCCEED, "start_all(NULL, 0) failed");
    CHECK(PDCregion_transfer_wait_all(NULL, 0) == SUCCEED, "wait_all(NULL, 0) failed");
}

/* Deleting a tag that is not set succeeds, on objects and containers. */
static void test_del_unset_tags(pdcid_t pdc, pdcid_t cont, const char *name)
{
    pdcid_t  prop = PDCprop_create(PDC_OBJ_CREATE, pdc);
    uint64_t dims = 8;
    CHECK(PDCprop_set_obj_dims(prop, 1, &dims) == SUCCEED && PDCprop_set_obj_type(prop, PDC_INT) == SUCCEED, "prop");
    pdcid_t obj = PDCobj_create(cont, name, prop);
    CHECK(obj != 0, "PDCobj_create failed");
    CHECK(PDCobj_del_tag(obj, "never-set") == SUCCEED, "PDCobj_del_tag of a tag not set failed");
    CHECK(PDCcont_del_tag(cont, "never-set") == SUCCEED, "PDCcont_del_tag of a tag not set failed");

    /* PDCobj_close of a region closes it, as PDC's VPIC-IO does. */
    uint64_t off = 0, len = 8;
    pdcid_t  reg = PDCregion_create(1, &off, &len);
    CHECK(reg != 0 && PDCobj_close(reg) == SUCCEED, "PDCobj_close of a region failed");

    CHECK(PDCobj_del(obj) == SUCCEED && PDCobj_close(obj) == SUCCEED, "delete");
    CHECK(PDCprop_close(prop) == SUCCEED, "prop close");
}

/* PDCcont_iter_start takes the pdc id in PDC's programs (its header has
 * no parameter list); it walks this process's container handles, one
 * entry per handle, as PDC's does. */
static void test_cont_iter(pdcid_t pdc, pdcid_t cont, const char *cname)
{
    pdcid_t again = PDCcont_open(cname, pdc);
    CHECK(again != 0 && again != cont, "PDCcont_open failed");
    int      n = 0, ours = 0;
    uint64_t meta[2];
    for (cont_handle *h = PDCcont_iter_start(pdc); !PDCcont_iter_null(h); h = PDCcont_iter_next(h), n++) {
        struct pdc_cont_info *info = PDCcont_iter_get_info(h);
        CHECK(info != NULL, "PDCcont_iter_get_info failed");
        if (strcmp(info->name, cname) == 0) {
            CHECK(ours < 2, "container %s listed more than twice", cname);
            CHECK(info->local_id == (ours == 0 ? again : cont), "entry %d: local id %llu", ours,
                  (unsigned long long)info->local_id);
            meta[ours++] = info->meta_id;
        }
        free(info->name);
        free(info);
    }
    CHECK(n == 2 && ours == 2 && meta[0] == meta[1], "%d entries, %d of them ours", n, ours);
    CHECK(PDCcont_close(again) == SUCCEED, "close");
}

/* djb2 is PDC's pdc_hash_djb2: over the name's chars, signed on x86. */
static uint32_t djb2(const char *name)
{
    uint32_t h = 5381, c;
    while ((c = (uint32_t)*name++))
        h = ((h << 5) + h) + c;
    return h;
}

/* metadata_server_id is where PDC places the object: djb2 of its name
 * plus its time step, modulo the servers (two in run.sh). */
static void test_metadata_server_id(pdcid_t pdc, pdcid_t cont)
{
    for (uint32_t step = 0; step < 4; step++) {
        char name[64];
        snprintf(name, sizeof name, "compat-placed-%d-%u", (int)getpid(), step);
        pdcid_t  prop = PDCprop_create(PDC_OBJ_CREATE, pdc);
        uint64_t dims = 4;
        CHECK(PDCprop_set_obj_dims(prop, 1, &dims) == SUCCEED && PDCprop_set_obj_type(prop, PDC_INT) == SUCCEED &&
                  PDCprop_set_obj_time_step(prop, step) == SUCCEED,
              "prop");
        pdcid_t              obj  = PDCobj_create(cont, name, prop);
        struct pdc_obj_info *info = obj ? PDCobj_get_info(obj) : NULL;
        CHECK(info != NULL, "create or info of %s failed", name);
        CHECK(info->metadata_server_id == (djb2(name) + step) % 2, "%s: metadata_server_id %u, want %u", name,
              info->metadata_server_id, (djb2(name) + step) % 2);
        free(info);
        CHECK(PDCobj_del(obj) == SUCCEED && PDCobj_close(obj) == SUCCEED && PDCprop_close(prop) == SUCCEED, "delete");
    }
}

/* The rest of PDC's public API: PDC_timing_report, PDCcont_prop_get_info,
 * PDCregion_free, PDC_region_overlap_detect, the query and selection
 * printers work; analysis, transforms and histograms link and fail,
 * each with one report (5 lines). Buffer maps and region locks work
 * (bufmap.c). */
static void test_rest_of_api(pdcid_t pdc, pdcid_t cont, const char *name)
{
    CHECK(PDC_timing_report("compat") == 0, "PDC_timing_report");

    pdcid_t cprop = PDCprop_create(PDC_CONT_CREATE, pdc);
    CHECK(PDCprop_set_cont_lifetime(cprop, PDC_TRANSIENT) == SUCCEED, "lifetime");
    struct _pdc_cont_prop *cp = PDCcont_prop_get_info(cprop);
    CHECK(cp != NULL && cp->cont_prop_id == cprop && cp->cont_life == PDC_TRANSIENT, "cont_prop_get_info");
    CHECK(PDCprop_close(cprop) == SUCCEED, "prop close");

    uint64_t  o1[2] = {0, 4}, s1[2] = {10, 4}, o2[2] = {5, 6}, s2[2] = {10, 10}, *oo = NULL, *os = NULL;
    CHECK(PDC_region_overlap_detect(2, o1, s1, o2, s2, &oo, &os) == 1, "overlap");
    CHECK(oo[0] == 5 && oo[1] == 6 && os[0] == 5 && os[1] == 2, "overlap %llu+%llu, %llu+%llu",
          (unsigned long long)oo[0], (unsigned long long)os[0], (unsigned long long)oo[1], (unsigned long long)os[1]);
    free(oo);
    free(os);
    o2[0] = 10;
    CHECK(PDC_region_overlap_detect(2, o1, s1, o2, s2, &oo, &os) == 0 && oo == NULL && os == NULL, "no overlap");

    struct pdc_region_info ri = {.ndim = 1, .offset = malloc(8), .size = malloc(8)};
    PDCregion_free(&ri);
    CHECK(ri.offset == NULL && ri.size == NULL, "PDCregion_free");

    /* An object of 8 ints 0..7, a query > 3 in [2, 8): 4 hits, printed. */
    pdcid_t  prop = PDCprop_create(PDC_OBJ_CREATE, pdc);
    uint64_t dims = 8;
    CHECK(PDCprop_set_obj_dims(prop, 1, &dims) == SUCCEED && PDCprop_set_obj_type(prop, PDC_INT) == SUCCEED, "prop");
    pdcid_t obj = PDCobj_create(cont, name, prop);
    CHECK(obj != 0, "create");
    int      data[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    uint64_t off = 0;
    pdcid_t  reg = PDCregion_create(1, &off, &dims);
    pdcid_t  w   = PDCregion_transfer_create(data, PDC_WRITE, obj, reg, reg);
    CHECK(w != 0 && PDCregion_transfer_start(w) == SUCCEED && PDCregion_transfer_wait(w) == SUCCEED, "write");
    CHECK(PDCregion_transfer_close(w) == SUCCEED && PDCregion_close(reg) == SUCCEED, "close");
    int                    three = 3;
    pdc_query_t           *q     = PDCquery_create(obj, PDC_GT, PDC_INT, &three);
    uint64_t               qo = 2, qs = 6;
    struct pdc_region_info qr = {.ndim = 1, .offset = &qo, .size = &qs};
    CHECK(q != NULL && PDCquery_sel_region(q, &qr) == SUCCEED, "query");
    pdc_selection_t sel;
    CHECK(PDCquery_get_selection(q, &sel) == SUCCEED && sel.nhits == 4, "selection: %llu hits",
          (unsigned long long)sel.nhits);
    PDCquery_print(q);
    PDCselection_print(&sel);
    PDCselection_print_all(&sel);
    PDCselection_free(&sel);
    PDCquery_free(q);

    /* What pdc does not implement links, and fails with a report. */
    CHECK(PDCquery_get_histogram(obj) == FAIL, "histogram");
    CHECK(PDCobj_data_iter_create(obj, 0) == 0, "data iter");
    CHECK(PDCobj_analysis_register("f", 1, 2) == FAIL, "analysis");
    CHECK(PDCiter_get_nextId() == -1, "nextId");
    CHECK(PDCobj_transform_register("f", obj, 0, 1, PDC_DATA_MAP, DATA_OUT) == FAIL, "transform");

    CHECK(PDCobj_del(obj) == SUCCEED && PDCobj_close(obj) == SUCCEED && PDCprop_close(prop) == SUCCEED, "delete");
}

int main(void)
{
    char cname[64], shapeless[64], tagged[64];
    snprintf(cname, sizeof cname, "compat-c-%d", (int)getpid());
    snprintf(shapeless, sizeof shapeless, "compat-shapeless-%d", (int)getpid());
    snprintf(tagged, sizeof tagged, "compat-tagged-%d", (int)getpid());
    pdcid_t pdc  = PDCinit("compat");
    CHECK(pdc != 0, "PDCinit failed");
    pdcid_t cont = PDCcont_create(cname, PDCprop_create(PDC_CONT_CREATE, pdc));
    CHECK(cont != 0, "PDCcont_create failed");
    test_shapeless(pdc, cont, shapeless);
    test_no_transfers();
    test_del_unset_tags(pdc, cont, tagged);
    test_cont_iter(pdc, cont, cname);
    test_metadata_server_id(pdc, cont);
    snprintf(tagged, sizeof tagged, "compat-query-%d", (int)getpid());
    test_rest_of_api(pdc, cont, tagged);
    CHECK(PDCcont_del(cont) == SUCCEED && PDCcont_close(cont) == SUCCEED, "container");
    CHECK(PDCclose(pdc) == SUCCEED, "PDCclose failed");
    printf("compat: ok\n");
    return 0;
}
