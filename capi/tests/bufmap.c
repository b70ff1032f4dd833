/*
 * bufmap: PDC's older I/O path, buffer maps and region locks, as PDC's
 * programs use it: a write lock's release writes the mapped buffer, a
 * read lock's release reads into it, checked value by value against
 * region transfers; a 2-D local region that is a sub-box of its buffer;
 * a 1-D buffer mapped to a 2-D part; a lock with no map; then misuse,
 * each failing with one report.
 *
 * usage: bufmap write NAME   (makes object NAME, 1-D, and NAME-2d)
 *        bufmap read NAME    (another process: reads them back)
 */
#include <unistd.h>

#include "check.h"
#include "pdc.h"

#define N 64
#define ROWS 6
#define COLS 8

static int val1(int i) { return 7 * i + 3; }
static int val2(int r, int c) { return 1000 + 100 * r + c; }

static pdcid_t make_obj(pdcid_t pdc, pdcid_t cont, const char *name, int ndim, uint64_t *dims)
{
    pdcid_t prop = PDCprop_create(PDC_OBJ_CREATE, pdc);
    CHECK(prop != 0 && PDCprop_set_obj_dims(prop, ndim, dims) == SUCCEED && PDCprop_set_obj_type(prop, PDC_INT) == SUCCEED,
          "object property");
    pdcid_t obj = PDCobj_create(cont, name, prop);
    CHECK(obj != 0, "PDCobj_create(%s)", name);
    PDCprop_close(prop);
    return obj;
}

/* lock_io maps buf's part (loff, lsize) to obj's part (roff, rsize),
 * locks, releases (moving the data) and unmaps, with PDC's calls. */
static void lock_io(pdcid_t obj, void *buf, pdc_access_t access, int lndim, uint64_t *loff, uint64_t *lsize, int rndim,
                    uint64_t *roff, uint64_t *rsize)
{
    pdcid_t local = PDCregion_create(lndim, loff, lsize), remote = PDCregion_create(rndim, roff, rsize);
    CHECK(local != 0 && remote != 0, "regions");
    CHECK(PDCbuf_obj_map(buf, PDC_INT, local, obj, remote) == SUCCEED, "map");
    CHECK(PDCreg_obtain_lock(obj, remote, access, PDC_BLOCK) == SUCCEED, "obtain");
    CHECK(PDCreg_release_lock(obj, remote, access) == SUCCEED, "release");
    CHECK(PDCbuf_obj_unmap(obj, remote) == SUCCEED, "unmap");
    CHECK(PDCregion_close(local) == SUCCEED && PDCregion_close(remote) == SUCCEED, "region close");
}

/* xfer moves buf (shaped as size) to or from obj's part (off, size) by a
 * region transfer. */
static void xfer(pdcid_t obj, void *buf, pdc_access_t access, int ndim, uint64_t *off, uint64_t *size)
{
    uint64_t zero[2] = {0, 0};
    pdcid_t  local = PDCregion_create(ndim, zero, size), remote = PDCregion_create(ndim, off, size);
    pdcid_t  t     = PDCregion_transfer_create(buf, access, obj, local, remote);
    CHECK(t != 0 && PDCregion_transfer_start(t) == SUCCEED && PDCregion_transfer_wait(t) == SUCCEED &&
              PDCregion_transfer_close(t) == SUCCEED,
          "transfer");
    CHECK(PDCregion_close(local) == SUCCEED && PDCregion_close(remote) == SUCCEED, "region close");
}

/* The 2-D object after write: -1 but rows 2..4, cols 3..6, which hold
 * val2 of the buffer's cell (row - 1, col - 1). */
static int want2(int r, int c)
{
    if (r >= 2 && r < 5 && c >= 3 && c < 7)
        return val2(r - 1, c - 1);
    return -1;
}

/* check1 and check2 read the objects back, by the lock path and by
 * region transfers, and check every value. */
static void check1(pdcid_t obj)
{
    int      got[N];
    uint64_t zero = 0, n = N;
    memset(got, 0, sizeof got);
    lock_io(obj, got, PDC_READ, 1, &zero, &n, 1, &zero, &n);
    for (int i = 0; i < N; i++)
        CHECK(got[i] == val1(i), "lock read: element %d is %d, want %d", i, got[i], val1(i));
    memset(got, 0, sizeof got);
    xfer(obj, got, PDC_READ, 1, &zero, &n);
    for (int i = 0; i < N; i++)
        CHECK(got[i] == val1(i), "transfer read: element %d is %d, want %d", i, got[i], val1(i));
}

