/*
 * pdc_vpicio: VPIC-IO, the particle writer of PDC's benchmarks, as a
 * libpdc program. Each rank writes its N particles of 8 variables (x, y,
 * z, px, py, pz float32; id1, id2 int32) into one block of 8 shared 1-D
 * objects, through 8 transfers started with one
 * PDCregion_transfer_start_all and finished with one _wait_all.
 *
 *   pdc_vpicio -create -run R -n N -size S [-partition P]   once: the container and objects
 *   pdc_vpicio -run R -n N -rank I -size S                  each rank (or under a launcher)
 *
 * pdc_bdcats reads the particles back and checks every value. See vpic.h
 * for the run's layout and values, and -h for the flags.
 */
#define _POSIX_C_SOURCE 200809L

#include "vpic.h"

/* create makes the container and the run's 8 objects of N*SIZE particles. */
static void create(const struct vpic_opts *o)
{
    pdcid_t pdc = PDCinit("pdc_vpicio");
    if (pdc == 0)
        vpic_die("PDCinit failed");
    pdcid_t cprop = PDCprop_create(PDC_CONT_CREATE, pdc);
    if (cprop == 0)
        vpic_die("PDCprop_create(PDC_CONT_CREATE) failed");
    pdcid_t cont = PDCcont_create(VPIC_CONT, cprop);
    if (cont == 0)
        vpic_die("PDCcont_create(\"%s\") failed", VPIC_CONT);
    pdcid_t  oprop = PDCprop_create(PDC_OBJ_CREATE, pdc);
    uint64_t total = o->n * o->size;
    if (oprop == 0 || PDCprop_set_obj_dims(oprop, 1, &total) != SUCCEED ||
        PDCprop_set_obj_transfer_region_type(oprop, o->partition) != SUCCEED)
        vpic_die("object property of %" PRIu64 " particles, %s: failed", total, vpic_partition_name(o->partition));
    for (int v = 0; v < VPIC_NVARS; v++) {
        char name[256];
        vpic_object_name(name, sizeof name, o->run, v);
        if (PDCprop_set_obj_type(oprop, vpic_vars[v].type) != SUCCEED)
            vpic_die("PDCprop_set_obj_type(%d) failed", (int)vpic_vars[v].type);
        pdcid_t obj = PDCobj_create(cont, name, oprop);
        if (obj == 0)
            vpic_die("PDCobj_create(\"%s\") failed", name);
        if (PDCobj_close(obj) != SUCCEED)
            vpic_die("PDCobj_close(\"%s\") failed", name);
    }
    if (PDCprop_close(oprop) != SUCCEED || PDCcont_close(cont) != SUCCEED || PDCprop_close(cprop) != SUCCEED ||
        PDCclose(pdc) != SUCCEED)
        vpic_die("closing the handles failed");
    printf("vpicio-create run=%s objects=%d particles=%" PRIu64 " partition=%s\n", o->run, VPIC_NVARS, total,
           vpic_partition_name(o->partition));
}

static const char usage[] =
    "usage: pdc_vpicio -create -run NAME [-n N] [-size S] [-partition P]\n"
    "       pdc_vpicio -run NAME [-n N] [-rank R -size S] [-sync]\n"
    "\n"
    "VPIC-IO: each rank writes particles [R*N, (R+1)*N) of 8 variables into the run's objects,\n"
    "which -create makes, once, before the ranks start. Servers are found through $PDC_TMPDIR.\n"
    "\n" VPIC_FLAGS
    "  -create       create the container and the 8 objects of N*S particles, and exit\n"
    "  -partition P  the objects' partition strategy: object-static, region-static (default),\n"
    "                region-dynamic or region-local; without -create, checked if given\n"
    "\n"
    "A rank prints one line of key=value pairs: run, rank, size, n, bytes written, seconds from\n"
    "the first PDCregion_transfer_create to the end of PDCregion_transfer_wait_all, and the\n"
    "start and end of that span (seconds since 1970). Closing the objects afterwards, which\n"
    "makes the data durable, is not timed. Any failure: a line on stderr, exit status 1.\n";

int main(int argc, char **argv)
{
    vpic_prog          = "pdc_vpicio";
    struct vpic_opts o = vpic_parse(argc, argv, 1, usage);
    if (o.create) {
        create(&o);
        return 0;
    }

    pdcid_t pdc = PDCinit("pdc_vpicio");
    if (pdc == 0)
        vpic_die("PDCinit failed");
    pdcid_t ids[VPIC_NVARS], xfers[VPIC_NVARS];
    vpic_open(pdc, &o, ids);
    /* The simulation's particles, made before the I/O phase. */
    uint32_t *bufs[VPIC_NVARS];
    for (int v = 0; v < VPIC_NVARS; v++) {
        bufs[v] = vpic_alloc(o.n, 0);
        for (uint64_t j = 0; j < o.n; j++)
            bufs[v][j] = vpic_value(v, o.rank * o.n + j);
    }
    if (o.sync)
        vpic_await();

    double start = vpic_now(CLOCK_REALTIME), t0 = vpic_now(CLOCK_MONOTONIC);
    vpic_transfers(&o, ids, bufs, PDC_WRITE, xfers);
    if (PDCregion_transfer_start_all(xfers, VPIC_NVARS) != SUCCEED)
        vpic_die("PDCregion_transfer_start_all failed");
    if (PDCregion_transfer_wait_all(xfers, VPIC_NVARS) != SUCCEED)
        vpic_die("PDCregion_transfer_wait_all failed");
    double seconds = vpic_now(CLOCK_MONOTONIC) - t0, end = vpic_now(CLOCK_REALTIME);

    /* Closing the objects makes the data durable; not timed, as PDC's
     * VPIC-IO does not time it. */
    vpic_finish(pdc, ids, xfers);
    for (int v = 0; v < VPIC_NVARS; v++)
        free(bufs[v]);
    vpic_report("vpicio", &o, start, end, seconds);
    return 0;
}
