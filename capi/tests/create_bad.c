/*
 * create_bad: names, dims and tag values the servers would refuse (issue
 * 25, case 9). Each call fails before any request, prints its one line
 * naming what is wrong, and stores nothing; the same calls with good input
 * still work.
 */
#include <stdint.h>
#include <unistd.h>

#include "check.h"
#include "pdc.h"

int main(void)
{
    pdcid_t pdc   = PDCinit("pdc");
    pdcid_t cprop = PDCprop_create(PDC_CONT_CREATE, pdc);
    CHECK(pdc != 0 && cprop != 0, "setup");
    char cname[64], grows_name[64], good_name[64];
    snprintf(cname, sizeof cname, "create-bad-%d", (int)getpid());
    snprintf(grows_name, sizeof grows_name, "grows-%d", (int)getpid());
    snprintf(good_name, sizeof good_name, "good-%d", (int)getpid());
    pdcid_t cont = PDCcont_create(cname, cprop);
    CHECK(cont != 0, "PDCcont_create");

    /* Names with control characters or that are not UTF-8. */
    CHECK(PDCcont_create("two\nlines", cprop) == 0, "a container name with a newline");
    pdcid_t  prop    = PDCprop_create(PDC_OBJ_CREATE, pdc);
    uint64_t dims[2] = {4, 4};
    CHECK(PDCprop_set_obj_dims(prop, 2, dims) == SUCCEED && PDCprop_set_obj_type(prop, PDC_INT64) == SUCCEED, "props");
    CHECK(PDCobj_create(cont, "esc\x1b[2J", prop) == 0, "an object name with an escape sequence");
    CHECK(PDCobj_create(cont, "bad\xff", prop) == 0, "an object name that is not UTF-8");

    /* Dims whose bytes pass 2^63. */
    pdcid_t  big        = PDCprop_create(PDC_OBJ_CREATE, pdc);
    uint64_t huge[2]    = {(uint64_t)1 << 40, (uint64_t)1 << 21};
    uint64_t growing[2] = {PDC_SIZE_UNLIMITED, 4};
    CHECK(PDCprop_set_obj_dims(big, 2, huge) == SUCCEED && PDCprop_set_obj_type(big, PDC_INT64) == SUCCEED, "big props");
    CHECK(PDCobj_create(cont, "huge", big) == 0, "an object of 2^64 bytes");

    /* Good input still works: an unlimited first dim, a good name. */
    CHECK(PDCprop_set_obj_dims(big, 2, growing) == SUCCEED, "unlimited dims");
    pdcid_t grows = PDCobj_create(cont, grows_name, big);
    CHECK(grows != 0, "an object with an unlimited first dim");
    pdcid_t obj = PDCobj_create(cont, good_name, prop);
    CHECK(obj != 0, "a good object");
    CHECK(PDCobj_set_dims(obj, 2, huge) == FAIL, "set_dims to 2^64 bytes");

    /* Typed tags of the wrong width, tag names with control characters. */
    int32_t small = 7;
    double  d[2]  = {1, 2};
    int64_t step  = 42;
    CHECK(PDCobj_put_tag(obj, "step", &small, PDC_INT64, sizeof small) == FAIL, "a 4-byte int64 tag");
    CHECK(PDCobj_put_tag(obj, "pair", d, PDC_DOUBLE, sizeof d) == FAIL, "a 16-byte double tag");
    CHECK(PDCobj_put_tag(obj, "tab\tkey", "v", PDC_STRING, 2) == FAIL, "a tag name with a tab");
    CHECK(PDCobj_put_tag(obj, "step", &step, PDC_INT64, sizeof step) == SUCCEED, "a good int64 tag");

    CHECK(PDCobj_close(obj) == SUCCEED && PDCobj_close(grows) == SUCCEED, "close");
    CHECK(PDCclose(pdc) == SUCCEED, "PDCclose");
    printf("create_bad: every call behaved\n");
    return 0;
}
