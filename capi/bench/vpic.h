/*
 * vpic.h - what pdc_vpicio (the VPIC-IO writer) and pdc_bdcats (the
 * BD-CATS reader) share: the 8 particle variables, the value of each
 * particle, the objects' names, the command line, and how a failure ends
 * the program. Only the public libpdc API (pdc.h) is used.
 *
 * A run is 8 1-D objects in the container "vpic", named vpic-RUN-VAR
 * (x, y, z, px, py, pz float32; id1, id2 int32), of N*SIZE particles.
 * Rank R owns particles [R*N, (R+1)*N) of each. The names, types and
 * values are those of pdc's Go benchmark (internal/bench/vpic.go), so a
 * run written by either is read and checked by the other.
 */
#ifndef PDC_BENCH_VPIC_H
#define PDC_BENCH_VPIC_H

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pdc.h"

#define VPIC_NVARS 8
#define VPIC_CONT  "vpic"

static const struct {
    const char    *name;
    pdc_var_type_t type;
} vpic_vars[VPIC_NVARS] = {
    {"x", PDC_FLOAT},  {"y", PDC_FLOAT},  {"z", PDC_FLOAT},    {"px", PDC_FLOAT},
    {"py", PDC_FLOAT}, {"pz", PDC_FLOAT}, {"id1", PDC_INT32}, {"id2", PDC_INT32},
};

/* The program's name in its messages (pdc_vpicio or pdc_bdcats). */
static const char *vpic_prog = "vpic";

/* vpic_die prints "PROG: MESSAGE" to stderr and exits with status 1. */
static void vpic_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void vpic_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", vpic_prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

/*
 * vpic_value is variable v of particle i as its 4 stored bytes: for the
 * float variables (i mod 2^20) / 4 + v, exact in float32; for the ids
 * 2i + (v - 6), modulo 2^32.
 */
static inline uint32_t vpic_value(int v, uint64_t i)
{
    if (vpic_vars[v].type == PDC_FLOAT) {
        float    f = (float)(i % (1u << 20)) * 0.25f + (float)v;
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        return u;
    }
    return (uint32_t)i * 2u + (uint32_t)(v - 6);
}

/* vpic_describe writes value u of variable v as "0xBITS (VALUE)". */
static inline void vpic_describe(char *buf, size_t len, int v, uint32_t u)
{
    if (vpic_vars[v].type == PDC_FLOAT) {
        float f;
        memcpy(&f, &u, sizeof f);
        snprintf(buf, len, "0x%08" PRIx32 " (%g)", u, (double)f);
    } else {
        snprintf(buf, len, "0x%08" PRIx32 " (%" PRId32 ")", u, (int32_t)u);
    }
}

/* vpic_object_name writes the name of run's variable v into buf. */
static inline void vpic_object_name(char *buf, size_t len, const char *run, int v)
{
    if ((size_t)snprintf(buf, len, "vpic-%s-%s", run, vpic_vars[v].name) >= len)
        vpic_die("run name %.40s... is too long", run);
}

static const char *const vpic_partitions[] = {"object-static", "region-static", "region-dynamic", "region-local"};

/* vpic_partition_name names p as the pdc command line does. */
static inline const char *vpic_partition_name(pdc_region_partition_t p)
{
    return (int)p >= 0 && (int)p < 4 ? vpic_partitions[p] : "unknown";
}

/* vpic_opts is the command line of both programs. */
struct vpic_opts {
    uint64_t               n;          /* particles per rank */
    uint64_t               rank, size; /* this rank, and how many write or read */
    const char            *run;        /* the run's name */
    pdc_region_partition_t partition;  /* of the objects --create makes */
    int                    partition_set;
    int                    create; /* make the container and objects, and exit */
    int                    sync;   /* say "ready" and wait for "go" before moving data */
};

/* vpic_launcher lists the rank and size variables of the launchers, as
 * pdc server reads them. */
static const char *const vpic_launcher[][2] = {
    {"PMI_RANK", "PMI_SIZE"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"SLURM_PROCID", "SLURM_NTASKS"},
    {"FLUX_TASK_RANK", "FLUX_JOB_SIZE"},
};

static uint64_t vpic_number(const char *what, const char *s)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (*s == '\0' || *s == '-' || *end != '\0' || errno != 0)
        vpic_die("%s %s: want a whole number", what, s);
    return x;
}

