/*
 * libpdc_preload.so: file staging for unmodified programs, through
 * LD_PRELOAD (docs/design/0025-preload-interposer.md).
 *
 *   LD_PRELOAD=PREFIX/lib/libpdc_preload.so PDC_STAGE_CONSUMER_DIR=... cat ...
 *
 * In the consumer dir, an open for reading (and stat, access) consumes the
 * file first, waiting until it is produced, within $PDC_TIMEOUT. In the
 * producer dir, a file opened for writing is produced when its last
 * descriptor closes (or at exit). Everything else goes straight to libc.
 *
 * This file is plain C: it is loaded into every process of a job (shells,
 * cp, cat), so a path outside the dirs costs a prefix comparison and
 * nothing loads. libpdc.so, with its Go runtime, is loaded with dlopen the
 * first time a path inside a dir needs a staging call. A process forked
 * after that uses libpdc too, with a connection of its own: libpdc.so's
 * loader (capi/shim) gives it a fresh copy of the Go runtime. Where
 * libpdc.so has no loader (not x86-64) the child cannot use the parent's
 * Go runtime (its threads are gone): there the staging call runs `pdc
 * stage consume/produce` as a subprocess.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define EXPORT __attribute__((visibility("default")))

/* The real functions, from the next object in the lookup order (libc). */
static int (*real_open)(const char *, int, ...);
static int (*real_open64)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_openat64)(int, const char *, int, ...);
static int (*real_open_2)(const char *, int);
static int (*real_open64_2)(const char *, int);
static int (*real_openat_2)(int, const char *, int);
static int (*real_openat64_2)(int, const char *, int);
static int (*real_creat)(const char *, mode_t);
static int (*real_creat64)(const char *, mode_t);
static FILE *(*real_fopen)(const char *, const char *);
static FILE *(*real_fopen64)(const char *, const char *);
static int (*real_close)(int);
static int (*real_fclose)(FILE *);
static int (*real_dup)(int);
static int (*real_dup2)(int, int);
static int (*real_dup3)(int, int, int);
static int (*real_fcntl)(int, int, ...);
static int (*real_fcntl64)(int, int, ...);
static int (*real_stat)(const char *, struct stat *);
static int (*real_stat64)(const char *, struct stat64 *);
static int (*real_lstat)(const char *, struct stat *);
static int (*real_lstat64)(const char *, struct stat64 *);
static int (*real_fstatat)(int, const char *, struct stat *, int);
static int (*real_fstatat64)(int, const char *, struct stat64 *, int);
static int (*real_xstat)(int, const char *, struct stat *);
static int (*real_xstat64)(int, const char *, struct stat64 *);
static int (*real_lxstat)(int, const char *, struct stat *);
static int (*real_lxstat64)(int, const char *, struct stat64 *);
static int (*real_fxstatat)(int, int, const char *, struct stat *, int);
static int (*real_fxstatat64)(int, int, const char *, struct stat64 *, int);
static int (*real_statx)(int, const char *, int, unsigned int, struct statx *);
static int (*real_access)(const char *, int);
static int (*real_faccessat)(int, const char *, int, int);
static int (*real_eaccess)(const char *, int);
static int (*real_euidaccess)(const char *, int);
static int (*real_rename)(const char *, const char *);
static int (*real_renameat)(int, const char *, int, const char *);
static int (*real_renameat2)(int, const char *, int, const char *, unsigned int);
static int (*real_execve)(const char *, char *const[], char *const[]);
static int (*real_execvpe)(const char *, char *const[], char *const[]);

/* next finds the real name; glibc's __xstat family exists only as old
 * versioned symbols since 2.33, which plain dlsym may not return. */
static void *next(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (f == NULL)
        f = dlvsym(RTLD_NEXT, name, "GLIBC_2.2.5");
    return f;
}

/* A managed dir: as the environment names it, made absolute and cleaned,
 * and with its symbolic links resolved (when it exists at start). */
