/*
 * preload_read: a consumer that knows nothing of pdc: it reads PATH with
 * fopen and fread and checks SIZE bytes of its pattern (check.h). Run
 * with libpdc_preload.so in LD_PRELOAD and PATH in the consumer dir, the
 * fopen waits for the file to be produced.
 *
 * usage: preload_read PATH NAME SIZE
 */
#include "check.h"

int main(int argc, char **argv)
{
    CHECK(argc == 4, "usage: preload_read PATH NAME SIZE");
    const char *path = argv[1], *name = argv[2];
    size_t      size = strtoull(argv[3], NULL, 10);
    FILE       *f    = fopen(path, "rb");
    CHECK(f != NULL, "fopen %s: %s", path, strerror(errno));
    static unsigned char buf[1 << 16];
    size_t               off = 0, n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        for (size_t i = 0; i < n; i++)
            CHECK(off + i < size && buf[i] == pattern(name, off + i), "%s: byte %zu is wrong or past %zu", path, off + i, size);
        off += n;
    }
    CHECK(!ferror(f), "fread %s: %s", path, strerror(errno));
    CHECK(off == size, "%s has %zu bytes, want %zu", path, off, size);
    CHECK(fclose(f) == 0, "fclose %s", path);
    printf("read %s (%zu bytes)\n", path, size);
    return 0;
}
