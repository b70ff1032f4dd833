/*
 * fork: a process that used libpdc and then forks can use libpdc in the
 * child, as Python's multiprocessing and PyTorch's data loaders need.
 *
 * The parent writes an object and, its connection still open, forks
 * children; each connects anew, reads the parent's object and writes one
 * of its own, and the first also forks a grandchild that does the same
 * and consumes a staged file if given one. The parent meanwhile keeps
 * using its connection, and after them reads every object the children
 * wrote. A handle a child inherited fails with an error that says whose
 * it is, and does not hang.
 *
 * usage: fork CHILDREN [STAGED-PATH SIZE]
 */
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "pdc.h"
#include "pdc_stage.h"

#define SIZE 65536

static char        run[64];
static const char *staged;
static size_t      staged_size;

/* put writes who's object in cont. */
static void put(pdcid_t cont, const char *who)
{
    static unsigned char buf[SIZE];
    char                 name[128];
    snprintf(name, sizeof name, "%s-%s", run, who);
    for (size_t i = 0; i < SIZE; i++)
        buf[i] = pattern(name, i);
    pdcid_t obj = PDCobj_put_data(name, buf, SIZE, cont);
    CHECK(obj != 0, "%s: PDCobj_put_data(%s)", who, name);
    CHECK(PDCobj_close(obj) == SUCCEED, "%s: PDCobj_close(%s)", who, name);
}

/* check reads who's object through pdc and checks every byte. */
static void check(pdcid_t pdc, const char *me, const char *who)
{
    static unsigned char got[SIZE];
    char                 name[128];
    snprintf(name, sizeof name, "%s-%s", run, who);
    pdcid_t obj = PDCobj_open(name, pdc);
    CHECK(obj != 0, "%s: PDCobj_open(%s)", me, name);
    memset(got, 0, sizeof got);
    CHECK(PDCobj_get_data(obj, got, SIZE) == SUCCEED, "%s: PDCobj_get_data(%s)", me, name);
    for (size_t i = 0; i < SIZE; i++)
        CHECK(got[i] == pattern(name, i), "%s: %s byte %zu is %d, want %d", me, name, i, got[i], pattern(name, i));
    CHECK(PDCobj_close(obj) == SUCCEED, "%s: PDCobj_close(%s)", me, name);
}

/* child is a forked process's life: inherited is the parent's connection. */
static int child(const char *me, pdcid_t inherited, int fork_again)
{
    /* The parent's handle is not this process's: a clear error, no hang. */
    CHECK(PDCcont_open(run, inherited) == 0, "%s: the parent's connection %llu worked in the child", me,
          (unsigned long long)inherited);
    pdcid_t pdc = PDCinit("pdc");
    CHECK(pdc != 0, "%s: PDCinit", me);
    pdcid_t cont = PDCcont_open(run, pdc);
    CHECK(cont != 0, "%s: PDCcont_open(%s)", me, run);
    check(pdc, me, "parent");
    put(cont, me);
    if (fork_again) {
        char  sub[64];
        pid_t p;
        snprintf(sub, sizeof sub, "%s-child", me);
        fflush(NULL);
        p = fork();
        CHECK(p >= 0, "%s: fork: %s", me, strerror(errno));
        if (p == 0)
            _exit(child(sub, pdc, 0));
        int st;
        CHECK(waitpid(p, &st, 0) == p, "%s: waitpid", me);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: its child %s ended with status %d", me, sub, st);
        check(pdc, me, sub);
        if (staged != NULL) {
            char *local = NULL;
            CHECK(pdc_stage_consume_local(pdc, staged, 60, &local) == 0, "%s: pdc_stage_consume(%s)", me, staged);
            check_file(local, staged, staged_size);
            free(local); /* the program's free, on memory libpdc gave it */
        }
    }
    CHECK(PDCcont_close(cont) == SUCCEED && PDCclose(pdc) == SUCCEED, "%s: close", me);
    fflush(NULL);
    return 0;
}

int main(int argc, char **argv)
{
    CHECK(argc == 2 || argc == 4, "usage: fork CHILDREN [STAGED-PATH SIZE]");
    int children = atoi(argv[1]);
    CHECK(children > 0 && children < 64, "CHILDREN: want 1 to 63, not %s", argv[1]);
    if (argc == 4) {
        staged      = argv[2];
        staged_size = (size_t)strtoull(argv[3], NULL, 10);
    }
    snprintf(run, sizeof run, "fork-%d", (int)getpid());

    pdcid_t pdc  = PDCinit("pdc");
    pdcid_t cont = PDCcont_create(run, PDCprop_create(PDC_CONT_CREATE, pdc));
    CHECK(pdc != 0 && cont != 0, "parent: setup");
    put(cont, "parent");

    pid_t pids[64];
    for (int i = 0; i < children; i++) {
        char me[32];
        snprintf(me, sizeof me, "child%d", i);
        fflush(NULL);
        pids[i] = fork();
        CHECK(pids[i] >= 0, "fork: %s", strerror(errno));
        if (pids[i] == 0)
            _exit(child(me, pdc, i == 0));
    }
    /* The parent's own copy still works while its children run. */
    check(pdc, "parent", "parent");
    for (int i = 0; i < children; i++) {
        int st;
        CHECK(waitpid(pids[i], &st, 0) == pids[i], "waitpid");
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child%d ended with status %d", i, st);
    }
    for (int i = 0; i < children; i++) {
        char who[32];
        snprintf(who, sizeof who, "child%d", i);
        check(pdc, "parent", who);
    }
    check(pdc, "parent", "child0-child");
    CHECK(PDCcont_close(cont) == SUCCEED && PDCclose(pdc) == SUCCEED, "parent: close");
    printf("fork: %d children and a grandchild used libpdc\n", children);
    return 0;
}