struct dir {
    char  *abs, *real;
    size_t n, rn;
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct dir     cons, prod;
static bool           active; /* a dir is set: anything else is a no-op */

/* busy is set on a thread while it makes a staging call, so that whatever
 * that call opens (libpdc's own files, dlopen's) goes straight to libc. */
static __thread int busy __attribute__((tls_model("initial-exec")));

/* clean makes path (absolute) lexically clean in place: no empty, "." or
 * ".." components, no trailing slash. */
static void clean(char *path)
{
    char *out = path, *in = path;
    while (*in != '\0') {
        while (*in == '/')
            in++;
        char *end = strchrnul(in, '/');
        size_t len = (size_t)(end - in);
        if (len == 0 || (len == 1 && in[0] == '.')) {
            /* skip */
        } else if (len == 2 && in[0] == '.' && in[1] == '.') {
            while (out > path && *--out != '/')
                ;
        } else {
            *out++ = '/';
            memmove(out, in, len);
            out += len;
        }
        in = end;
    }
    if (out == path)
        *out++ = '/';
    *out = '\0';
}

/* dotdot says whether path has a ".." component. */
static bool dotdot(const char *path)
{
    for (const char *p = strstr(path, ".."); p != NULL; p = strstr(p + 1, ".."))
        if ((p == path || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
            return true;
    return false;
}

/* resolve_dotdot makes path (absolute, with a ".." component) what the
 * kernel opens: ".." after a symbolic link leaves the link's target, not
 * the link's directory, so lexical cleaning would name another file (one
 * in a dir for one outside it, or the reverse). The directory part is
 * resolved (it must exist for the open to succeed); the last component
 * stays as given, as it does for a path without "..". */
static bool resolve_dotdot(char path[PATH_MAX])
{
    char   buf[PATH_MAX];
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        path[--len] = '\0';
    char *slash = strrchr(path, '/');
    char *last  = slash + 1;
    if (strcmp(last, "..") == 0 || strcmp(last, ".") == 0) {
        if (realpath(path, buf) == NULL) {
            clean(path);
            return true;
        }
        memcpy(path, buf, strlen(buf) + 1);
        return true;
    }
    *slash = '\0';
    const char *dir = slash == path ? "/" : path;
    if (realpath(dir, buf) == NULL) {
        *slash = '/';
        clean(path); /* the open fails: no such directory */
        return true;
    }
    size_t dn = strlen(buf), ln = strlen(last);
    if (dn + 1 + ln >= PATH_MAX)
        return false;
    memmove(path + dn + 1, last, ln + 1);
    memcpy(path, buf, dn);
    path[dn] = '/';
    clean(path);
    return true;
}

/* absolute writes the clean absolute form of path, relative to dirfd
 * (AT_FDCWD: the working directory) into out. */
static bool absolute(int dirfd, const char *path, char out[PATH_MAX])
{
    size_t n = 0;
    if (path[0] != '/') {
        if (dirfd == AT_FDCWD) {
            if (getcwd(out, PATH_MAX) == NULL)
                return false;
            n = strlen(out);
        } else {
            char link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
            ssize_t got = readlink(link, out, PATH_MAX - 1);
            if (got <= 0)
                return false;
            n = (size_t)got;
        }
        if (n + 1 >= PATH_MAX)
            return false;
        out[n++] = '/';
    }
    size_t len = strlen(path);
    if (n + len >= PATH_MAX)
        return false;
    memcpy(out + n, path, len + 1);
    if (dotdot(out))
        return resolve_dotdot(out);
    clean(out);
    return true;
}

static void dir_init(struct dir *d, const char *name, const char *alias)
{
    const char *v = getenv(name);
    if (v == NULL || v[0] == '\0')
        v = getenv(alias);
    if (v == NULL || v[0] == '\0')
        return;
    char buf[PATH_MAX];
    if (!absolute(AT_FDCWD, v, buf))
        return;
    d->abs = strdup(buf);
    d->n   = d->abs ? strlen(d->abs) : 0;
    if (realpath(v, buf) != NULL && (d->abs == NULL || strcmp(buf, d->abs) != 0)) {
        d->real = strdup(buf);
        d->rn   = d->real ? strlen(d->real) : 0;
    }
    active = active || d->abs != NULL;
}

/* within returns path's part below d (never empty: the dir itself is not
 * a file to stage), or NULL. */
static const char *within(const struct dir *d, const char *path)
{
    if (d->abs != NULL && strncmp(path, d->abs, d->n) == 0 && path[d->n] == '/' && path[d->n + 1] != '\0')
        return path + d->n + 1;
    if (d->real != NULL && strncmp(path, d->real, d->rn) == 0 && path[d->rn] == '/' && path[d->rn + 1] != '\0')
        return path + d->rn + 1;
    return NULL;
}

/* The open descriptors of files in the producer dir opened for writing.
 * Descriptors that dup shares one entry; it is produced when its last
 * descriptor closes. ntracked lets close skip the lock while none is open. */
struct entry {
    char *rel;
    pid_t pid; /* the process that opened it, the one that produces it */
    int   refs;
    bool  done;
};
static pthread_mutex_t tmu = PTHREAD_MUTEX_INITIALIZER;
static struct entry  **fds;
static int             nfds;
static atomic_int      ntracked;

/* table_pid is the process the table belongs to: set at init and by the
 * fork handler in a child. A vfork child (Python's subprocess, posix_spawn
 * users) shares the parent's memory and runs no fork handler: there
 * getpid() differs, and the table must not be touched, or the child's
 * dup2 onto 1 before exec would count as one of the parent's
 * descriptors, and the parent's close would no longer be the last. */
static pid_t table_pid;

static inline bool own_table(void) { return getpid() == table_pid; }

static void at_exit(int status, void *arg);
static void fork_prepare(void) { pthread_mutex_lock(&tmu); }
static void fork_parent(void) { pthread_mutex_unlock(&tmu); }
static pthread_mutex_t lmu = PTHREAD_MUTEX_INITIALIZER;
static void fork_child(void)
{
    table_pid = getpid();
    pthread_mutex_unlock(&tmu);
    /* Another thread may have held it (loading libpdc) at the fork. */
    pthread_mutex_init(&lmu, NULL);
}

static void init(void)
{
    real_open       = next("open");
    real_open64     = next("open64");
    real_openat     = next("openat");
    real_openat64   = next("openat64");
    real_open_2     = next("__open_2");
    real_open64_2   = next("__open64_2");
    real_openat_2   = next("__openat_2");
    real_openat64_2 = next("__openat64_2");
    real_creat      = next("creat");
    real_creat64    = next("creat64");
    real_fopen      = next("fopen");
    real_fopen64    = next("fopen64");
    real_close      = next("close");
    real_fclose     = next("fclose");
    real_dup        = next("dup");
    real_dup2       = next("dup2");
    real_dup3       = next("dup3");
    real_fcntl      = next("fcntl");
    real_fcntl64    = next("fcntl64");
    real_stat       = next("stat");
    real_stat64     = next("stat64");
    real_lstat      = next("lstat");
    real_lstat64    = next("lstat64");
    real_fstatat    = next("fstatat");
    real_fstatat64  = next("fstatat64");
    real_xstat      = next("__xstat");
    real_xstat64    = next("__xstat64");
    real_lxstat     = next("__lxstat");
    real_lxstat64   = next("__lxstat64");
    real_fxstatat   = next("__fxstatat");
    real_fxstatat64 = next("__fxstatat64");
    real_statx      = next("statx");
    real_access     = next("access");
    real_faccessat  = next("faccessat");
    real_eaccess    = next("eaccess");
    real_euidaccess = next("euidaccess");
    real_rename     = next("rename");
    real_renameat   = next("renameat");
    real_renameat2  = next("renameat2");
    real_execve     = next("execve");
    real_execvpe    = next("execvpe");
    table_pid = getpid();
    dir_init(&cons, "PDC_STAGE_CONSUMER_DIR", "DYAD_PATH_CONSUMER");
    dir_init(&prod, "PDC_STAGE_PRODUCER_DIR", "DYAD_PATH_PRODUCER");
    if (active)
        pthread_atfork(fork_prepare, fork_parent, fork_child);
    if (prod.abs != NULL)
        on_exit(at_exit, NULL);
}

/* ready resolves the real functions and the dirs once; it says whether
 * any dir is set. */
static inline bool ready(void)
{
    pthread_once(&once, init);
    return active && !busy;
}

/* ---- staging calls: libpdc in the process, or pdc in a subprocess ---- */

static void           *libpdc;
static pid_t           libpdc_pid; /* the process libpdc's runtime runs in */
static uint64_t        conn;       /* PDCinit's connection, 0 before */
/* fork_safe: libpdc.so is the loader (capi/shim) that gives a forked
 * child a fresh copy of the Go library, so a child uses it too, with a
 * connection of its own. Without the loader the library itself exports
 * the core's pdcgo_use_host. */
static bool fork_safe;
static uint64_t (*lib_init)(const char *);
static int (*lib_consume)(uint64_t, char *);
static int (*lib_produce)(uint64_t, char *);

/* sibling writes the path of name, relative to the directory this
 * library was loaded from, into out. */
static bool sibling(const char *name, char *out, size_t size)
{
    Dl_info info;
    if (dladdr((void *)sibling, &info) == 0 || info.dli_fname == NULL || strchr(info.dli_fname, '/') == NULL)
        return false;
    const char *slash = strrchr(info.dli_fname, '/');
    int         n     = snprintf(out, size, "%.*s/%s", (int)(slash - info.dli_fname), info.dli_fname, name);
    return n > 0 && (size_t)n < size;
}

/* connect returns libpdc's connection, loading libpdc and connecting the
 * first time; 0 with *err set when it cannot. Called with lmu held. */
static uint64_t connect_locked(int *err)
{
    if (libpdc == NULL) {
        char        path[PATH_MAX];
        const char *env = getenv("PDC_LIBPDC");
        if (env != NULL && env[0] != '\0')
            snprintf(path, sizeof path, "%s", env);
        else if (!sibling("libpdc.so", path, sizeof path))
            snprintf(path, sizeof path, "libpdc.so");
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h == NULL) {
            fprintf(stderr, "libpdc_preload: cannot load %s (set PDC_LIBPDC): %s\n", path, dlerror());
            *err = EIO;
            return 0;
        }
        lib_init    = (uint64_t(*)(const char *))dlsym(h, "PDCinit");
        lib_consume = (int (*)(uint64_t, char *))dlsym(h, "pdcgo_preload_consume");
        lib_produce = (int (*)(uint64_t, char *))dlsym(h, "pdcgo_preload_produce");
        if (lib_init == NULL || lib_consume == NULL || lib_produce == NULL) {
            fprintf(stderr, "libpdc_preload: %s is not a libpdc with the interposer's calls (PDCinit, pdcgo_preload_*)\n", path);
            *err = EIO;
            return 0;
        }
        fork_safe  = dlsym(h, "pdcgo_use_host") == NULL;
        libpdc     = h;
        libpdc_pid = getpid();
    }
    if (conn == 0) {
        conn = lib_init("preload"); /* on failure it printed why */
        if (conn == 0) {
            *err = EIO;
            return 0;
        }
    }
    return conn;
}

/* duration writes $PDC_TIMEOUT as pdc's --timeout flag takes it. */
static void duration(char *out, size_t size)
{
    const char *t = getenv("PDC_TIMEOUT");
    if (t == NULL || t[0] == '\0') {
        snprintf(out, size, "30s");
        return;
    }
    char  *end;
    double secs = strtod(t, &end);
    if (end != t && *end == '\0' && secs < 1e15)
        snprintf(out, size, "%.9fs", secs); /* seconds, as libpdc reads it */
    else
        snprintf(out, size, "%s", t); /* a duration, or inf */
}

/* spawn_pdc runs `pdc stage VERB --DIRFLAG DIR REL`, the staging call of a
 * process that cannot use libpdc (a child forked after the parent loaded
 * it): posix_spawn needs no runtime of ours in the child. It returns 0 or
 * an errno. */
static int spawn_pdc(const char *verb, const struct dir *d, const char *dirflag, const char *rel)
{
    char        bin[PATH_MAX], timeout[64];
    const char *env = getenv("PDC_BIN");
    bool        search = false;
    if (env != NULL && env[0] != '\0')
        snprintf(bin, sizeof bin, "%s", env);
    else if (!sibling("../bin/pdc", bin, sizeof bin) || real_access(bin, X_OK) != 0) {
        snprintf(bin, sizeof bin, "pdc");
        search = true;
    }
    duration(timeout, sizeof timeout);
    char *argv[] = {bin, "stage", (char *)verb, "--timeout", timeout, (char *)dirflag, d->abs, (char *)rel, NULL};
    /* Its report of success would land in the program's own output. */
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int   rc = search ? posix_spawnp(&pid, bin, &fa, NULL, argv, environ) : posix_spawn(&pid, bin, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        fprintf(stderr, "libpdc_preload: pdc stage %s %s: cannot run %s (set PDC_BIN): %s\n", verb, rel, bin, strerror(rc));
        return EIO;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return EIO; /* SIGCHLD ignored: the status is gone */
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    return EIO; /* pdc printed why */
}

/* stage runs one staging call, consume or produce of rel, and returns 0 or
 * the errno the intercepted call fails with. */
static int stage(bool consume, const char *rel)
{
    busy++;
    int      err = 0;
    uint64_t c   = 0;
    bool     sub = false;
    pthread_mutex_lock(&lmu);
    /* A forked child (its fork handler ran: it owns the table) connects
     * anew. A vfork child shares its parent's memory and runs no fork
     * handler: it must neither change the parent's connection nor call
     * into the parent's Go runtime, so it takes the subprocess below. */
    if (libpdc != NULL && libpdc_pid != getpid() && fork_safe && own_table()) {
        conn       = 0; /* the parent's: this process connects anew */
        libpdc_pid = getpid();
    }
    if (libpdc != NULL && libpdc_pid != getpid())
        sub = true; /* forked after libpdc started: its runtime is not here */
    else
        c = connect_locked(&err);
    pthread_mutex_unlock(&lmu);
    if (sub)
        err = consume ? spawn_pdc("consume", &cons, "--consumer-dir", rel) : spawn_pdc("produce", &prod, "--producer-dir", rel);
    else if (c != 0)
        err = consume ? lib_consume(c, (char *)rel) : lib_produce(c, (char *)rel);
    busy--;
    return err;
}

/* ---- the consumer side ---- */

/* consumed path is inside the consumer dir (rel below it): it consumes
 * it unless it is a directory; 0 or an errno. */
static int consume_rel(const char *path, const char *rel)
{
    struct stat st;
    if (real_stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return 0;
    return stage(true, rel);
}

/* reads says whether open flags read a file's existing contents: O_RDONLY
 * and O_RDWR without O_TRUNC (r, r+, a+), not a create that must be new. */
static inline bool reads(int flags)
{
    int acc = flags & O_ACCMODE;
    if (flags & (O_PATH | O_DIRECTORY | O_TRUNC))
        return false;
    if ((flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL))
        return false;
    return acc == O_RDONLY || acc == O_RDWR;
}

/* writes says whether open flags make a file to produce. */
static inline bool writes(int flags)
{
    if (flags & (O_PATH | O_DIRECTORY))
        return false;
    return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
}

/* mode_flags is fopen's mode as open flags. */
static int mode_flags(const char *mode)
{
    int  flags;
    bool plus = strchr(mode, '+') != NULL;
    switch (mode[0]) {
    case 'r':
        flags = plus ? O_RDWR : O_RDONLY;
        break;
    case 'w':
        flags = (plus ? O_RDWR : O_WRONLY) | O_CREAT | O_TRUNC;
        break;
    case 'a':
        flags = (plus ? O_RDWR : O_WRONLY) | O_CREAT | O_APPEND;
        break;
    default:
        return -1;
    }
    if (strchr(mode, 'x') != NULL)
        flags |= O_EXCL;
    return flags;
}

/* An intercepted open: where it is (abs), and what to do. */
struct op {
    char        abs[PATH_MAX];
    const char *produce; /* rel in the producer dir: track the fd */
};

/* before_open consumes what the open reads; it returns 0 or the errno the
 * open fails with, and says in op whether the new fd is to be tracked. */
static int before_open(int dirfd, const char *path, int flags, struct op *op)
{
    op->produce = NULL;
    if (path == NULL || !ready() || !absolute(dirfd, path, op->abs))
        return 0;
    const char *rel;
    if (reads(flags) && (rel = within(&cons, op->abs)) != NULL) {
        int err = consume_rel(op->abs, rel);
        if (err != 0)
            return err;
    }
    if (writes(flags))
        op->produce = within(&prod, op->abs);
    return 0;
}

static void track(int fd, const char *rel)
{
    if (!own_table())
        return;
    char         *r = strdup(rel);
    struct entry *e = malloc(sizeof *e);
    if (r == NULL || e == NULL) {
        free(r), free(e);
        return;
    }
    *e = (struct entry){.rel = r, .pid = getpid(), .refs = 1};
    pthread_mutex_lock(&tmu);
    if (fd >= nfds) {
        int            n   = fd + 64;
        struct entry **grown = realloc(fds, (size_t)n * sizeof *fds);
        if (grown == NULL) {
            pthread_mutex_unlock(&tmu);
            free(r), free(e);
            return;
        }
        memset(grown + nfds, 0, (size_t)(n - nfds) * sizeof *fds);
        fds = grown, nfds = n;
    }
    struct entry *stale = fds[fd]; /* closed behind our back: close_range, exec */
    if (stale != NULL && --stale->refs == 0) {
        free(stale->rel);
        free(stale);
    }
    if (stale == NULL)
        atomic_fetch_add(&ntracked, 1);
    fds[fd] = e;
    pthread_mutex_unlock(&tmu);
}

static int after_open(int fd, const struct op *op)
{
    if (fd >= 0 && op->produce != NULL) {
        int         saved = errno;
        struct stat st;
        /* Only a regular file is produced: a FIFO (or a device) written
         * in the producer dir is not a file to stage, and its produce
         * would fail its close. */
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
            track(fd, op->produce);
        errno = saved;
    }
    return fd;
}

/* untrack_locked forgets fd and returns its entry if that was its last
 * descriptor and it is still to be produced. A forked child closing the
 * descriptors it inherited (as before exec) produces nothing: the process
 * that opened the file produces it. */
static struct entry *untrack_locked(int fd)
{
    if (fd < 0 || fd >= nfds || fds[fd] == NULL)
        return NULL;
    struct entry *e = fds[fd];
    fds[fd]         = NULL;
    atomic_fetch_sub(&ntracked, 1);
    if (--e->refs > 0)
        return NULL;
    if (e->done || e->pid != getpid()) {
        free(e->rel);
        free(e);
        return NULL;
    }
    return e;
}

/* produce_entry produces a file whose last descriptor closed; 0 or an
 * errno. */
static int produce_entry(struct entry *e)
{
    int err = stage(false, e->rel);
    free(e->rel);
    free(e);
    return err;
}

/* closed finishes a close of fd that returned rc: the file is produced if
 * that was its last descriptor, and a failed produce fails the close. */
static int closed(struct entry *e, int rc)
{
    if (e == NULL)
        return rc;
    int saved = errno;
    int err   = produce_entry(e);
    if (err != 0 && rc == 0) {
        errno = err;
        return -1;
    }
    errno = saved;
    return rc;
}

/* dup_track makes to share from's entry after a dup; a file to was open
 * on is closed by the dup and may be produced. */
static void dup_track(int from, int to)
{
    if (from == to || to < 0 || atomic_load(&ntracked) == 0 || !own_table())
        return;
    pthread_mutex_lock(&tmu);
    struct entry *old = untrack_locked(to);
    if (from >= 0 && from < nfds && fds[from] != NULL) {
        if (to >= nfds) {
            int            n     = to + 64;
            struct entry **grown = realloc(fds, (size_t)n * sizeof *fds);
            if (grown != NULL) {
                memset(grown + nfds, 0, (size_t)(n - nfds) * sizeof *fds);
                fds = grown, nfds = n;
            }
        }
        if (to < nfds) {
            fds[to] = fds[from];
            fds[to]->refs++;
            atomic_fetch_add(&ntracked, 1);
        }
    }
    pthread_mutex_unlock(&tmu);
    if (old != NULL) {
        int saved = errno;
        produce_entry(old);
        errno = saved;
    }
}

/* at_exit produces the files still open at exit, as close would have: a
 * program may leave its output to exit to close. Streams are flushed
 * first, since exit flushes them only after this runs. A program that
 * exits with a failure status may have stopped mid-output: its open files
 * are not produced, so that no consumer takes a partial file as complete.
 * (exit(256) is a success to the parent: the low 8 bits are the status.) */
static void at_exit(int status, void *arg)
{
    (void)arg;
    if ((status & 0377) != 0 || atomic_load(&ntracked) == 0 || !own_table())
        return;
    fflush(NULL);
    for (;;) {
        struct entry *e = NULL;
        pthread_mutex_lock(&tmu);
        for (int fd = 0; fd < nfds && e == NULL; fd++) {
            if (fds[fd] != NULL && !fds[fd]->done && fds[fd]->pid == getpid()) {
                e       = fds[fd];
                e->done = true;
            }
        }
        char *rel = e != NULL ? strdup(e->rel) : NULL;
        pthread_mutex_unlock(&tmu);
        if (e == NULL)
            return;
        if (rel != NULL) {
            stage(false, rel);
            free(rel);
        }
    }
}

/* ---- the intercepted functions ---- */

static inline mode_t open_mode(int flags, va_list ap)
{
    /* O_TMPFILE holds O_DIRECTORY's bit: test all of it. */
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

#define OPEN_BODY(dirfd, call)                                 \
    struct op op;                                              \
    int       err = before_open(dirfd, path, flags, &op);      \
    if (err != 0) {                                            \
        errno = err;                                           \
        return -1;                                             \
    }                                                          \
    return after_open(call, &op)

EXPORT int open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = open_mode(flags, ap);
    va_end(ap);
    pthread_once(&once, init);
    if (!active || busy)
        return real_open(path, flags, mode);
    OPEN_BODY(AT_FDCWD, real_open(path, flags, mode));
}

EXPORT int open64(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = open_mode(flags, ap);
    va_end(ap);
    pthread_once(&once, init);
    if (!active || busy)
        return real_open64(path, flags, mode);
    OPEN_BODY(AT_FDCWD, real_open64(path, flags, mode));
}

EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = open_mode(flags, ap);
    va_end(ap);
    pthread_once(&once, init);
    if (!active || busy)
        return real_openat(dirfd, path, flags, mode);
    OPEN_BODY(dirfd, real_openat(dirfd, path, flags, mode));
}

EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = open_mode(flags, ap);
    va_end(ap);
    pthread_once(&once, init);
    if (!active || busy)
        return real_openat64(dirfd, path, flags, mode);
    OPEN_BODY(dirfd, real_openat64(dirfd, path, flags, mode));
}

/* The _FORTIFY_SOURCE forms, which programs built with it call. */
EXPORT int __open_2(const char *path, int flags)
{
    pthread_once(&once, init);
    if (!active || busy)
        return real_open_2(path, flags);
    OPEN_BODY(AT_FDCWD, real_open_2(path, flags));
}

EXPORT int __open64_2(const char *path, int flags)
{
    pthread_once(&once, init);
    if (!active || busy)
        return real_open64_2(path, flags);
    OPEN_BODY(AT_FDCWD, real_open64_2(path, flags));
}

EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
    pthread_once(&once, init);
    if (!active || busy)
        return real_openat_2(dirfd, path, flags);
    OPEN_BODY(dirfd, real_openat_2(dirfd, path, flags));
}

EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
    pthread_once(&once, init);
    if (!active || busy)
        return real_openat64_2(dirfd, path, flags);
    OPEN_BODY(dirfd, real_openat64_2(dirfd, path, flags));
}

