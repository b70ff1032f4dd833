/*
 * obj_bad: bad input to object, region and transfer calls. Each fails,
 * prints its one line, and the program goes on.
 */
#include "check.h"
#include "pdc.h"

int main(void)
{
    pdcid_t  pdc     = PDCinit("pdc");
    pdcid_t  cprop   = PDCprop_create(PDC_CONT_CREATE, pdc);
    pdcid_t  cont    = PDCcont_create("bad", cprop);
    pdcid_t  prop    = PDCprop_create(PDC_OBJ_CREATE, pdc);
    uint64_t dims[2] = {4, 4}, zero2[2] = {0, 0}, two2[2] = {2, 2}, far[2] = {3, 3}, four = 4, zero = 0;
    CHECK(pdc == 1 && cprop == 2 && cont == 3 && prop == 4, "setup: %llu %llu %llu %llu", (unsigned long long)pdc,
          (unsigned long long)cprop, (unsigned long long)cont, (unsigned long long)prop);
    CHECK(PDCprop_set_obj_dims(prop, 2, dims) == SUCCEED, "dims");
    CHECK(PDCobj_create(cont, "o", prop) == 0, "created with dims and no type");
    CHECK(PDCprop_set_obj_type(prop, PDC_INT) == SUCCEED, "type");
    pdcid_t obj = PDCobj_create(cont, "o", prop);
    CHECK(obj == 5, "obj %llu", (unsigned long long)obj);
    int buf[16] = {0};

    CHECK(PDCprop_set_obj_dims(prop, 0, NULL) == FAIL, "dims NULL");
    CHECK(PDCprop_set_obj_type(prop, (pdc_var_type_t)77) == FAIL, "type 77");
    CHECK(PDCprop_set_obj_type(cont, PDC_INT) == FAIL, "type of a container");
    CHECK(PDCobj_create(cont, NULL, prop) == 0, "name NULL");
    CHECK(PDCobj_create(prop, "o2", prop) == 0, "property as container");
    CHECK(PDCobj_open("missing", pdc) == 0, "opened a missing object");

    pdcid_t in   = PDCregion_create(2, zero2, two2);
    pdcid_t out  = PDCregion_create(2, far, two2);
    pdcid_t line = PDCregion_create(1, &zero, &four);
    CHECK(in == 6 && out == 7 && line == 8, "regions %llu %llu %llu", (unsigned long long)in, (unsigned long long)out,
          (unsigned long long)line);
    CHECK(PDCregion_create(2, NULL, two2) == 0, "region with NULL offset");
    CHECK(PDCregion_transfer_create(buf, PDC_WRITE, obj, in, out) == 0, "region outside dims");
    CHECK(PDCregion_transfer_create(buf, PDC_WRITE, obj, line, line) == 0, "ndim mismatch");
    CHECK(PDCregion_transfer_create(NULL, PDC_WRITE, obj, in, in) == 0, "NULL buffer");
    CHECK(PDCregion_transfer_create(buf, PDC_WRITE, in, in, in) == 0, "region as object");
    CHECK(PDCregion_transfer_create(buf, PDC_READ, obj, obj, in) == 0, "object as region");
    CHECK(PDCregion_transfer_start(obj) == FAIL, "started an object");
    CHECK(PDCregion_transfer_start_all(NULL, 3) == FAIL, "start_all NULL");
    pdc_transfer_status_t st;
    CHECK(PDCregion_transfer_status(in, &st) == FAIL, "status of a region");
    pdcid_t t = PDCregion_transfer_create(buf, PDC_WRITE, obj, in, in);
    CHECK(t == 9, "transfer %llu", (unsigned long long)t);
    CHECK(PDCregion_transfer_wait(t) == FAIL, "waited for a transfer never started");
    CHECK(PDCregion_transfer_status(t, NULL) == FAIL, "status into NULL");
    CHECK(PDCregion_transfer_close(t) == SUCCEED, "close");
    CHECK(PDCregion_transfer_close(t) == FAIL, "closed twice");
    CHECK(PDCobj_get_dims(obj, NULL, NULL) == FAIL, "get_dims into NULL");
    CHECK(PDCobj_get_data(obj, NULL, 64) == FAIL, "get_data into NULL");
    CHECK(PDCobj_get_info(cont) == NULL, "get_info of a container");
    CHECK(PDCobj_set_dims(obj, 1, &four) == FAIL, "set_dims changes ndim");
    CHECK(pdc_region_transfer_now(obj, buf, PDC_WRITE, 2, far, two2) == FAIL, "transfer_now outside dims");
    CHECK(pdc_region_transfer_now(obj, NULL, PDC_READ, 2, zero2, two2) == FAIL, "transfer_now into NULL");
    CHECK(pdc_region_transfer_now(obj, buf, (pdc_access_t)9, 2, zero2, two2) == FAIL, "transfer_now access 9");
    CHECK(pdc_region_transfer_now(cont, buf, PDC_WRITE, 2, zero2, two2) == FAIL, "transfer_now on a container");

    /* Reports kept, not printed: a binding raises them instead. */
    char last[512];
    pdc_report_errors(0);
    CHECK(PDCobj_open("missing-quietly", pdc) == 0, "opened a missing object");
    CHECK(pdc_last_error(last, sizeof last) > 0 && strstr(last, "missing-quietly") != NULL, "last error %s", last);
    /* Its length alone: buf NULL, whatever len says; a len past the line
     * copies the line and its NUL, no more. */
    size_t n = pdc_last_error(NULL, 0);
    CHECK(n == strlen(last) && pdc_last_error(NULL, sizeof last) == n, "length of the last error");
    CHECK(pdc_last_error(last, (size_t)-1) == n && strlen(last) == n, "last error with len SIZE_MAX");
    pdc_report_errors(1);

    /* The process goes on: the object still works. */
    pdcid_t ok = PDCregion_transfer_create(buf, PDC_WRITE, obj, in, in);
    CHECK(ok != 0 && PDCregion_transfer_start(ok) == SUCCEED && PDCregion_transfer_wait(ok) == SUCCEED, "a good transfer");
    CHECK(PDCregion_transfer_close(ok) == SUCCEED && PDCobj_close(obj) == SUCCEED, "close");
    CHECK(PDCobj_close(obj) == FAIL, "closed an object twice");
    CHECK(PDCclose(pdc) == SUCCEED, "PDCclose");
    printf("obj_bad: every call behaved\n");
    return 0;
}