static void check2(pdcid_t obj)
{
    int      all[ROWS][COLS];
    uint64_t zero[2] = {0, 0}, dims[2] = {ROWS, COLS};
    memset(all, 0, sizeof all);
    xfer(obj, all, PDC_READ, 2, zero, dims);
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++)
            CHECK(all[r][c] == want2(r, c), "transfer read: (%d,%d) is %d, want %d", r, c, all[r][c], want2(r, c));
    memset(all, 0, sizeof all);
    lock_io(obj, all, PDC_READ, 2, zero, dims, 2, zero, dims);
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++)
            CHECK(all[r][c] == want2(r, c), "lock read: (%d,%d) is %d, want %d", r, c, all[r][c], want2(r, c));

    /* Object rows 1..4, cols 2..5 into a 6x7 buffer's sub-box at (2, 3):
     * the rest of the buffer stays as it was. */
    int      sub[6][7];
    uint64_t loff[2] = {2, 3}, lsize[2] = {4, 4}, roff[2] = {1, 2};
    memset(sub, 0x5a, sizeof sub);
    lock_io(obj, sub, PDC_READ, 2, loff, lsize, 2, roff, lsize);
    int untouched;
    memset(&untouched, 0x5a, sizeof untouched);
    for (int r = 0; r < 6; r++)
        for (int c = 0; c < 7; c++) {
            int in = r >= 2 && c >= 3, want = in ? want2(r - 2 + 1, c - 3 + 2) : untouched;
            CHECK(sub[r][c] == want, "lock read into a sub-box: buffer (%d,%d) is %d, want %d", r, c, sub[r][c], want);
        }

    /* A 1-D buffer of 6 mapped to column 4, a 6x1 part. */
    int      col[ROWS];
    uint64_t z = 0, rows = ROWS, coff[2] = {0, 4}, csize[2] = {ROWS, 1};
    memset(col, 0, sizeof col);
    lock_io(obj, col, PDC_READ, 1, &z, &rows, 2, coff, csize);
    for (int r = 0; r < ROWS; r++)
        CHECK(col[r] == want2(r, 4), "1-D read of a column: row %d is %d, want %d", r, col[r], want2(r, 4));
}

/* misuse: each call fails with one report (12 lines), and nothing is
 * left mapped or locked by a failed call. */
static void misuse(pdcid_t obj)
{
    int      buf[N];
    uint64_t zero = 0, n = N, half = N / 2, past = N - 4;
    pdcid_t  reg = PDCregion_create(1, &zero, &n), small = PDCregion_create(1, &zero, &half),
            tail = PDCregion_create(1, &past, &half);
    CHECK(reg != 0 && small != 0 && tail != 0, "regions");

    CHECK(PDCreg_release_lock(obj, reg, PDC_WRITE) == FAIL, "release without a lock");
    CHECK(PDCbuf_obj_unmap(obj, reg) == FAIL, "unmap without a map");
    CHECK(PDCbuf_obj_map(buf, PDC_INT, small, obj, reg) == FAIL, "map of 32 elements to 64");
    CHECK(PDCbuf_obj_map(buf, PDC_DOUBLE, reg, obj, reg) == FAIL, "map of doubles to ints");
    CHECK(PDCbuf_obj_map(buf, PDC_INT, small, obj, tail) == FAIL, "map past the object");
    CHECK(PDCbuf_obj_map(NULL, PDC_INT, reg, obj, reg) == FAIL, "map of NULL");
    CHECK(PDCreg_obtain_lock(obj, reg, PDC_WRITE, PDC_BLOCK) == SUCCEED, "obtain");
    CHECK(PDCreg_obtain_lock(obj, reg, PDC_READ, PDC_NOBLOCK) == FAIL, "obtain twice");
    CHECK(PDCreg_release_lock(obj, reg, PDC_READ) == FAIL, "release of the other access");
    /* No map: the lock alone, as PDC's obj_lock program takes one. */
    CHECK(PDCreg_release_lock(obj, reg, PDC_WRITE) == SUCCEED, "release of a lock with no map");
    CHECK(PDCbuf_obj_map(buf, PDC_INT, reg, obj, reg) == SUCCEED, "map");
    CHECK(PDCbuf_obj_map(buf, PDC_INT, reg, obj, reg) == FAIL, "map twice");
    CHECK(PDCbuf_obj_unmap(obj, reg) == SUCCEED, "unmap");
    CHECK(PDCbuf_obj_unmap(obj, reg) == FAIL, "unmap twice");
    CHECK(PDCreg_obtain_lock(obj, reg, 7, PDC_BLOCK) == FAIL, "obtain of access 7");
    CHECK(PDCreg_obtain_lock(obj, 0, PDC_READ, PDC_BLOCK) == FAIL, "obtain on region 0");
    CHECK(PDCregion_close(reg) == SUCCEED && PDCregion_close(small) == SUCCEED && PDCregion_close(tail) == SUCCEED,
          "region close");
}