EXPORT int creat(const char *path, mode_t mode)
{
    pthread_once(&once, init);
    int flags = O_WRONLY | O_CREAT | O_TRUNC;
    if (!active || busy)
        return real_creat(path, mode);
    OPEN_BODY(AT_FDCWD, real_creat(path, mode));
}

EXPORT int creat64(const char *path, mode_t mode)
{
    pthread_once(&once, init);
    int flags = O_WRONLY | O_CREAT | O_TRUNC;
    if (!active || busy)
        return real_creat64(path, mode);
    OPEN_BODY(AT_FDCWD, real_creat64(path, mode));
}

static FILE *fopen_common(FILE *(*real)(const char *, const char *), const char *path, const char *mode)
{
    int flags;
    if (!ready() || mode == NULL || (flags = mode_flags(mode)) < 0)
        return real(path, mode);
    struct op op;
    int       err = before_open(AT_FDCWD, path, flags, &op);
    if (err != 0) {
        errno = err;
        return NULL;
    }
    FILE *f = real(path, mode);
    if (f != NULL)
        after_open(fileno(f), &op);
    return f;
}

EXPORT FILE *fopen(const char *path, const char *mode)
{
    pthread_once(&once, init);
    return fopen_common(real_fopen, path, mode);
}

EXPORT FILE *fopen64(const char *path, const char *mode)
{
    pthread_once(&once, init);
    return fopen_common(real_fopen64, path, mode);
}

