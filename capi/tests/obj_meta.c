/*
 * obj_meta: object properties and objects as a PDC program uses them.
 * "obj_meta create NAME" creates NAME with properties, checks a duplicate
 * is refused and that a second PDCinit opens it; "obj_meta open NAME",
 * run as another process, opens it and checks what the first set.
 */
#include "check.h"
#include "pdc.h"

int main(int argc, char **argv)
{
    CHECK(argc == 3, "usage: obj_meta create|open NAME");
    const char *name = argv[2];
    pdcid_t     pdc  = PDCinit("pdc");
    CHECK(pdc != 0, "PDCinit failed");

    if (strcmp(argv[1], "open") == 0) {
        pdcid_t obj = PDCobj_open(name, pdc);
        CHECK(obj != 0, "PDCobj_open(%s) failed", name);
        int       ndim = 0;
        uint64_t *dims = NULL;
        CHECK(PDCobj_get_dims(obj, &ndim, &dims) == SUCCEED, "get_dims failed");
        CHECK(ndim == 2 && dims[0] == 20 && dims[1] == 30, "dims %d: %llu x %llu", ndim, (unsigned long long)dims[0],
              (unsigned long long)dims[1]);
        free(dims);
        struct pdc_obj_info *info = PDCobj_get_info(obj);
        CHECK(info != NULL && strcmp(info->name, name) == 0 && info->obj_pt->type == PDC_DOUBLE &&
                  info->obj_pt->region_partition == PDC_OBJ_STATIC,
              "info");
        free(info);
        CHECK(PDCobj_close(obj) == SUCCEED, "close failed");
        CHECK(PDCclose(pdc) == SUCCEED, "PDCclose failed");
        printf("obj_meta open: every call behaved\n");
        return 0;
    }

    pdcid_t cprop = PDCprop_create(PDC_CONT_CREATE, pdc);
    pdcid_t cont  = PDCcont_create("objects", cprop);
    CHECK(cont != 0, "PDCcont_create failed");
    pdcid_t prop = PDCprop_create(PDC_OBJ_CREATE, pdc);
    CHECK(prop != 0, "PDCprop_create(PDC_OBJ_CREATE) failed");
    uint64_t dims[2] = {10, 30};
    double   mine[4];
    CHECK(PDCprop_set_obj_dims(prop, 2, dims) == SUCCEED, "set dims");
    CHECK(PDCprop_set_obj_type(prop, PDC_DOUBLE) == SUCCEED, "set type");
    CHECK(PDCprop_set_obj_transfer_region_type(prop, PDC_OBJ_STATIC) == SUCCEED, "set partition");
    CHECK(PDCprop_set_obj_consistency_semantics(prop, PDC_CONSISTENCY_EVENTUAL) == SUCCEED, "set consistency");
    CHECK(PDCprop_set_obj_app_name(prop, "obj_meta") == SUCCEED, "set app name");
    CHECK(PDCprop_set_obj_time_step(prop, 0) == SUCCEED, "set time step");
    CHECK(PDCprop_set_obj_user_id(prop, 1000) == SUCCEED, "set user id");
    CHECK(PDCprop_set_obj_data_loc(prop, "/tmp") == SUCCEED, "set data loc");
    CHECK(PDCprop_set_obj_tags(prop, "kind=test") == SUCCEED, "set tags");
    CHECK(PDCprop_set_obj_buf(prop, mine) == SUCCEED, "set buf");

    pdcid_t dup = PDCprop_obj_dup(prop);
    CHECK(dup != 0 && dup != prop, "dup failed");
    struct pdc_obj_prop *pi = PDCobj_prop_get_info(dup);
    CHECK(pi != NULL && pi->obj_prop_id == dup && pi->ndim == 2 && pi->dims[1] == 30 && pi->type == PDC_DOUBLE &&
              pi->region_partition == PDC_OBJ_STATIC && pi->consistency == PDC_CONSISTENCY_EVENTUAL,
          "prop info");
    free(pi);

    pdcid_t obj = PDCobj_create(cont, name, prop);
    CHECK(obj != 0, "PDCobj_create failed");
    void **buf = PDCobj_buf_retrieve(obj);
    CHECK(buf != NULL && *buf == mine, "buf_retrieve");
    /* The same identity again: refused, nothing left behind. */
    CHECK(PDCobj_create(cont, name, dup) == 0, "created %s twice", name);

    struct pdc_obj_info *info = PDCobj_get_info(obj);
    CHECK(info != NULL, "get_info failed");
    CHECK(strcmp(info->name, name) == 0 && info->local_id == obj && info->meta_id != 0 && info->obj_pt->ndim == 2 &&
              info->obj_pt->dims[0] == 10,
          "info of %s", info->name);
    free(info);

    /* Grow, then a second connection sees the new dims. */
    uint64_t grown[2] = {20, 30};
    CHECK(PDCobj_set_dims(obj, 2, grown) == SUCCEED, "set_dims failed");
    pdcid_t pdc2 = PDCinit("second");
    CHECK(pdc2 != 0, "second PDCinit");
    pdcid_t other = PDCobj_open_col(name, pdc2);
    CHECK(other != 0 && other != obj, "open through the second connection");
    int       ndim = 0;
    uint64_t *got  = NULL;
    CHECK(PDCobj_get_dims(other, &ndim, &got) == SUCCEED && ndim == 2 && got[0] == 20, "dims seen by pdc2");
    free(got);
    CHECK(PDCobj_flush_start(obj) == SUCCEED && PDCobj_flush_all_start() == SUCCEED, "flush");
    CHECK(PDCclose(pdc2) == SUCCEED, "PDCclose of pdc2");
    CHECK(PDCobj_close(other) == FAIL, "an object outlived its connection");

    /* A scratch object, deleted. */
    pdcid_t tmp = PDCobj_create(cont, "scratch", dup);
    CHECK(tmp != 0 && PDCobj_del(tmp) == SUCCEED && PDCobj_close(tmp) == SUCCEED, "delete scratch");
    CHECK(PDCobj_open("scratch", pdc) == 0, "opened a deleted object");

    CHECK(PDCobj_close(obj) == SUCCEED, "close");
    CHECK(PDCprop_close(prop) == SUCCEED && PDCprop_close(dup) == SUCCEED, "prop close");
    CHECK(PDCcont_close(cont) == SUCCEED, "cont close");
    CHECK(PDCclose(pdc) == SUCCEED, "PDCclose");
    printf("obj_meta create: every call behaved\n");
    return 0;
}
