/*
 * preload_vfork: a process reads FIRST (which loads libpdc into it, through
 * libpdc_preload.so), then vforks; the child, sharing the parent's memory,
 * opens SECOND before it exits. The child must not use or change the
 * parent's libpdc connection: afterwards the parent reads SECOND and THIRD
 * through it.
 *
 * usage: preload_vfork FIRST NAME1 SECOND NAME2 THIRD NAME3 SIZE
 */
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

int main(int argc, char **argv)
{
    CHECK(argc == 8, "usage: preload_vfork FIRST NAME1 SECOND NAME2 THIRD NAME3 SIZE");
    size_t size = strtoull(argv[7], NULL, 10);
    check_file(argv[1], argv[2], size);
    pid_t pid = vfork();
    CHECK(pid >= 0, "vfork: %s", strerror(errno));
    if (pid == 0) {
        int fd = open(argv[3], O_RDONLY);
        _exit(fd >= 0 ? 0 : 1);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the vfork child could not open %s (status %d)", argv[3], status);
    check_file(argv[3], argv[4], size);
    check_file(argv[5], argv[6], size);
    printf("parent read %s and %s after its vfork child opened %s\n", argv[3], argv[5], argv[3]);
    return 0;
}