EXPORT int close(int fd)
{
    pthread_once(&once, init);
    if (atomic_load(&ntracked) == 0 || busy || !own_table())
        return real_close(fd);
    pthread_mutex_lock(&tmu);
    struct entry *e = untrack_locked(fd);
    pthread_mutex_unlock(&tmu);
    return closed(e, real_close(fd));
}

EXPORT int fclose(FILE *f)
{
    pthread_once(&once, init);
    if (f == NULL || atomic_load(&ntracked) == 0 || busy || !own_table())
        return real_fclose(f);
    int fd = fileno(f);
    pthread_mutex_lock(&tmu);
    struct entry *e = untrack_locked(fd);
    pthread_mutex_unlock(&tmu);
    int rc = closed(e, real_fclose(f));
    return rc == 0 ? 0 : EOF;
}

EXPORT int dup(int fd)
{
    pthread_once(&once, init);
    int nfd = real_dup(fd);
    if (nfd >= 0)
        dup_track(fd, nfd);
    return nfd;
}

EXPORT int dup2(int fd, int to)
{
    pthread_once(&once, init);
    int rc = real_dup2(fd, to);
    if (rc >= 0)
        dup_track(fd, rc);
    return rc;
}

EXPORT int dup3(int fd, int to, int flags)
{
    pthread_once(&once, init);
    int rc = real_dup3(fd, to, flags);
    if (rc >= 0)
        dup_track(fd, rc);
    return rc;
}

