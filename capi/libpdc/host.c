/* See host.h. Until the loader says otherwise, the core's own C library. */
#include <stdio.h>
#include <stdlib.h>

#include "_cgo_export.h"
#include "host.h"

static struct pdcgo_host host = {
    .size       = sizeof(struct pdcgo_host),
    .malloc_fn  = malloc,
    .calloc_fn  = calloc,
    .realloc_fn = realloc,
    .free_fn    = free,
    .getenv_fn  = getenv,
    .vprintf_fn = vprintf,
};

void *pdcgo_malloc(size_t n) { return host.malloc_fn(n); }
void *pdcgo_calloc(size_t n, size_t size) { return host.calloc_fn(n, size); }
void *pdcgo_realloc(void *p, size_t n) { return host.realloc_fn(p, n); }
void  pdcgo_free(void *p) { host.free_fn(p); }
char *pdcgo_getenv(const char *name) { return host.getenv_fn(name); }

int pdcgo_printf(const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    int n = host.vprintf_fn(format, ap);
    va_end(ap);
    return n;
}

/*
 * The loader calls this once, before any other call into the core, so no
 * allocation made through the core's own functions reaches the program's.
 * The allocation functions come as a set or not at all.
 */
int pdcgo_use_host(const struct pdcgo_host *h)
{
    if (h == NULL || h->size < offsetof(struct pdcgo_host, getenv_fn))
        return -1;
    host.malloc_fn  = h->malloc_fn;
    host.calloc_fn  = h->calloc_fn;
    host.realloc_fn = h->realloc_fn;
    host.free_fn    = h->free_fn;
    if (h->size >= offsetof(struct pdcgo_host, vprintf_fn))
        host.getenv_fn = h->getenv_fn;
    if (h->size >= offsetof(struct pdcgo_host, generation))
        host.vprintf_fn = h->vprintf_fn;
    if (h->size >= sizeof(struct pdcgo_host))
        pdcgo_forked(h->generation);
    return 0;
}
