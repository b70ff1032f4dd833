/*
 * bigcont: a container of more objects than one reply could list before
 * (run.sh makes them with pdc obj create), listed by PDCobj_iter_* and
 * PDCcont_get_objids, then deleted by PDCcont_del. run.sh counts the
 * failing calls: 1 (opening the deleted container).
 *
 * usage: bigcont CONT N
 */
#include "check.h"
#include "pdc.h"

int main(int argc, char **argv)
{
    CHECK(argc == 3, "usage: bigcont CONT N");
    const char *cname = argv[1];
    long        want  = atol(argv[2]);

    pdcid_t pdc = PDCinit("bigcont");
    CHECK(pdc != 0, "PDCinit failed");
    pdcid_t cont = PDCcont_open(cname, pdc);
    CHECK(cont != 0, "PDCcont_open(%s) failed", cname);

    double   t0   = now();
    long     n    = 0;
    uint64_t last = 0;
    for (obj_handle *h = PDCobj_iter_start(cont); !PDCobj_iter_null(h); h = PDCobj_iter_next(h, cont)) {
        struct pdc_obj_info *info = PDCobj_iter_get_info(h);
        CHECK(info != NULL, "PDCobj_iter_get_info of object %ld failed", n);
        CHECK(info->meta_id > last, "object %ld: meta id %llu after %llu", n, (unsigned long long)info->meta_id,
              (unsigned long long)last);
        CHECK(strncmp(info->name, "big-", 4) == 0 && info->obj_pt->ndim == 1 && info->obj_pt->dims[0] == 4,
              "object %ld: %s, %zu dims", n, info->name, info->obj_pt->ndim);
        last = info->meta_id;
        n++;
        free(info);
    }
    CHECK(n == want, "PDCobj_iter_* listed %ld objects, want %ld", n, want);
    printf("PDCobj_iter: %ld objects in %.2f s\n", n, now() - t0);

    t0           = now();
    int      nobj = -1;
    pdcid_t *ids  = NULL;
    CHECK(PDCcont_get_objids(cont, &nobj, &ids) == SUCCEED, "PDCcont_get_objids failed");
    CHECK(nobj == want && ids != NULL, "PDCcont_get_objids: %d ids, want %ld", nobj, want);
    for (int i = 1; i < nobj; i++)
        CHECK(ids[i - 1] < ids[i], "ids not in increasing order at %d", i);
    CHECK(ids[nobj - 1] == last, "the last id %llu is not the iterator's last %llu", (unsigned long long)ids[nobj - 1],
          (unsigned long long)last);
    free(ids);
    printf("PDCcont_get_objids: %d ids in %.2f s\n", nobj, now() - t0);

    t0 = now();
    CHECK(PDCcont_del(cont) == SUCCEED, "PDCcont_del failed");
    printf("PDCcont_del: %ld objects in %.2f s\n", n, now() - t0);
    CHECK(PDCcont_close(cont) == SUCCEED, "PDCcont_close failed");
    CHECK(PDCcont_open(cname, pdc) == 0, "opened the deleted container");
    CHECK(PDCclose(pdc) == SUCCEED, "PDCclose failed");
    return 0;
}