/* fcntl's argument is an int or a pointer; passing it on as a pointer-sized
 * value is what glibc's own fcntl wrappers do. */
static int fcntl_common(int (*real)(int, int, ...), int fd, int cmd, void *arg)
{
    int rc = real(fd, cmd, arg);
    if (rc >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))
        dup_track(fd, rc);
    return rc;
}

EXPORT int fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    pthread_once(&once, init);
    return fcntl_common(real_fcntl, fd, cmd, arg);
}

EXPORT int fcntl64(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    pthread_once(&once, init);
    return fcntl_common(real_fcntl64 != NULL ? real_fcntl64 : real_fcntl, fd, cmd, arg);
}

/* STAT_BODY runs call; if it finds nothing in the consumer dir, it
 * consumes the path and runs call again. A file already there is not
 * consumed (stat is how cp and shells test for a file, many times). */
#define STAT_BODY(dirfd, call)                                                   \
    pthread_once(&once, init);                                                   \
    int rc = call;                                                               \
    if (rc == 0 || errno != ENOENT || path == NULL || !active || busy)           \
        return rc;                                                               \
    char        abs[PATH_MAX];                                                   \
    const char *rel;                                                             \
    if (!absolute(dirfd, path, abs) || (rel = within(&cons, abs)) == NULL) {     \
        errno = ENOENT;                                                          \
        return rc;                                                               \
    }                                                                            \
    int err = stage(true, rel);                                                  \
    if (err != 0) {                                                              \
        errno = err;                                                             \
        return -1;                                                               \
    }                                                                            \
    return call

