/*
 * cont: properties and containers, as a PDC program uses them (compare
 * PDC's create_cont.c, open_cont.c, cont_getid.c, cont_info.c, cont_del.c
 * and cont_life.c), with the failures each call must report.
 */
#include <unistd.h>

#include "check.h"
#include "pdc.h"

int main(void)
{
    char name[64], tname[64];
    snprintf(name, sizeof name, "c-%d", (int)getpid());
    snprintf(tname, sizeof tname, "t-%d", (int)getpid());

    pdcid_t pdc = PDCinit("pdc");
    CHECK(pdc != 0, "PDCinit failed");
    pdcid_t prop = PDCprop_create(PDC_CONT_CREATE, pdc);
    CHECK(prop != 0, "PDCprop_create failed");

    /* Create, and create again: a handle to the same container. */
    pdcid_t cont = PDCcont_create(name, prop);
    CHECK(cont != 0, "PDCcont_create failed");
    pdcid_t again = PDCcont_create_col(name, prop);
    CHECK(again != 0 && again != cont, "PDCcont_create_col of an existing name: %llu", (unsigned long long)again);
    pdcid_t opened = PDCcont_open(name, pdc);
    CHECK(opened != 0, "PDCcont_open failed");
    pdcid_t opened_col = PDCcont_open_col(name, pdc);
    CHECK(opened_col != 0, "PDCcont_open_col failed");

    /* get_id returns the oldest open handle, which then owes one more close. */
    pdcid_t got = PDCcont_get_id(name, pdc);
    CHECK(got == cont, "PDCcont_get_id returned %llu, want %llu", (unsigned long long)got,
          (unsigned long long)cont);
    CHECK(PDCcont_close(got) == SUCCEED, "PDCcont_close of get_id's handle failed");

    struct pdc_cont_info *info = PDCcont_get_info(name);
    CHECK(info != NULL, "PDCcont_get_info failed");
    CHECK(strcmp(info->name, name) == 0, "info names %s, want %s", info->name, name);
    CHECK(info->local_id == cont, "info->local_id %llu, want %llu", (unsigned long long)info->local_id,
          (unsigned long long)cont);
    CHECK(info->meta_id != 0, "info->meta_id is 0");
    uint64_t meta_id = info->meta_id;
    free(info->name);
    free(info);

    /* Transient containers, made persistent. */
    CHECK(PDCprop_set_cont_lifetime(prop, PDC_TRANSIENT) == SUCCEED, "PDCprop_set_cont_lifetime failed");
    pdcid_t tcont = PDCcont_create(tname, prop);
    CHECK(tcont != 0, "PDCcont_create of a transient container failed");
    CHECK(PDCcont_persist(tcont) == SUCCEED, "PDCcont_persist failed");
    CHECK(PDCcont_close(tcont) == SUCCEED, "PDCcont_close failed");

    /* Tags keep the type they were stored with. */
    const char *units = "kelvin";
    int64_t     step  = 42;
    CHECK(PDCcont_put_tag(cont, "units", units, PDC_STRING, strlen(units) + 1) == SUCCEED, "put_tag units failed");
    CHECK(PDCcont_put_tag(cont, "step", &step, PDC_INT64, sizeof step) == SUCCEED, "put_tag step failed");
    void          *value = NULL;
    pdc_var_type_t type  = PDC_UNKNOWN;
    psize_t        size  = 0;
    CHECK(PDCcont_get_tag(cont, "units", &value, &type, &size) == SUCCEED, "get_tag units failed");
    CHECK(type == PDC_STRING && size == 7 && strcmp(value, "kelvin") == 0, "units: type %d size %llu", type, size);
    free(value);
    CHECK(PDCcont_get_tag(opened, "step", &value, &type, &size) == SUCCEED, "get_tag step failed");
    CHECK(type == PDC_INT64 && size == 8 && *(int64_t *)value == 42, "step: type %d size %llu", type, size);
    free(value);
    CHECK(PDCcont_del_tag(cont, "step") == SUCCEED, "del_tag failed");
    CHECK(PDCcont_get_tag(cont, "step", &value, &type, &size) == SUCCEED, "get_tag of a deleted tag failed");
    CHECK(value == NULL && size == 0 && type == PDC_UNKNOWN, "deleted tag: %p, %llu bytes, type %d", value, size, type);
    CHECK(PDCcont_del_tag(cont, "step") == SUCCEED, "deleting a tag not set failed");
    CHECK(PDCcont_get_tag(cont, "units", NULL, &type, &size) == FAIL, "get_tag into NULL");

    /* A second connection sees the same containers; closing it leaves the
     * first one's handles alone. */
    pdcid_t pdc2 = PDCinit("second");
    CHECK(pdc2 != 0 && pdc2 != pdc, "second PDCinit failed");
    pdcid_t other = PDCcont_open(name, pdc2);
    CHECK(other != 0, "PDCcont_open through the second connection failed");
    CHECK(PDCclose(pdc2) == SUCCEED, "PDCclose of the second connection failed");
    CHECK(PDCcont_close(other) == FAIL, "a handle of a closed connection is still open");

    /* get_info of a container with no handle open here asks the servers. */
    info = PDCcont_get_info(tname);
    CHECK(info != NULL, "PDCcont_get_info of a closed container failed");
    CHECK(info->local_id == 0 && info->meta_id != 0 && info->meta_id != meta_id, "info of %s: local %llu meta %llu",
          tname, (unsigned long long)info->local_id, (unsigned long long)info->meta_id);
    free(info->name);
    free(info);

    /* Delete: the handle stays until closed; the name is gone. */
    CHECK(PDCcont_del(cont) == SUCCEED, "PDCcont_del failed");
    CHECK(PDCcont_close(cont) == SUCCEED, "PDCcont_close after del failed");
    CHECK(PDCcont_open(name, pdc) == 0, "opened a deleted container");
    CHECK(PDCcont_get_info("no-such-container") == NULL, "info of a container that does not exist");

    /* Bad input: each fails and says why; the process goes on. */
    CHECK(PDCcont_close(cont) == FAIL, "closed a closed handle");
    CHECK(PDCcont_close(prop) == FAIL, "closed a property as a container");
    CHECK(PDCcont_close(0) == FAIL, "closed handle 0");
    CHECK(PDCcont_create(NULL, prop) == 0, "created a container named NULL");
    CHECK(PDCcont_create("x", 0) == 0, "created a container with property 0");
    CHECK(PDCcont_create("x", pdc) == 0, "created a container with a connection as property");
    CHECK(PDCcont_open("x", prop) == 0, "opened through a property as connection");
    CHECK(PDCprop_create((pdc_prop_type_t)42, pdc) == 0, "created a property of type 42");
    CHECK(PDCprop_set_cont_lifetime(prop, (pdc_lifetime_t)7) == FAIL, "set lifetime 7");
    CHECK(PDCcont_persist(prop) == FAIL, "persisted a property");
    CHECK(PDCcont_del(12345678) == FAIL, "deleted an unknown handle");

    /* PDCclose closes what was opened through the connection. */
    CHECK(PDCclose(pdc) == SUCCEED, "PDCclose failed");
    CHECK(PDCprop_close(prop) == FAIL, "a property outlived its connection");
    CHECK(PDCcont_close(again) == FAIL, "a container outlived its connection");
    printf("containers: every call behaved\n");
    return 0;
}
