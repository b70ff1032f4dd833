/*
 * query: data queries as a PDC program uses them. A 2-D float object
 * holding r*10 + c/10 at (r, c) is written through a region transfer;
 * nhits, the selection and the data of GT, LT, EQ, AND, OR and a query
 * restricted by PDCquery_sel_region are checked against values computed
 * here; then bad input, each failing call printing one line.
 */
#include <unistd.h>

#include "check.h"
#include "pdc.h"

#define ROWS 9
#define COLS 7

static float val(uint64_t r, uint64_t c) { return (float)r * 10 + (float)c / 10; }

typedef int (*match_fn)(float);
static int gt_30(float v) { return v > 30.0f; }
static int lt_10(float v) { return v < 10.25f; }
static int eq_43(float v) { return v == val(4, 3); }
static int and_fn(float v) { return v > 30.0f && v <= 40.2f; }
static int or_fn(float v) { return v < 10.25f || v == val(4, 3); }

/* check_query compares the query's hits with those of match in the box
 * off/size (the whole object for NULL). */
static void check_query(const char *name, pdcid_t obj, pdc_query_t *q, match_fn match, const uint64_t *off,
                        const uint64_t *size)
{
    uint64_t want_coords[ROWS * COLS * 2], want_n = 0;
    float    want_vals[ROWS * COLS];
    for (uint64_t r = 0; r < ROWS; r++)
        for (uint64_t c = 0; c < COLS; c++) {
            if (off != NULL && (r < off[0] || r >= off[0] + size[0] || c < off[1] || c >= off[1] + size[1]))
                continue;
            if (!match(val(r, c)))
                continue;
            want_coords[2 * want_n] = r;
            want_coords[2 * want_n + 1] = c;
            want_vals[want_n++] = val(r, c);
        }
    CHECK(want_n > 0, "%s: the test's query should hit something", name);
    uint64_t n = 0;
    CHECK(PDCquery_get_nhits(q, &n) == SUCCEED && n == want_n, "%s: nhits %llu, want %llu", name,
          (unsigned long long)n, (unsigned long long)want_n);
    pdc_selection_t sel;
    CHECK(PDCquery_get_selection(q, &sel) == SUCCEED, "%s: get_selection", name);
    CHECK(sel.ndim == 2 && sel.nhits == want_n && sel.coords != NULL, "%s: selection ndim %zu nhits %llu", name, sel.ndim,
          (unsigned long long)sel.nhits);
    for (uint64_t i = 0; i < 2 * want_n; i++)
        CHECK(sel.coords[i] == want_coords[i], "%s: coord %llu = %llu, want %llu", name, (unsigned long long)i,
              (unsigned long long)sel.coords[i], (unsigned long long)want_coords[i]);
    float data[ROWS * COLS];
    CHECK(PDCquery_get_data(obj, &sel, data) == SUCCEED, "%s: get_data", name);
    for (uint64_t i = 0; i < want_n; i++)
        CHECK(data[i] == want_vals[i], "%s: value %llu = %g, want %g", name, (unsigned long long)i, data[i],
              want_vals[i]);
    PDCselection_free(&sel);
    CHECK(sel.coords == NULL && sel.nhits == 0, "%s: selection_free", name);
    printf("%s: %llu hits\n", name, (unsigned long long)want_n);
}

