/*
 * The C library functions libpdc hands memory out, reads the environment
 * and prints through. libpdc.so is a small loader (capi/shim) over this
 * library, libpdc_core.so; in a process forked after the core started, the
 * loader gives the child a fresh copy of the core in a link-map namespace
 * of its own (dlmopen), which has its own copy of the C library. Memory the
 * program frees with its free(), variables it sets with its setenv() and
 * what it prints to its stdout must then still be the program's: the
 * loader passes its own functions here, and every allocation that crosses
 * the API, and every one the core frees, goes through these.
 */
#ifndef PDCGO_HOST_H
#define PDCGO_HOST_H

#include <stdarg.h>
#include <stddef.h>

/*
 * struct pdcgo_host is what the loader passes. size is sizeof the struct
 * the loader was built with: a core given a smaller one (an older loader)
 * keeps its own functions for the fields past it.
 */
struct pdcgo_host {
    size_t size;
    void *(*malloc_fn)(size_t);
    void *(*calloc_fn)(size_t, size_t);
    void *(*realloc_fn)(void *, size_t);
    void (*free_fn)(void *);
    char *(*getenv_fn)(const char *);
    int (*vprintf_fn)(const char *, va_list);
    /* generation: how many forks this copy of the core is from the first
     * (0 in the process that loaded libpdc.so; 1 in its forked child...). */
    unsigned generation;
};

void *pdcgo_malloc(size_t n);
void *pdcgo_calloc(size_t n, size_t size);
void *pdcgo_realloc(void *p, size_t n);
void  pdcgo_free(void *p);
char *pdcgo_getenv(const char *name);
int   pdcgo_printf(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* pdcgo_use_host returns 0, or -1 if host is NULL or too small to use. */
int pdcgo_use_host(const struct pdcgo_host *host);

#endif