int main(int argc, char **argv)
{
    CHECK(argc == 3 && (strcmp(argv[1], "write") == 0 || strcmp(argv[1], "read") == 0), "usage: bufmap write|read NAME");
    char name2[128];
    snprintf(name2, sizeof name2, "%s-2d", argv[2]);
    pdcid_t pdc = PDCinit("pdc");
    CHECK(pdc != 0, "PDCinit");

    if (strcmp(argv[1], "read") == 0) {
        pdcid_t o1 = PDCobj_open(argv[2], pdc), o2 = PDCobj_open(name2, pdc);
        CHECK(o1 != 0 && o2 != 0, "PDCobj_open");
        check1(o1);
        check2(o2);
        CHECK(PDCobj_close(o1) == SUCCEED && PDCobj_close(o2) == SUCCEED && PDCclose(pdc) == SUCCEED, "close");
        printf("bufmap read: ok\n");
        return 0;
    }

    pdcid_t cont = PDCcont_create("bufmap", PDCprop_create(PDC_CONT_CREATE, pdc));
    CHECK(cont != 0, "PDCcont_create");
    uint64_t n = N, dims[2] = {ROWS, COLS};
    pdcid_t  o1 = make_obj(pdc, cont, argv[2], 1, &n), o2 = make_obj(pdc, cont, name2, 2, dims);

    /* 1-D: the buffer's contents at release are what is written. */
    int      data[N];
    uint64_t zero = 0;
    pdcid_t  local = PDCregion_create(1, &zero, &n), remote = PDCregion_create(1, &zero, &n);
    CHECK(PDCbuf_obj_map(data, PDC_INT, local, o1, remote) == SUCCEED, "map");
    CHECK(PDCreg_obtain_lock(o1, remote, PDC_WRITE, PDC_NOBLOCK) == SUCCEED, "obtain");
    for (int i = 0; i < N; i++)
        data[i] = val1(i);
    CHECK(PDCreg_release_lock(o1, remote, PDC_WRITE) == SUCCEED, "release");
    memset(data, 0, sizeof data); /* nothing holds the buffer after release */
    CHECK(PDCbuf_obj_unmap(o1, remote) == SUCCEED, "unmap");
    CHECK(PDCregion_close(local) == SUCCEED && PDCregion_close(remote) == SUCCEED, "region close");
    check1(o1);

    /* 2-D: -1 everywhere by a transfer, then the 3x4 sub-box at (1, 2)
     * of a 4x6 buffer written to rows 2..4, cols 3..6 by a lock. */
    int      all[ROWS][COLS], b[4][6];
    uint64_t z2[2] = {0, 0}, loff[2] = {1, 2}, size[2] = {3, 4}, roff[2] = {2, 3};
    memset(all, 0xff, sizeof all);
    xfer(o2, all, PDC_WRITE, 2, z2, dims);
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 6; c++)
            b[r][c] = val2(r, c);
    lock_io(o2, b, PDC_WRITE, 2, loff, size, 2, roff, size);
    check2(o2);

    misuse(o1);
    CHECK(PDCobj_close(o1) == SUCCEED && PDCobj_close(o2) == SUCCEED && PDCcont_close(cont) == SUCCEED, "close");
    CHECK(PDCclose(pdc) == SUCCEED, "PDCclose");
    printf("bufmap write: ok\n");
    return 0;
}
