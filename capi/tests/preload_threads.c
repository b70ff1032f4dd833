/*
 * preload_threads: two threads open two files in the consumer dir at once,
 * through libpdc_preload.so, before either is produced: both wait, and
 * both get their file.
 *
 * usage: preload_threads PATH1 NAME1 PATH2 NAME2 SIZE
 */
#include <pthread.h>

#include "check.h"

static size_t size;

struct job {
    const char *path, *name;
};

static void *reader(void *arg)
{
    struct job *j = arg;
    check_file(j->path, j->name, size);
    return NULL;
}

int main(int argc, char **argv)
{
    CHECK(argc == 6, "usage: preload_threads PATH1 NAME1 PATH2 NAME2 SIZE");
    size = strtoull(argv[5], NULL, 10);
    struct job jobs[2] = {{argv[1], argv[2]}, {argv[3], argv[4]}};
    pthread_t  t[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, reader, &jobs[i]) == 0, "pthread_create");
    for (int i = 0; i < 2; i++)
        CHECK(pthread_join(t[i], NULL) == 0, "pthread_join");
    printf("two threads read %s and %s\n", argv[1], argv[3]);
    return 0;
}
