/*
 * preload_fork: a process reads FIRST (which loads libpdc into it, through
 * libpdc_preload.so), then forks; the child reads SECOND. The child cannot
 * use the parent's Go runtime (its threads are gone): the interposer
 * consumes through the child's own copy of libpdc (libpdc.so's loader) or,
 * without the loader, through `pdc stage consume`; it must not hang.
 *
 * usage: preload_fork FIRST NAME1 SECOND NAME2 SIZE
 */
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

int main(int argc, char **argv)
{
    CHECK(argc == 6, "usage: preload_fork FIRST NAME1 SECOND NAME2 SIZE");
    size_t size = strtoull(argv[5], NULL, 10);
    check_file(argv[1], argv[2], size);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        check_file(argv[3], argv[4], size);
        printf("child read %s\n", argv[3]);
        fflush(stdout);
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed (status %d)", status);
    printf("parent read %s, child read %s\n", argv[1], argv[3]);
    return 0;
}
