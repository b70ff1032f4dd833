/*
 * objids: container membership by id (PDCcont_put_objids, _get_objids,
 * _del_objids) across two metadata servers, with the failures each call
 * must report. run.sh counts the failing calls: 11.
 */
#include <unistd.h>

#include "check.h"
#include "pdc.h"

#define NOBJ 6

/* get returns the container's ids (malloc'd, NULL for none) in *ids. */
static int get(pdcid_t cont, pdcid_t **ids)
{
    int n  = -1;
    *ids   = (pdcid_t *)1; /* must be overwritten */
    CHECK(PDCcont_get_objids(cont, &n, ids) == SUCCEED, "PDCcont_get_objids(%llu) failed", (unsigned long long)cont);
    for (int i = 1; i < n; i++)
        CHECK((*ids)[i - 1] < (*ids)[i], "ids not in increasing order at %d", i);
    return n;
}

static int has(const pdcid_t *ids, int n, pdcid_t id)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == id)
            return 1;
    return 0;
}

static pdcid_t meta_id(pdcid_t obj, uint32_t *server)
{
    struct pdc_obj_info *info = PDCobj_get_info(obj);
    CHECK(info != NULL, "PDCobj_get_info failed");
    pdcid_t id = info->meta_id;
    if (server != NULL)
        *server = info->metadata_server_id;
    free(info);
    return id;
}

