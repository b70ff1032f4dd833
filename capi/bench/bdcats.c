/*
 * pdc_bdcats: BD-CATS, the particle reader of PDC's benchmarks, as a
 * libpdc program. Each rank reads its N particles of the 8 variables a
 * pdc_vpicio run wrote (one PDCregion_transfer_start_all and one
 * _wait_all) and checks every value. A value that differs makes it print,
 * for each object with such values, a line naming the object, the first
 * such particle, the value wanted and the value read, and exit 1.
 *
 *   pdc_bdcats -run R -n N -rank I -size S
 *
 * See vpic.h for the run's layout and values, and -h for the flags.
 */
#define _POSIX_C_SOURCE 200809L

#include "vpic.h"

/* check compares variable v of the rank's block with the values written;
 * it returns how many differ, having printed the first. */
static uint64_t check(const struct vpic_opts *o, int v, const uint32_t *buf)
{
    uint64_t bad = 0, first = 0;
    for (uint64_t j = 0; j < o->n; j++)
        if (buf[j] != vpic_value(v, o->rank * o->n + j)) {
            if (bad++ == 0)
                first = j;
        }
    if (bad > 0) {
        char     name[256], got[64], want[64];
        uint64_t i = o->rank * o->n + first;
        vpic_object_name(name, sizeof name, o->run, v);
        vpic_describe(got, sizeof got, v, buf[first]);
        vpic_describe(want, sizeof want, v, vpic_value(v, i));
        fprintf(stderr, "%s: object \"%s\" particle %" PRIu64 ": got %s, want %s; %" PRIu64 " of particles %" PRIu64 "..%" PRIu64 " differ\n",
                vpic_prog, name, i, got, want, bad, o->rank * o->n, (o->rank + 1) * o->n - 1);
    }
    return bad;
}

static const char usage[] =
    "usage: pdc_bdcats -run NAME [-n N] [-rank R -size S] [-partition P] [-sync]\n"
    "\n"
    "BD-CATS: each rank reads particles [R*N, (R+1)*N) of the 8 variables pdc_vpicio wrote and\n"
    "checks every value. Servers are found through $PDC_TMPDIR.\n"
    "\n" VPIC_FLAGS
    "  -partition P  check that the objects have this partition strategy\n"
    "\n"
    "A rank prints one line of key=value pairs: run, rank, size, n, bytes read, seconds from the\n"
    "first PDCregion_transfer_create to the end of the check of every value, and the start and\n"
    "end of that span (seconds since 1970). Values that differ: for each object with any, a line\n"
    "on stderr naming it, the first such particle, the value read and the value wanted; exit\n"
    "status 1, as for any other failure.\n";

int main(int argc, char **argv)
{
    vpic_prog          = "pdc_bdcats";
    struct vpic_opts o = vpic_parse(argc, argv, 0, usage);

    pdcid_t pdc = PDCinit("pdc_bdcats");
    if (pdc == 0)
        vpic_die("PDCinit failed");
    pdcid_t ids[VPIC_NVARS], xfers[VPIC_NVARS];
    vpic_open(pdc, &o, ids);
    /* Touched now, so that the read pays for no fresh pages; 0xFF bytes
     * are no value a read may leave. */
    uint32_t *bufs[VPIC_NVARS];
    for (int v = 0; v < VPIC_NVARS; v++)
        bufs[v] = vpic_alloc(o.n, 0xFF);
    if (o.sync)
        vpic_await();

    double start = vpic_now(CLOCK_REALTIME), t0 = vpic_now(CLOCK_MONOTONIC);
    vpic_transfers(&o, ids, bufs, PDC_READ, xfers);
    if (PDCregion_transfer_start_all(xfers, VPIC_NVARS) != SUCCEED)
        vpic_die("PDCregion_transfer_start_all failed");
    if (PDCregion_transfer_wait_all(xfers, VPIC_NVARS) != SUCCEED)
        vpic_die("PDCregion_transfer_wait_all failed");
    uint64_t bad = 0;
    for (int v = 0; v < VPIC_NVARS; v++)
        bad += check(&o, v, bufs[v]);
    double seconds = vpic_now(CLOCK_MONOTONIC) - t0, end = vpic_now(CLOCK_REALTIME);

    vpic_finish(pdc, ids, xfers);
    for (int v = 0; v < VPIC_NVARS; v++)
        free(bufs[v]);
    if (bad > 0)
        vpic_die("%" PRIu64 " of the %" PRIu64 " values read differ from those pdc_vpicio writes", bad, o.n * VPIC_NVARS);
    vpic_report("bdcats", &o, start, end, seconds);
    return 0;
}
