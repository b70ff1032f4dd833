/*
 * preload_untouched: opens, stats and reads PATHs (outside the staging
 * dirs, or directories inside them) N times each through
 * libpdc_preload.so, and checks that libpdc was never loaded: such paths
 * go straight to libc. It prints the time per open+close of the first
 * path, for information.
 *
 * usage: preload_untouched N PATH...
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

int main(int argc, char **argv)
{
    CHECK(argc >= 3, "usage: preload_untouched N PATH...");
    long   n     = strtol(argv[1], NULL, 10);
    double t0    = now();
    for (int p = 2; p < argc; p++) {
        for (long i = 0; i < n; i++) {
            int fd = open(argv[p], O_RDONLY);
            CHECK(fd >= 0, "open %s: %s", argv[p], strerror(errno));
            CHECK(close(fd) == 0, "close %s: %s", argv[p], strerror(errno));
            if (p == 2 && i == n - 1)
                printf("%.0f ns per open+close of %s\n", (now() - t0) / n * 1e9, argv[p]);
        }
        struct stat st;
        CHECK(stat(argv[p], &st) == 0, "stat %s: %s", argv[p], strerror(errno));
        CHECK(access(argv[p], R_OK) == 0, "access %s: %s", argv[p], strerror(errno));
        FILE *f = fopen(argv[p], "r");
        CHECK(f != NULL, "fopen %s: %s", argv[p], strerror(errno));
        fclose(f);
    }
    FILE *maps = fopen("/proc/self/maps", "r");
    CHECK(maps != NULL, "open /proc/self/maps: %s", strerror(errno));
    char line[4096];
    while (fgets(line, sizeof line, maps) != NULL)
        CHECK(strstr(line, "/libpdc.so") == NULL, "libpdc was loaded: %s", line);
    fclose(maps);
    return 0;
}
