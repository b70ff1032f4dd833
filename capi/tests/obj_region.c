/*
 * obj_region: region transfers as a PDC program uses them: a 2-D write
 * then a read of a sub-block into a buffer of another shape, start_all /
 * wait_all, the status sequence, pdc_region_transfer_now, POSIX consistency,
 * put_data / get_data.
 */
#include <unistd.h>

#include "check.h"
#include "pdc.h"

#define ROWS 16
#define COLS 12

static pdcid_t make_obj(pdcid_t pdc, pdcid_t cont, const char *name, pdc_consistency_t c)
{
    pdcid_t  prop    = PDCprop_create(PDC_OBJ_CREATE, pdc);
    uint64_t dims[2] = {ROWS, COLS};
    CHECK(prop != 0 && PDCprop_set_obj_dims(prop, 2, dims) == SUCCEED && PDCprop_set_obj_type(prop, PDC_INT) == SUCCEED &&
              PDCprop_set_obj_consistency_semantics(prop, c) == SUCCEED,
          "object property");
    pdcid_t obj = PDCobj_create(cont, name, prop);
    CHECK(obj != 0, "PDCobj_create(%s)", name);
    PDCprop_close(prop);
    return obj;
}

int main(void)
{
    char name[64];
    snprintf(name, sizeof name, "grid-%d", (int)getpid());
    pdcid_t pdc  = PDCinit("pdc");
    pdcid_t cont = PDCcont_create("regions", PDCprop_create(PDC_CONT_CREATE, pdc));
    CHECK(pdc != 0 && cont != 0, "setup");
    pdcid_t obj = make_obj(pdc, cont, name, PDC_CONSISTENCY_DEFAULT);

    /* Write the whole object from a 1-D buffer, closing regions at once. */
    int      all[ROWS * COLS];
    uint64_t zero = 0, n = ROWS * COLS, off2[2] = {0, 0}, size2[2] = {ROWS, COLS};
    for (int i = 0; i < ROWS * COLS; i++)
        all[i] = i;
    pdcid_t local  = PDCregion_create(1, &zero, &n);
    pdcid_t remote = PDCregion_create(2, off2, size2);
    pdcid_t w      = PDCregion_transfer_create(all, PDC_WRITE, obj, local, remote);
    CHECK(w != 0, "transfer_create");
    CHECK(PDCregion_close(local) == SUCCEED && PDCregion_close(remote) == SUCCEED, "region close");
    pdc_transfer_status_t st;
    CHECK(PDCregion_transfer_status(w, &st) == SUCCEED && st == PDC_TRANSFER_STATUS_NOT_FOUND, "status before start %d", st);
    CHECK(PDCregion_transfer_start(w) == SUCCEED, "start");
    CHECK(PDCregion_transfer_wait(w) == SUCCEED, "wait");
    CHECK(PDCregion_transfer_status(w, &st) == SUCCEED && st == PDC_TRANSFER_STATUS_COMPLETE, "status after wait %d", st);
    CHECK(PDCregion_transfer_status(w, &st) == SUCCEED && st == PDC_TRANSFER_STATUS_NOT_FOUND, "status again %d", st);
    CHECK(PDCregion_transfer_close(w) == SUCCEED, "close");

    /* Read object rows 5..7, cols 2..5 (3x4) into a buffer at (1, 1): the
     * buffer is shaped as the local region's end, 4x5. */
    int      sub[4][5];
    uint64_t loff[2] = {1, 1}, lsize[2] = {3, 4}, roff[2] = {5, 2}, rsize[2] = {3, 4};
    memset(sub, 0xff, sizeof sub);
    local  = PDCregion_create(2, loff, lsize);
    remote = PDCregion_create(2, roff, rsize);
    struct pdc_region_info *ri = PDCregion_get_info(remote);
    CHECK(ri != NULL && ri->ndim == 2 && ri->offset[0] == 5 && ri->size[1] == 4, "region info");
    free(ri);
    pdcid_t r = PDCregion_transfer_create(sub, PDC_READ, obj, local, remote);
    CHECK(r != 0 && PDCregion_transfer_start(r) == SUCCEED && PDCregion_transfer_wait(r) == SUCCEED, "read");
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++) {
            int want = (i >= 1 && i < 4 && j >= 1 && j < 5) ? (5 + i - 1) * COLS + (2 + j - 1) : -1;
            CHECK(sub[i][j] == want, "sub[%d][%d] = %d, want %d", i, j, sub[i][j], want);
        }
    CHECK(PDCregion_transfer_close(r) == SUCCEED, "close read");
    PDCregion_close(local);
    PDCregion_close(remote);

    /* start_all / wait_all: each row rewritten from its own buffer. */
    pdcid_t ids[ROWS];
    int     rows[ROWS][COLS];
    for (int i = 0; i < ROWS; i++) {
        uint64_t o[2] = {i, 0}, s[2] = {1, COLS}, lo = 0, ls = COLS;
        for (int j = 0; j < COLS; j++)
            rows[i][j] = 1000 * i + j;
        pdcid_t lr = PDCregion_create(1, &lo, &ls), rr = PDCregion_create(2, o, s);
        ids[i] = PDCregion_transfer_create(rows[i], PDC_WRITE, obj, lr, rr);
        CHECK(ids[i] != 0, "create %d", i);
        PDCregion_close(lr);
        PDCregion_close(rr);
    }
    CHECK(PDCregion_transfer_start_all(ids, ROWS) == SUCCEED, "start_all");
    CHECK(PDCregion_transfer_wait_all(ids, ROWS) == SUCCEED, "wait_all");
    for (int i = 0; i < ROWS; i++)
        CHECK(PDCregion_transfer_close(ids[i]) == SUCCEED, "close %d", i);
    int back[ROWS * COLS];
    CHECK(PDCobj_get_data(obj, back, sizeof back) == SUCCEED, "get_data");
    for (int i = 0; i < ROWS * COLS; i++)
        CHECK(back[i] == 1000 * (i / COLS) + i % COLS, "element %d = %d", i, back[i]);

    /* pdc_region_transfer_now: a row written and a block read back, each
     * in one call; the buffer is the caller's again when it returns. */
    int      row[COLS], blk[2][3];
    uint64_t nro[2] = {9, 0}, nrs[2] = {1, COLS}, nbo[2] = {8, 4}, nbs[2] = {2, 3};
    for (int j = 0; j < COLS; j++)
        row[j] = -7 * j;
    CHECK(pdc_region_transfer_now(obj, row, PDC_WRITE, 2, nro, nrs) == SUCCEED, "transfer_now write");
    memset(row, 0, sizeof row);
    CHECK(pdc_region_transfer_now(obj, blk, PDC_READ, 2, nbo, nbs) == SUCCEED, "transfer_now read");
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            int want = i == 1 ? -7 * (4 + j) : 1000 * 8 + 4 + j;
            CHECK(blk[i][j] == want, "blk[%d][%d] = %d, want %d", i, j, blk[i][j], want);
        }

    /* POSIX: done inside start, so status says complete with no wait. */
    pdcid_t px = make_obj(pdc, cont, "posix", PDC_CONSISTENCY_POSIX);
    local      = PDCregion_create(1, &zero, &n);
    remote     = PDCregion_create(2, off2, size2);
    w          = PDCregion_transfer_create(all, PDC_WRITE, px, local, remote);
    CHECK(w != 0 && PDCregion_transfer_start(w) == SUCCEED, "posix start");
    CHECK(PDCregion_transfer_status(w, &st) == SUCCEED && st == PDC_TRANSFER_STATUS_COMPLETE, "posix status %d", st);
    CHECK(PDCregion_transfer_close(w) == SUCCEED, "posix close");
    /* A transfer left unwaited: closing the object waits for it. */
    int half[ROWS * COLS];
    memset(half, 0, sizeof half);
    pdcid_t rd = PDCregion_transfer_create(half, PDC_READ, px, local, remote);
    CHECK(rd != 0 && PDCregion_transfer_start(rd) == SUCCEED, "read start");
    CHECK(PDCobj_close(px) == SUCCEED, "close with a transfer under way");
    CHECK(half[ROWS * COLS - 1] == ROWS * COLS - 1, "read finished by PDCobj_close: %d", half[ROWS * COLS - 1]);
    CHECK(PDCregion_transfer_close(rd) == SUCCEED, "close after object close");

    /* put_data / get_data. */
    const char msg[] = "bytes put as an object";
    pdcid_t    po    = PDCobj_put_data("message", (void *)msg, sizeof msg, cont);
    CHECK(po != 0, "put_data");
    char got[sizeof msg];
    CHECK(PDCobj_get_data(po, got, sizeof got) == SUCCEED && strcmp(got, msg) == 0, "get_data: %s", got);

    CHECK(PDCobj_close(po) == SUCCEED && PDCobj_close(obj) == SUCCEED, "close objects");
    CHECK(PDCclose(pdc) == SUCCEED, "PDCclose");
    printf("obj_region: every call behaved\n");
    return 0;
}
