/*
 * libpdc.so, the library programs link: a loader in front of the library
 * that does the work, libpdc_core.so (Go, -buildmode=c-shared).
 *
 * Why: the Go runtime does not survive fork(). Its threads are not copied
 * into the child, so a child's first call into a core its parent started
 * waits forever for them (Python's multiprocessing and PyTorch's data
 * loaders fork after the parent used the library). A forked child gets a
 * fresh copy of the core instead, loaded into a link-map namespace of its
 * own with dlmopen: a second Go runtime that starts in the child as the
 * first did in the parent. The parent's copy stays in the child's memory,
 * unused. Handles the parent opened mean nothing to the new copy; the
 * child opens its own (PDCinit and onwards), as a program does after exec.
 *
 * How: every public function of the core has a stub here (stubs.S, made
 * by gen-stubs.sh from the core's symbol table) that jumps through a
 * table. The table is filled when the core is loaded, at first call; in a
 * forked child it is emptied, so the first call there loads a new copy.
 * A stub does not know its function's signature, and need not: it jumps
 * with the caller's registers and stack untouched.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../libpdc/host.h"

#define HIDDEN __attribute__((visibility("hidden")))

/* From the generated stubs.S. */
extern const char *const pdc_shim_names[] HIDDEN;
extern const unsigned    pdc_shim_count HIDDEN;
extern void *pdc_shim_table[] HIDDEN;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
/* loaded: the table holds this process's copy of the core. */
static int loaded;
/* forked: a core was started before a fork that made this process. */
static int forked;
/* generation: how many cores were started in this process's line before
 * its own: the core numbers its handles from it (capi.Lib.ForkedGeneration). */
static unsigned generation;
static void *core;

static void fail(const char *what, const char *why)
{
    /* As the dynamic loader does when a library is missing: the program
     * cannot go on without its library, and a stub cannot return an error
     * of the right type. */
    fprintf(stderr, "libpdc: %s: %s\n", what, why);
    _exit(127);
}

/* corepath is libpdc_core.so in the directory this library was loaded from. */
static void corepath(char *buf, size_t n)
{
    Dl_info info;
    if (dladdr((void *)corepath, &info) == 0 || info.dli_fname == NULL)
        fail("cannot find where libpdc.so was loaded from", "dladdr failed");
    const char *slash = strrchr(info.dli_fname, '/');
    size_t      dir   = slash == NULL ? 0 : (size_t)(slash - info.dli_fname) + 1;
    if (dir + sizeof "libpdc_core.so" > n)
        fail(info.dli_fname, "path too long");
    memcpy(buf, info.dli_fname, dir);
    strcpy(buf + dir, "libpdc_core.so");
}

static void load(void)
{
    char path[4096];
    corepath(path, sizeof path);
    /* RTLD_LOCAL: the core's symbols stay out of the program's scope, so
     * the program's calls always go through the stubs. */
    core = forked ? dlmopen(LM_ID_NEWLM, path, RTLD_NOW | RTLD_LOCAL) : dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (core == NULL)
        fail(forked ? "cannot load a fresh libpdc_core.so in this forked process" : "cannot load libpdc_core.so",
             dlerror());
    int (*use_host)(const struct pdcgo_host *) = (int (*)(const struct pdcgo_host *))dlsym(core, "pdcgo_use_host");
    if (use_host == NULL)
        fail(path, "not a libpdc core: no pdcgo_use_host");
    struct pdcgo_host host = {
        .size       = sizeof host,
        .malloc_fn  = malloc,
        .calloc_fn  = calloc,
        .realloc_fn = realloc,
        .free_fn    = free,
        .getenv_fn  = getenv,
        .vprintf_fn = vprintf,
        .generation = generation,
    };
    if (use_host(&host) != 0)
        fail(path, "it refused the loader's C library functions");
    for (unsigned i = 0; i < pdc_shim_count; i++) {
        void *fn = dlsym(core, pdc_shim_names[i]);
        if (fn == NULL)
            fail(path, "a function libpdc.so was built with is missing: libpdc.so and libpdc_core.so are from different builds");
        __atomic_store_n(&pdc_shim_table[i], fn, __ATOMIC_RELEASE);
    }
    loaded = 1;
}

/* pdc_shim_resolve is called by a stub whose table entry is empty. */
HIDDEN void *pdc_shim_resolve(unsigned i)
{
    pthread_mutex_lock(&mu);
    if (!loaded)
        load();
    void *fn = pdc_shim_table[i];
    pthread_mutex_unlock(&mu);
    return fn;
}

static void before_fork(void) { pthread_mutex_lock(&mu); }

static void after_fork_parent(void) { pthread_mutex_unlock(&mu); }

static void after_fork_child(void)
{
    /* One thread, no other holder of mu: it can be made anew. */
    pthread_mutex_init(&mu, NULL);
    if (loaded) {
        forked = 1;
        generation++;
        loaded = 0;
        core   = NULL;
        memset(pdc_shim_table, 0, pdc_shim_count * sizeof pdc_shim_table[0]);
    }
}

/*
 * The core starts when the program starts, as it did when it was the
 * library programs linked: a missing core fails the program at once, not
 * at some later call.
 */
__attribute__((constructor)) static void start(void)
{
    if (pthread_atfork(before_fork, after_fork_parent, after_fork_child) != 0)
        fail("cannot register the fork handlers", "pthread_atfork failed");
    pthread_mutex_lock(&mu);
    if (!loaded)
        load();
    pthread_mutex_unlock(&mu);
}
