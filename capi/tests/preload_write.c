/*
 * preload_write: a producer that knows nothing of pdc: it writes SIZE
 * bytes of NAME's pattern (check.h) to PATH with fopen and fwrite, and
 * closes it with fclose, or with "exit" leaves it to exit (its last bytes
 * still in the stream's buffer). Run with libpdc_preload.so in LD_PRELOAD
 * and PATH in the producer dir, the file is produced when it is closed.
 *
 * usage: preload_write PATH NAME SIZE [exit]
 */
#include "check.h"

int main(int argc, char **argv)
{
    CHECK(argc == 4 || argc == 5, "usage: preload_write PATH NAME SIZE [exit]");
    const char *path = argv[1], *name = argv[2];
    size_t      size = strtoull(argv[3], NULL, 10);
    FILE       *f    = fopen(path, "wb");
    CHECK(f != NULL, "fopen %s: %s", path, strerror(errno));
    static unsigned char buf[1 << 16];
    for (size_t off = 0; off < size;) {
        size_t n = size - off < sizeof buf ? size - off : sizeof buf;
        for (size_t i = 0; i < n; i++)
            buf[i] = pattern(name, off + i);
        CHECK(fwrite(buf, 1, n, f) == n, "fwrite %s: %s", path, strerror(errno));
        off += n;
    }
    if (argc == 5)
        exit(0); /* no fclose: exit closes it */
    CHECK(fclose(f) == 0, "fclose %s: %s", path, strerror(errno));
    return 0;
}