int main(void)
{
    char name[64];
    snprintf(name, sizeof name, "field-%d", (int)getpid());
    pdcid_t pdc  = PDCinit("pdc");
    pdcid_t cont = PDCcont_create("queries", PDCprop_create(PDC_CONT_CREATE, pdc));
    CHECK(pdc != 0 && cont != 0, "setup");
    pdcid_t  prop    = PDCprop_create(PDC_OBJ_CREATE, pdc);
    uint64_t dims[2] = {ROWS, COLS};
    CHECK(prop != 0 && PDCprop_set_obj_dims(prop, 2, dims) == SUCCEED && PDCprop_set_obj_type(prop, PDC_FLOAT) == SUCCEED,
          "object property");
    pdcid_t obj = PDCobj_create(cont, name, prop);
    CHECK(obj != 0, "PDCobj_create(%s)", name);

    /* Write the whole object from a 2-D buffer. */
    float    all[ROWS][COLS];
    uint64_t off0[2] = {0, 0};
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++)
            all[r][c] = val(r, c);
    pdcid_t local  = PDCregion_create(2, off0, dims);
    pdcid_t remote = PDCregion_create(2, off0, dims);
    pdcid_t w      = PDCregion_transfer_create(all, PDC_WRITE, obj, local, remote);
    CHECK(w != 0 && PDCregion_transfer_start(w) == SUCCEED && PDCregion_transfer_wait(w) == SUCCEED &&
              PDCregion_transfer_close(w) == SUCCEED,
          "write");
    PDCregion_close(local);
    PDCregion_close(remote);

    float        v30 = 30, v10 = 10.25f, v43 = val(4, 3), v40 = 40.2f;
    pdc_query_t *gt = PDCquery_create(obj, PDC_GT, PDC_FLOAT, &v30);
    pdc_query_t *lt = PDCquery_create(obj, PDC_LT, PDC_FLOAT, &v10);
    pdc_query_t *eq = PDCquery_create(obj, PDC_EQ, PDC_FLOAT, &v43);
    pdc_query_t *le = PDCquery_create(obj, PDC_LTE, PDC_FLOAT, &v40);
    CHECK(gt != NULL && lt != NULL && eq != NULL && le != NULL, "PDCquery_create");
    check_query("GT", obj, gt, gt_30, NULL, NULL);
    check_query("LT", obj, lt, lt_10, NULL, NULL);
    check_query("EQ", obj, eq, eq_43, NULL, NULL);
    pdc_query_t *q_and = PDCquery_and(gt, le);
    pdc_query_t *q_or  = PDCquery_or(lt, eq);
    CHECK(q_and != NULL && q_or != NULL && q_and->left == gt && q_and->right == le, "PDCquery_and/or");
    check_query("AND", obj, q_and, and_fn, NULL, NULL);
    check_query("OR", obj, q_or, or_fn, NULL, NULL);

    /* Restrict OR to rows 1..5, cols 2..5 (given as PDCregion_get_info
     * returns a region). */
    uint64_t                roff[2] = {1, 2}, rsize[2] = {5, 4};
    pdcid_t                 reg     = PDCregion_create(2, roff, rsize);
    struct pdc_region_info *ri      = PDCregion_get_info(reg);
    CHECK(ri != NULL, "region info");
    CHECK(PDCquery_sel_region(q_or, ri) == SUCCEED, "sel_region");
    check_query("OR in region", obj, q_or, or_fn, roff, rsize);
    free(ri);
    PDCregion_close(reg);

    /* The values of another object (ints r*100 + c) at the hits of OR. */
    pdcid_t prop2 = PDCprop_obj_dup(prop);
    CHECK(prop2 != 0 && PDCprop_set_obj_type(prop2, PDC_INT) == SUCCEED, "prop2");
    char name2[80];
    snprintf(name2, sizeof name2, "%s-energy", name);
    pdcid_t energy = PDCobj_create(cont, name2, prop2);
    int     ebuf[ROWS][COLS];
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++)
            ebuf[r][c] = r * 100 + c;
    local  = PDCregion_create(2, off0, dims);
    remote = PDCregion_create(2, off0, dims);
    w      = PDCregion_transfer_create(ebuf, PDC_WRITE, energy, local, remote);
    CHECK(energy != 0 && w != 0 && PDCregion_transfer_start(w) == SUCCEED && PDCregion_transfer_wait(w) == SUCCEED &&
              PDCregion_transfer_close(w) == SUCCEED,
          "write energy");
    PDCregion_close(local);
    PDCregion_close(remote);
    pdc_selection_t osel;
    int             evals[ROWS * COLS];
    CHECK(PDCquery_get_selection(q_or, &osel) == SUCCEED && osel.nhits == 2, "OR selection");
    CHECK(PDCquery_get_data(energy, &osel, evals) == SUCCEED, "get_data of another object");
    for (uint64_t i = 0; i < osel.nhits; i++)
        CHECK(evals[i] == (int)(osel.coords[2 * i] * 100 + osel.coords[2 * i + 1]), "energy %llu = %d",
              (unsigned long long)i, evals[i]);
    PDCselection_free(&osel);
    printf("energy at OR's hits: ok\n");

    /* Bad input: each call prints its line and fails. */
    float  one = 1;
    double d   = 1;
    CHECK(PDCquery_create(obj, (pdc_query_op_t)42, PDC_FLOAT, &one) == NULL, "unknown op");
    CHECK(PDCquery_create(obj, PDC_GT, PDC_DOUBLE, &d) == NULL, "type mismatch");
    CHECK(PDCquery_create(obj, PDC_GT, PDC_FLOAT, NULL) == NULL, "NULL value");
    CHECK(PDCquery_and(NULL, gt) == NULL, "and NULL");
    uint64_t n = 7;
    CHECK(PDCquery_get_nhits(NULL, &n) == FAIL, "nhits NULL query");
    pdc_selection_t sel;
    CHECK(PDCquery_get_selection(NULL, &sel) == FAIL, "selection NULL query");
    uint64_t                boff[2] = {5, 0}, bsize[2] = {5, 2};
    struct pdc_region_info  bad     = {.ndim = 2, .offset = boff, .size = bsize};
    CHECK(PDCquery_sel_region(lt, &bad) == FAIL, "region outside dims");
    CHECK(PDCquery_sel_region(lt, NULL) == FAIL, "NULL region");
    uint64_t        far[2] = {ROWS, 0};
    pdc_selection_t fsel   = {.query_id = lt->handle, .ndim = 2, .nhits = 1, .coords = far};
    CHECK(PDCquery_get_data(energy, &fsel, evals) == FAIL, "coords outside dims");
    /* A failed sel_region left lt unrestricted. */
    check_query("LT after bad regions", obj, lt, lt_10, NULL, NULL);

    /* free_all frees a query reached twice once: PDCquery_and(a, a), and a
     * chain of 8 such, each reaching the one before twice. */
    float        two = 2;
    pdc_query_t *a   = PDCquery_create(obj, PDC_GT, PDC_FLOAT, &two);
    CHECK(a != NULL, "create a");
    pdc_query_t *aa = PDCquery_and(a, a);
    CHECK(aa != NULL, "and(a, a)");
    PDCquery_free_all(aa);
    pdc_query_t *chain = PDCquery_create(obj, PDC_GT, PDC_FLOAT, &two);
    for (int i = 0; i < 8; i++) {
        chain = i % 2 ? PDCquery_or(chain, chain) : PDCquery_and(chain, chain);
        CHECK(chain != NULL, "chain %d", i);
    }
    uint64_t nchain = 0;
    CHECK(PDCquery_get_nhits(chain, &nchain) == SUCCEED && nchain > 0, "nhits of the chain: %llu",
          (unsigned long long)nchain);
    PDCquery_free_all(chain);

    PDCquery_free_all(q_and); /* q_and, gt and le */
    PDCquery_free_all(q_or);  /* q_or, lt and eq */
    PDCquery_free(NULL);
    PDCselection_free(NULL);

    CHECK(PDCobj_close(obj) == SUCCEED && PDCobj_close(energy) == SUCCEED, "obj close");
    CHECK(PDCclose(pdc) == SUCCEED, "PDCclose");
    return 0;
}