/* The flags both programs take, for their usage text. */
#define VPIC_FLAGS                                                                                           \
    "  -n N          particles per rank (default 4194304)\n"                                                 \
    "  -rank, -size  this rank and the number of ranks (default: from the launcher's PMI_RANK/PMI_SIZE,\n"   \
    "                OMPI_COMM_WORLD_RANK/_SIZE, SLURM_PROCID/SLURM_NTASKS or FLUX_TASK_RANK/FLUX_JOB_SIZE;\n" \
    "                else rank 0 of 1)\n"                                                                    \
    "  -run NAME     the run: objects vpic-NAME-x ... vpic-NAME-id2 in the container \"vpic\"\n"             \
    "  -sync         print \"ready\" once set up, then wait for a line \"go\" on stdin\n"

/* vpic_parse reads the command line; flags take one or two dashes and
 * their value as the next argument or after '='. -h prints usage. */
static inline struct vpic_opts vpic_parse(int argc, char **argv, int create_allowed, const char *usage)
{
    struct vpic_opts o = {.n = 4194304, .size = 1, .partition = PDC_REGION_STATIC};
    for (size_t l = 0; l < sizeof vpic_launcher / sizeof vpic_launcher[0]; l++) {
        const char *r = getenv(vpic_launcher[l][0]), *s = getenv(vpic_launcher[l][1]);
        if (r == NULL || *r == '\0')
            continue;
        o.rank = vpic_number(vpic_launcher[l][0], r);
        if (s != NULL && *s != '\0')
            o.size = vpic_number(vpic_launcher[l][1], s);
        break;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-')
            vpic_die("unexpected argument %s (-h for usage)", a);
        a += a[1] == '-' ? 2 : 1;
        char        name[32];
        const char *val = strchr(a, '=');
        size_t      nl  = val ? (size_t)(val - a) : strlen(a);
        if (nl >= sizeof name)
            vpic_die("unknown flag %s (-h for usage)", argv[i]);
        memcpy(name, a, nl);
        name[nl] = '\0';
        if (val)
            val++;
        if (strcmp(name, "h") == 0 || strcmp(name, "help") == 0) {
            fputs(usage, stdout);
            exit(0);
        }
        if (strcmp(name, "sync") == 0 || (create_allowed && strcmp(name, "create") == 0)) {
            if (val)
                vpic_die("flag -%s takes no value", name);
            if (strcmp(name, "sync") == 0)
                o.sync = 1;
            else
                o.create = 1;
            continue;
        }
        if (strcmp(name, "n") != 0 && strcmp(name, "rank") != 0 && strcmp(name, "size") != 0 && strcmp(name, "run") != 0 &&
            strcmp(name, "partition") != 0)
            vpic_die("unknown flag %s (-h for usage)", argv[i]);
        if (!val) {
            if (i + 1 == argc)
                vpic_die("flag -%s needs a value", name);
            val = argv[++i];
        }
        if (strcmp(name, "n") == 0)
            o.n = vpic_number("-n", val);
        else if (strcmp(name, "rank") == 0)
            o.rank = vpic_number("-rank", val);
        else if (strcmp(name, "size") == 0)
            o.size = vpic_number("-size", val);
        else if (strcmp(name, "run") == 0)
            o.run = val;
        else {
            int found = 0;
            for (int p = 0; p < 4 && !found; p++) {
                char num[2] = {(char)('0' + p), '\0'};
                if (strcmp(val, vpic_partitions[p]) == 0 || strcmp(val, num) == 0) {
                    o.partition = (pdc_region_partition_t)p;
                    found       = 1;
                }
            }
            if (!found)
                vpic_die("unknown partition %s (want object-static, region-static, region-dynamic or region-local)", val);
            o.partition_set = 1;
        }
    }
    if (o.run == NULL || *o.run == '\0')
        vpic_die("-run NAME is required (-h for usage)");
    if (strpbrk(o.run, " \t\n") != NULL)
        vpic_die("-run \"%s\": a run name has no spaces (the result line is split at them)", o.run);
    if (o.n == 0)
        vpic_die("-n 0: want at least one particle per rank");
    if (o.size == 0)
        vpic_die("-size 0: want at least one rank");
    if (o.rank >= o.size)
        vpic_die("rank %" PRIu64 " is not below size %" PRIu64, o.rank, o.size);
    if (o.n > UINT64_MAX / o.size || o.n > SIZE_MAX / 4)
        vpic_die("-n %" PRIu64 " particles by %" PRIu64 " ranks is too many", o.n, o.size);
    return o;
}