EXPORT int stat(const char *path, struct stat *st) { STAT_BODY(AT_FDCWD, real_stat(path, st)); }
EXPORT int stat64(const char *path, struct stat64 *st) { STAT_BODY(AT_FDCWD, real_stat64(path, st)); }
EXPORT int lstat(const char *path, struct stat *st) { STAT_BODY(AT_FDCWD, real_lstat(path, st)); }
EXPORT int lstat64(const char *path, struct stat64 *st) { STAT_BODY(AT_FDCWD, real_lstat64(path, st)); }
EXPORT int fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
    STAT_BODY(dirfd, real_fstatat(dirfd, path, st, flags));
}
EXPORT int fstatat64(int dirfd, const char *path, struct stat64 *st, int flags)
{
    STAT_BODY(dirfd, real_fstatat64(dirfd, path, st, flags));
}
EXPORT int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *st)
{
    STAT_BODY(dirfd, real_statx(dirfd, path, flags, mask, st));
}
EXPORT int access(const char *path, int mode) { STAT_BODY(AT_FDCWD, real_access(path, mode)); }
EXPORT int faccessat(int dirfd, const char *path, int mode, int flags)
{
    STAT_BODY(dirfd, real_faccessat(dirfd, path, mode, flags));
}
EXPORT int eaccess(const char *path, int mode) { STAT_BODY(AT_FDCWD, real_eaccess(path, mode)); }
EXPORT int euidaccess(const char *path, int mode) { STAT_BODY(AT_FDCWD, real_euidaccess(path, mode)); }