int main(void)
{
    char hname[64], bname[64], ename[64], oname[64];
    snprintf(hname, sizeof hname, "home-%d", (int)getpid());
    snprintf(bname, sizeof bname, "box-%d", (int)getpid());
    snprintf(ename, sizeof ename, "empty-%d", (int)getpid());

    pdcid_t pdc = PDCinit("objids");
    CHECK(pdc != 0, "PDCinit failed");
    pdcid_t cprop = PDCprop_create(PDC_CONT_CREATE, pdc);
    pdcid_t home  = PDCcont_create(hname, cprop);
    pdcid_t box   = PDCcont_create(bname, cprop);
    pdcid_t empty = PDCcont_create(ename, cprop);
    CHECK(home != 0 && box != 0 && empty != 0, "PDCcont_create failed");
    pdcid_t  prop    = PDCprop_create(PDC_OBJ_CREATE, pdc);
    uint64_t dims[1] = {8};
    CHECK(PDCprop_set_obj_dims(prop, 1, dims) == SUCCEED && PDCprop_set_obj_type(prop, PDC_INT) == SUCCEED, "prop");

    pdcid_t  objs[NOBJ], metas[NOBJ];
    uint32_t servers = 0;
    for (int i = 0; i < NOBJ; i++) {
        snprintf(oname, sizeof oname, "objids-%d-%d", (int)getpid(), i);
        objs[i] = PDCobj_create(home, oname, prop);
        CHECK(objs[i] != 0, "PDCobj_create %s failed", oname);
        uint32_t server = 0;
        metas[i]        = meta_id(objs[i], &server);
        servers |= 1u << server;
    }
    CHECK(servers == 3, "the objects are not on both metadata servers (mask %u)", servers);
    snprintf(oname, sizeof oname, "objids-own-%d", (int)getpid());
    pdcid_t own = PDCobj_create(box, oname, prop);
    CHECK(own != 0, "PDCobj_create in the box failed");
    pdcid_t own_meta = meta_id(own, NULL);

    /* Add, and add again. */
    CHECK(PDCcont_put_objids(box, NOBJ, objs) == SUCCEED, "PDCcont_put_objids failed");
    pdcid_t twice[3] = {objs[0], objs[0], own};
    CHECK(PDCcont_put_objids(box, 3, twice) == SUCCEED, "adding members again failed");
    CHECK(PDCcont_put_objids(box, 0, NULL) == SUCCEED, "adding nothing failed");

    pdcid_t *ids = NULL;
    int      n   = get(box, &ids);
    CHECK(n == NOBJ + 1, "the box has %d objects, want %d", n, NOBJ + 1);
    for (int i = 0; i < NOBJ; i++)
        CHECK(has(ids, n, metas[i]), "object %d is not listed", i);
    CHECK(has(ids, n, own_meta), "the box's own object is not listed");
    free(ids);
    n = get(empty, &ids);
    CHECK(n == 0 && ids == NULL, "empty container: %d ids, %p", n, (void *)ids);

    /* An id from get_objids opens the member, with the box; iteration
     * sees every member. */
    pdcid_t opened = pdc_obj_open_by_meta_id(box, metas[1], 0);
    CHECK(opened != 0, "pdc_obj_open_by_meta_id of an added member failed");
    CHECK(meta_id(opened, NULL) == metas[1], "opened another object");
    CHECK(PDCobj_close(opened) == SUCCEED, "PDCobj_close failed");
    int         seen = 0;
    obj_handle *h    = PDCobj_iter_start(box);
    for (; !PDCobj_iter_null(h); h = PDCobj_iter_next(h, box))
        seen++;
    CHECK(seen == NOBJ + 1, "iterated over %d objects of the box, want %d", seen, NOBJ + 1);

    /* Remove two, one per call form. */
    CHECK(PDCcont_del_objids(box, 2, objs) == SUCCEED, "PDCcont_del_objids failed");
    n = get(box, &ids);
    CHECK(n == NOBJ - 1 && !has(ids, n, metas[0]) && !has(ids, n, metas[1]), "after del: %d objects", n);
    free(ids);

    /* Bad input: each fails, says why, and changes nothing. */
    CHECK(PDCcont_del_objids(home, 1, &objs[0]) == FAIL, "removed an object from its home");        /* 1 */
    CHECK(PDCcont_del_objids(empty, 1, &objs[2]) == FAIL, "removed a non-member");                   /* 2 */
    CHECK(PDCcont_put_objids(empty, -1, objs) == FAIL, "nobj -1 accepted");                          /* 3 */
    CHECK(PDCcont_put_objids(empty, 2, NULL) == FAIL, "NULL obj_ids accepted");                      /* 4 */
    CHECK(PDCcont_put_objids(prop, 1, objs) == FAIL, "a property taken for a container");            /* 5 */
    pdcid_t closed_cont = PDCcont_open(ename, pdc);
    CHECK(closed_cont != 0 && PDCcont_close(closed_cont) == SUCCEED, "open and close a container");
    CHECK(PDCcont_put_objids(closed_cont, 1, objs) == FAIL, "a closed container handle accepted");   /* 6 */
    snprintf(oname, sizeof oname, "objids-closed-%d", (int)getpid());
    pdcid_t closed_obj = PDCobj_create(home, oname, prop);
    CHECK(closed_obj != 0 && PDCobj_close(closed_obj) == SUCCEED, "create and close an object");
    pdcid_t with_closed[2] = {objs[2], closed_obj};
    CHECK(PDCcont_put_objids(empty, 2, with_closed) == FAIL, "a closed object handle accepted");     /* 7 */
    snprintf(oname, sizeof oname, "objids-gone-%d", (int)getpid());
    pdcid_t gone = PDCobj_create(home, oname, prop);
    CHECK(gone != 0 && PDCobj_del(gone) == SUCCEED, "create and delete an object");
    pdcid_t with_gone[2] = {objs[3], gone};
    CHECK(PDCcont_put_objids(empty, 2, with_gone) == FAIL, "a deleted object added");                /* 8 */
    CHECK(PDCcont_get_objids(box, NULL, &ids) == FAIL, "get_objids into NULL");                      /* 9 */
    CHECK(PDCcont_get_objids(prop, &n, &ids) == FAIL, "get_objids of a property");                   /* 10 */
    n = get(empty, &ids);
    CHECK(n == 0 && ids == NULL, "failed calls changed the empty container: %d ids", n);
    CHECK(PDCobj_close(gone) == SUCCEED, "PDCobj_close of a deleted object failed");

    /* Deleting an object takes it out of the box too. */
    CHECK(PDCobj_del(objs[3]) == SUCCEED, "PDCobj_del failed");
    n = get(box, &ids);
    CHECK(n == NOBJ - 2 && !has(ids, n, metas[3]), "after deleting a member: %d objects", n);
    free(ids);

    /* Deleting the box deletes its own object only. */
    CHECK(PDCobj_close(own) == SUCCEED, "PDCobj_close failed");
    CHECK(PDCcont_del(box) == SUCCEED, "PDCcont_del failed");
    n = get(home, &ids);
    CHECK(n == NOBJ, "home has %d objects after the box went, want %d", n, NOBJ); /* 5 left + closed_obj */
    CHECK(has(ids, n, metas[4]) && has(ids, n, metas[5]), "members of the deleted box are gone");
    free(ids);
    CHECK(PDCcont_get_objids(box, &n, &ids) == FAIL, "listed a deleted container");                 /* 11 */

    for (int i = 0; i < NOBJ; i++)
        CHECK(PDCobj_close(objs[i]) == SUCCEED, "PDCobj_close failed");
    CHECK(PDCcont_close(box) == SUCCEED && PDCcont_close(home) == SUCCEED && PDCcont_close(empty) == SUCCEED,
          "PDCcont_close failed");
    CHECK(PDCclose(pdc) == SUCCEED, "PDCclose failed");
    printf("objids: every call behaved\n");
    return 0;
}