/* vpic_now_mono and vpic_now_real are clocks in seconds. */
static inline double vpic_now(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* vpic_await says "ready" on stdout and waits for a line "go" on stdin. */
static inline void vpic_await(void)
{
    char line[16];
    printf("ready\n");
    if (fflush(stdout) != 0)
        vpic_die("write ready: %s", strerror(errno));
    if (fgets(line, sizeof line, stdin) == NULL || strcmp(line, "go\n") != 0)
        vpic_die("-sync: no \"go\" line on stdin");
}

/*
 * vpic_open opens run's 8 objects on pdc and checks that each is 1-D of
 * N*SIZE particles of its variable's type and, if o->partition_set, of
 * that partition strategy. ids gets the handles.
 */
static inline void vpic_open(pdcid_t pdc, const struct vpic_opts *o, pdcid_t ids[VPIC_NVARS])
{
    uint64_t total = o->n * o->size;
    for (int v = 0; v < VPIC_NVARS; v++) {
        char name[256];
        vpic_object_name(name, sizeof name, o->run, v);
        ids[v] = PDCobj_open(name, pdc);
        if (ids[v] == 0)
            vpic_die("PDCobj_open(\"%s\") failed (was run %s created, by %s -create?)", name, o->run,
                     "pdc_vpicio");
        struct pdc_obj_info *info = PDCobj_get_info(ids[v]);
        if (info == NULL)
            vpic_die("PDCobj_get_info(\"%s\") failed", name);
        struct pdc_obj_prop *p = info->obj_pt;
        if (p->ndim != 1 || p->dims[0] != total)
            vpic_die("object \"%s\" has %zu dims, the first %" PRIu64 ": want 1 dim of n*size = %" PRIu64 " particles", name,
                     p->ndim, p->ndim > 0 ? p->dims[0] : 0, total);
        if (p->type != vpic_vars[v].type)
            vpic_die("object \"%s\" holds pdc_var_type_t %d, want %d", name, (int)p->type, (int)vpic_vars[v].type);
        if (o->partition_set && p->region_partition != o->partition)
            vpic_die("object \"%s\" is partitioned %s, want %s", name, vpic_partition_name(p->region_partition),
                     vpic_partition_name(o->partition));
        free(info);
    }
}

/*
 * vpic_transfers makes one transfer per variable between bufs[v] (N
 * elements) and the rank's block of object ids[v].
 */
static inline void vpic_transfers(const struct vpic_opts *o, const pdcid_t ids[VPIC_NVARS], uint32_t *bufs[VPIC_NVARS],
                                  pdc_access_t access, pdcid_t xfers[VPIC_NVARS])
{
    uint64_t zero = 0, n = o->n, off = o->rank * o->n;
    pdcid_t  local = PDCregion_create(1, &zero, &n), remote = PDCregion_create(1, &off, &n);
    if (local == 0 || remote == 0)
        vpic_die("PDCregion_create failed");
    for (int v = 0; v < VPIC_NVARS; v++) {
        xfers[v] = PDCregion_transfer_create(bufs[v], access, ids[v], local, remote);
        if (xfers[v] == 0)
            vpic_die("PDCregion_transfer_create(%s) of variable %s failed", access == PDC_WRITE ? "PDC_WRITE" : "PDC_READ",
                     vpic_vars[v].name);
    }
    if (PDCregion_close(local) != SUCCEED || PDCregion_close(remote) != SUCCEED)
        vpic_die("PDCregion_close failed");
}

/* vpic_finish closes the transfers, the objects and the connection. */
static inline void vpic_finish(pdcid_t pdc, pdcid_t ids[VPIC_NVARS], pdcid_t xfers[VPIC_NVARS])
{
    for (int v = 0; v < VPIC_NVARS; v++)
        if (PDCregion_transfer_close(xfers[v]) != SUCCEED)
            vpic_die("PDCregion_transfer_close of variable %s failed", vpic_vars[v].name);
    for (int v = 0; v < VPIC_NVARS; v++)
        if (PDCobj_close(ids[v]) != SUCCEED)
            vpic_die("PDCobj_close of variable %s failed", vpic_vars[v].name);
    if (PDCclose(pdc) != SUCCEED)
        vpic_die("PDCclose failed");
}

/* vpic_alloc returns n uint32_t, each byte set to fill. */
static inline uint32_t *vpic_alloc(uint64_t n, int fill)
{
    uint32_t *b = malloc((size_t)n * 4);
    if (b == NULL)
        vpic_die("cannot allocate %" PRIu64 " bytes", n * 4);
    memset(b, fill, (size_t)n * 4);
    return b;
}

/* vpic_report prints the result line. */
static inline void vpic_report(const char *what, const struct vpic_opts *o, double start, double end, double seconds)
{
    printf("%s run=%s rank=%" PRIu64 " size=%" PRIu64 " n=%" PRIu64 " bytes=%" PRIu64 " seconds=%.6f start=%.6f end=%.6f\n", what,
           o->run, o->rank, o->size, o->n, o->n * 4 * VPIC_NVARS, seconds, start, end);
    if (fflush(stdout) != 0)
        vpic_die("write the result: %s", strerror(errno));
}

#endif /* PDC_BENCH_VPIC_H */