/* glibc before 2.33 compiled stat into these; old binaries still call them. */
#define XSTAT_BODY(dirfd, real, call)      \
    pthread_once(&once, init);             \
    if (real == NULL) {                    \
        errno = ENOSYS;                    \
        return -1;                         \
    }                                      \
    STAT_BODY(dirfd, call)

EXPORT int __xstat(int ver, const char *path, struct stat *st) { XSTAT_BODY(AT_FDCWD, real_xstat, real_xstat(ver, path, st)); }
EXPORT int __xstat64(int ver, const char *path, struct stat64 *st)
{
    XSTAT_BODY(AT_FDCWD, real_xstat64, real_xstat64(ver, path, st));
}
EXPORT int __lxstat(int ver, const char *path, struct stat *st) { XSTAT_BODY(AT_FDCWD, real_lxstat, real_lxstat(ver, path, st)); }
EXPORT int __lxstat64(int ver, const char *path, struct stat64 *st)
{
    XSTAT_BODY(AT_FDCWD, real_lxstat64, real_lxstat64(ver, path, st));
}
EXPORT int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags)
{
    XSTAT_BODY(dirfd, real_fxstatat, real_fxstatat(ver, dirfd, path, st, flags));
}
EXPORT int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags)
{
    XSTAT_BODY(dirfd, real_fxstatat64, real_fxstatat64(ver, dirfd, path, st, flags));
}

/* renamed finishes a rename that returned rc: a regular file renamed into
 * the producer dir is produced under its new name, as programs that write
 * a temporary file and rename it into place (mv, atomic saves) mean it to
 * appear whole. A failed produce fails the call, as for close. */
static int renamed(int rc, int dirfd, const char *to)
{
    if (rc != 0 || to == NULL || !ready())
        return rc;
    char        abs[PATH_MAX];
    const char *rel;
    struct stat st;
    if (!absolute(dirfd, to, abs) || (rel = within(&prod, abs)) == NULL || real_stat(abs, &st) != 0 || !S_ISREG(st.st_mode))
        return rc;
    int err = stage(false, rel);
    if (err != 0) {
        errno = err;
        return -1;
    }
    return rc;
}

EXPORT int rename(const char *from, const char *to)
{
    pthread_once(&once, init);
    return renamed(real_rename(from, to), AT_FDCWD, to);
}

