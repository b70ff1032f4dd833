/* check.h - assertions and test data for libpdc's C tests. */
#ifndef CHECK_H
#define CHECK_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* CHECK fails the test, naming the line, when cond is false. */
#define CHECK(cond, ...)                                                                \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);  \
            fprintf(stderr, __VA_ARGS__);                                               \
            fputc('\n', stderr);                                                        \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

/* pattern is byte i of a test file whose contents depend on its name. */
static inline unsigned char pattern(const char *name, size_t i)
{
    unsigned h = 2166136261u;
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return (unsigned char)((i * 131u + h) >> 3);
}

/* mkdirs makes the directories above path, as mkdir -p. */
static inline void mkdirs(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        CHECK(mkdir(buf, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", buf, strerror(errno));
        *p = '/';
    }
}

/* write_file writes size bytes of name's pattern to path. */
static inline void write_file(const char *path, const char *name, size_t size)
{
    mkdirs(path);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "create %s: %s", path, strerror(errno));
    for (size_t i = 0; i < size; i++)
        CHECK(fputc(pattern(name, i), f) != EOF, "write %s", path);
    CHECK(fclose(f) == 0, "close %s: %s", path, strerror(errno));
}

/* check_file checks that path holds size bytes of name's pattern. */
static inline void check_file(const char *path, const char *name, size_t size)
{
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "open %s: %s", path, strerror(errno));
    size_t i = 0;
    int    c;
    while ((c = fgetc(f)) != EOF) {
        CHECK(i < size, "%s is longer than %zu bytes", path, size);
        CHECK(c == pattern(name, i), "%s: byte %zu is %d, want %d", path, i, c, pattern(name, i));
        i++;
    }
    CHECK(i == size, "%s has %zu bytes, want %zu", path, i, size);
    fclose(f);
}

/* now is a monotonic clock in seconds. */
static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

#endif /* CHECK_H */
