/* A stand-in for libpdc.so that logs the interposer's staging calls to
 * $PRELOAD_LOG ("consume REL", "produce REL") instead of making them. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

uint64_t PDCinit(const char *name) { (void)name; return 1; }

static int logged(const char *what, const char *rel)
{
    FILE *f = fopen(getenv("PRELOAD_LOG"), "a");
    if (f == NULL)
        return 5;
    fprintf(f, "%s %s\n", what, rel);
    fclose(f);
    return 0;
}

int pdcgo_preload_consume(uint64_t c, char *rel) { (void)c; return logged("consume", rel); }

int pdcgo_preload_produce(uint64_t c, char *rel) { (void)c; return logged("produce", rel); }