EXPORT int renameat(int fromfd, const char *from, int tofd, const char *to)
{
    pthread_once(&once, init);
    return renamed(real_renameat(fromfd, from, tofd, to), tofd, to);
}

EXPORT int renameat2(int fromfd, const char *from, int tofd, const char *to, unsigned int flags)
{
    pthread_once(&once, init);
    if (real_renameat2 == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return renamed(real_renameat2(fromfd, from, tofd, to, flags), tofd, to);
}

/* ---- exec: tracked descriptors that cross it ---- */

/* A shell runs `prog > file` by opening file, moving it to descriptor 1
 * and exec'ing prog: the process that writes and closes the file is the
 * exec'd image, which knows nothing of it. So an exec passes the tracked
 * descriptors this process opened that survive it (no FD_CLOEXEC) in
 * $PDC_PRELOAD_FDS, one "FD:DEV:INO:REL" a line, and the new image's
 * interposer tracks them again (if FD is still that file). */
#define FDS_ENV "PDC_PRELOAD_FDS"

/* exec_env returns "PDC_PRELOAD_FDS=..." for an exec, malloc'd, or NULL
 * when no tracked descriptor crosses it. */
static char *exec_env(void)
{
    if (atomic_load(&ntracked) == 0 || !own_table())
        return NULL;
    pid_t  me  = getpid();
    size_t cap = 4096, len = strlen(FDS_ENV "=");
    char  *s   = malloc(cap);
    if (s == NULL)
        return NULL;
    memcpy(s, FDS_ENV "=", len + 1);
    bool any = false;
    pthread_mutex_lock(&tmu);
    for (int fd = 0; fd < nfds; fd++) {
        struct entry *e = fds[fd];
        struct stat   st;
        if (e == NULL || e->done || e->pid != me)
            continue;
        int fl = real_fcntl(fd, F_GETFD);
        if (fl < 0 || (fl & FD_CLOEXEC) || fstat(fd, &st) != 0)
            continue;
        char   line[PATH_MAX + 96];
        int    n = snprintf(line, sizeof line, "%d:%lu:%lu:%s\n", fd, (unsigned long)st.st_dev, (unsigned long)st.st_ino, e->rel);
        if (n <= 0 || (size_t)n >= sizeof line)
            continue;
        if (len + (size_t)n + 1 > cap) {
            char *grown = realloc(s, cap = (len + (size_t)n + 1) * 2);
            if (grown == NULL)
                break;
            s = grown;
        }
        memcpy(s + len, line, (size_t)n + 1);
        len += (size_t)n;
        any = true;
    }
    pthread_mutex_unlock(&tmu);
    if (!any) {
        free(s);
        return NULL;
    }
    return s;
}

/* with_env returns envp without any $PDC_PRELOAD_FDS and with v added,
 * malloc'd (the strings are envp's and v). */
static char **with_env(char *const envp[], char *v)
{
    size_t n = 0;
    while (envp != NULL && envp[n] != NULL)
        n++;
    char **out = malloc((n + 2) * sizeof *out);
    if (out == NULL)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(envp[i], FDS_ENV "=", strlen(FDS_ENV "=")) != 0)
            out[k++] = envp[i];
    out[k++] = v;
    out[k]   = NULL;
    return out;
}

static int exec_common(bool search, const char *file, char *const argv[], char *const envp[])
{
    pthread_once(&once, init);
    int (*real)(const char *, char *const[], char *const[]) = search ? real_execvpe : real_execve;
    char  *v   = busy ? NULL : exec_env();
    char **env = v != NULL ? with_env(envp, v) : NULL;
    if (env == NULL) {
        free(v);
        return real(file, argv, envp);
    }
    int rc    = real(file, argv, env);
    int saved = errno; /* the exec failed: this image goes on */
    free(env);
    free(v);
    errno = saved;
    return rc;
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[]) { return exec_common(false, path, argv, envp); }
EXPORT int execv(const char *path, char *const argv[]) { return exec_common(false, path, argv, environ); }
EXPORT int execvp(const char *file, char *const argv[]) { return exec_common(true, file, argv, environ); }
EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) { return exec_common(true, file, argv, envp); }

/* inherit tracks the descriptors an exec passed to this image. It runs
 * at load, and costs a getenv when there are none. */
__attribute__((constructor)) static void inherit(void)
{
    const char *v = getenv(FDS_ENV);
    if (v == NULL)
        return;
    char *list = strdup(v);
    unsetenv(FDS_ENV); /* this image's own execs pass what they pass */
    pthread_once(&once, init);
    if (list == NULL || prod.abs == NULL) {
        free(list);
        return;
    }
    char *save = NULL;
    for (char *line = strtok_r(list, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        int           fd;
        unsigned long dev, ino;
        int           used = 0;
        struct stat   st;
        if (sscanf(line, "%d:%lu:%lu:%n", &fd, &dev, &ino, &used) != 3 || used == 0 || line[used] == '\0')
            continue;
        if (fstat(fd, &st) != 0 || (unsigned long)st.st_dev != dev || (unsigned long)st.st_ino != ino)
            continue; /* closed or replaced on the way */
        track(fd, line + used);
    }
    free(list);
}
