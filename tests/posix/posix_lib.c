/*
 * posixtest's helpers (see posixtest.c and posixtest.h): reporting checks, attributes,
 * times, setup of the objects a case works on, running as another user.
 */
#include "posixtest.h"

/* ------------------------------------------------------------------ reporting */

const char *g_case = "-";
char g_base[PATH_MAX];
int g_child;    /* set in a forked identity child */
int g_children; /* identity children started in this case */

const char *ename(int e) {
    const char *n = e ? strerrorname_np(e) : "0";
    return n ? n : "E?";
}

void report(const char *check, int ok, const char *fmt, ...) {
    if (ok) {
        printf("%s\t%s\tok\t\n", g_case, check);
        return;
    }
    char detail[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    printf("%s\t%s\tFAIL\t%s\n", g_case, check, detail);
}

/* Setup steps are not checks: their failures are logged on stderr (the checks that
 * depend on them fail on their own). */
void setup_failed(const char *what, const char *path) {
    fprintf(stderr, "# %s: setup: %s %s: %s\n", g_case, what, path, ename(errno));
}

/* A system call that must succeed (any result but -1). Returns the result. */
long chk_ok(const char *check, long r) {
    int e = errno;
    if (r == -1)
        report(check, 0, "expected success got %s", ename(e));
    else
        report(check, 1, NULL);
    errno = e;
    return r;
}

/* A system call that must fail with errno WANT (or ALT when nonzero: POSIX allows both). */
long chk_err(const char *check, long r, int want, int alt) {
    int e = errno;
    if (r != -1)
        report(check, 0, "expected %s got success", ename(want));
    else if (e == want || (alt && e == alt))
        report(check, 1, NULL);
    else
        report(check, 0, "expected %s got %s", ename(want), ename(e));
    errno = e;
    return r;
}

/* A result that must equal WANT (a byte count, a length...). */
void chk_eq(const char *check, long got, long want) {
    if (got == want)
        report(check, 1, NULL);
    else if (got == -1 && errno)
        report(check, 0, "expected %ld got %s", want, ename(errno));
    else
        report(check, 0, "expected %ld got %ld", want, got);
}

void chk_true(const char *check, int cond, const char *want, const char *got) {
    if (cond)
        report(check, 1, NULL);
    else
        report(check, 0, "expected %s got %s", want, got);
}

/* ------------------------------------------------------------------ attributes */

/* lstat (or stat) of PATH for CHECK; reports the failure and returns 0 if it fails. */
int get(const char *check, const char *path, struct stat *st, int follow) {
    if ((follow ? stat(path, st) : lstat(path, st)) == 0) return 1;
    report(check, 0, "expected an object got %s %s", follow ? "stat" : "lstat", ename(errno));
    return 0;
}

const char *tname(mode_t m) {
    switch (m & S_IFMT) {
    case S_IFREG: return "regular";
    case S_IFDIR: return "directory";
    case S_IFLNK: return "symlink";
    case S_IFIFO: return "fifo";
    case S_IFSOCK: return "socket";
    case S_IFCHR: return "char-device";
    case S_IFBLK: return "block-device";
    default: return "unknown-type";
    }
}

void chk_type(const char *check, const char *path, mode_t type) {
    struct stat st;
    if (!get(check, path, &st, 0)) return;
    chk_true(check, (st.st_mode & S_IFMT) == type, tname(type), tname(st.st_mode));
}

void chk_mode(const char *check, const char *path, mode_t want) {
    struct stat st;
    if (!get(check, path, &st, 0)) return;
    if ((st.st_mode & 07777) == want)
        report(check, 1, NULL);
    else
        report(check, 0, "expected %04o got %04o", want, st.st_mode & 07777);
}

void chk_owner(const char *check, const char *path, uid_t uid, gid_t gid) {
    struct stat st;
    if (!get(check, path, &st, 0)) return;
    if (st.st_uid == uid && st.st_gid == gid)
        report(check, 1, NULL);
    else
        report(check, 0, "expected %u:%u got %u:%u", uid, gid, st.st_uid, st.st_gid);
}

void chk_gid(const char *check, const char *path, gid_t gid) {
    struct stat st;
    if (!get(check, path, &st, 0)) return;
    if (st.st_gid == gid)
        report(check, 1, NULL);
    else
        report(check, 0, "expected gid %u got gid %u", gid, st.st_gid);
}

void chk_nlink(const char *check, const char *path, unsigned long n) {
    struct stat st;
    if (!get(check, path, &st, 0)) return;
    if (st.st_nlink == n)
        report(check, 1, NULL);
    else
        report(check, 0, "expected nlink %lu got nlink %lu", n, (unsigned long)st.st_nlink);
}

void chk_size(const char *check, const char *path, long long size) {
    struct stat st;
    if (!get(check, path, &st, 0)) return;
    if (st.st_size == size)
        report(check, 1, NULL);
    else
        report(check, 0, "expected size %lld got size %lld", size, (long long)st.st_size);
}

void chk_rdev(const char *check, const char *path, dev_t rdev) {
    struct stat st;
    if (!get(check, path, &st, 0)) return;
    if (st.st_rdev == rdev)
        report(check, 1, NULL);
    else
        report(check, 0, "expected rdev %u,%u got rdev %u,%u", major(rdev), minor(rdev),
               major(st.st_rdev), minor(st.st_rdev));
}

void chk_exists(const char *check, const char *path) {
    struct stat st;
    if (get(check, path, &st, 0)) report(check, 1, NULL);
}

void chk_absent(const char *check, const char *path) {
    struct stat st;
    if (lstat(path, &st) == 0)
        report(check, 0, "expected ENOENT got %s", tname(st.st_mode));
    else
        chk_true(check, errno == ENOENT, "ENOENT", ename(errno));
}

ino_t ino_of(const char *path, int follow) {
    struct stat st;
    if ((follow ? stat(path, &st) : lstat(path, &st)) < 0) return 0;
    return st.st_ino;
}

/* PATH and OTHER are the same object (inode number). */
void chk_same(const char *check, const char *path, const char *other, int follow) {
    ino_t a = ino_of(path, follow), b = ino_of(other, follow);
    if (!a || !b)
        report(check, 0, "expected same inode got %s", ename(ENOENT));
    else
        chk_true(check, a == b, "same inode", "different inode");
}

void chk_content(const char *check, const char *path, const char *want) {
    char buf[256];
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        report(check, 0, "expected \"%s\" got open %s", want, ename(errno));
        return;
    }
    ssize_t n = read(fd, buf, sizeof buf - 1);
    int e = errno;
    close(fd);
    if (n < 0) {
        report(check, 0, "expected \"%s\" got read %s", want, ename(e));
        return;
    }
    buf[n] = 0;
    if ((size_t)n == strlen(want) && memcmp(buf, want, n) == 0)
        report(check, 1, NULL);
    else
        report(check, 0, "expected \"%s\" got \"%.40s\"", want, buf);
}

/* ------------------------------------------------------------------ times */

struct snap snap(const char *path) {
    struct snap s;
    memset(&s, 0, sizeof s);
    if (lstat(path, &s.st) < 0) s.err = errno;
    return s;
}

int ts_cmp(struct timespec a, struct timespec b) {
    if (a.tv_sec != b.tv_sec) return a.tv_sec < b.tv_sec ? -1 : 1;
    if (a.tv_nsec != b.tv_nsec) return a.tv_nsec < b.tv_nsec ? -1 : 1;
    return 0;
}

struct timespec ts_of(const struct snap *s, enum which w) {
    return w == ATIME ? s->st.st_atim : w == MTIME ? s->st.st_mtim : s->st.st_ctim;
}

/* Time W of the object moved forward from BEFORE to AFTER. */
void chk_later(const char *check, struct snap before, struct snap after, enum which w) {
    if (before.err || after.err) {
        report(check, 0, "expected later got lstat %s", ename(before.err ? before.err : after.err));
        return;
    }
    int c = ts_cmp(ts_of(&after, w), ts_of(&before, w));
    chk_true(check, c > 0, "later", c == 0 ? "unchanged" : "earlier");
}

/* Time W of the object did not change from BEFORE to AFTER. */
void chk_kept(const char *check, struct snap before, struct snap after, enum which w) {
    if (before.err || after.err) {
        report(check, 0, "expected unchanged got lstat %s", ename(before.err ? before.err : after.err));
        return;
    }
    chk_true(check, ts_cmp(ts_of(&after, w), ts_of(&before, w)) == 0, "unchanged", "changed");
}

/* Time W of PATH is exactly T. */
void chk_time(const char *check, const char *path, enum which w, struct timespec t) {
    struct snap s = snap(path);
    if (s.err) {
        report(check, 0, "expected %lld.%09ld got lstat %s", (long long)t.tv_sec, t.tv_nsec, ename(s.err));
        return;
    }
    struct timespec g = ts_of(&s, w), now;
    clock_gettime(CLOCK_REALTIME, &now);
    long long d = (long long)now.tv_sec - (long long)g.tv_sec;
    if (ts_cmp(g, t) == 0)
        report(check, 1, NULL);
    else if (d >= -5 && d <= 5) /* a time that is not what was set but now: stable token */
        report(check, 0, "expected %lld.%09ld got now", (long long)t.tv_sec, t.tv_nsec);
    else
        report(check, 0, "expected %lld.%09ld got %lld.%09ld", (long long)t.tv_sec, t.tv_nsec,
               (long long)g.tv_sec, g.tv_nsec);
}

/* Time W of PATH is the current time (within a few seconds). */
void chk_now(const char *check, const char *path, enum which w) {
    struct snap s = snap(path);
    if (s.err) {
        report(check, 0, "expected now got lstat %s", ename(s.err));
        return;
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    long long d = (long long)now.tv_sec - (long long)ts_of(&s, w).tv_sec;
    chk_true(check, d >= -5 && d <= 5, "now", "another time");
}

/* Let the file system's clock (a coarse one, one tick of a few ms) move on, so that a
 * time that must change does change. */
void tick(void) {
    struct timespec t = {0, 25 * 1000 * 1000};
    nanosleep(&t, NULL);
}

/* ------------------------------------------------------------------ setup helpers */

/* A regular file with exactly MODE (not masked by the umask), owned by UID:GID (-1: as
 * created), holding CONTENT. The owner is set before the mode (chown clears set-id bits). */
void mkfo(const char *path, mode_t mode, uid_t uid, gid_t gid, const char *content) {
    int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600);
    if (fd < 0) {
        setup_failed("create", path);
        return;
    }
    size_t len = content ? strlen(content) : 0;
    if (len && write(fd, content, len) != (ssize_t)len) setup_failed("write", path);
    if ((uid != (uid_t)-1 || gid != (gid_t)-1) && fchown(fd, uid, gid) < 0) setup_failed("fchown", path);
    if (fchmod(fd, mode) < 0) setup_failed("fchmod", path);
    close(fd);
}
void mkf(const char *path, mode_t mode, const char *content) {
    mkfo(path, mode, (uid_t)-1, (gid_t)-1, content);
}

/* A directory with exactly MODE, owned by UID:GID (-1: as created). */
void mkdo(const char *path, mode_t mode, uid_t uid, gid_t gid) {
    if (mkdir(path, 0700) < 0) {
        setup_failed("mkdir", path);
        return;
    }
    if ((uid != (uid_t)-1 || gid != (gid_t)-1) && chown(path, uid, gid) < 0) setup_failed("chown", path);
    if (chmod(path, mode) < 0) setup_failed("chmod", path);
}
void mkd(const char *path, mode_t mode) {
    mkdo(path, mode, (uid_t)-1, (gid_t)-1);
}

void mkl(const char *target, const char *path) {
    if (symlink(target, path) < 0) setup_failed("symlink", path);
}

void mkn(const char *path, mode_t mode, dev_t dev) {
    if (mknod(path, mode, dev) < 0) setup_failed("mknod", path);
}

void cl(int fd) {
    if (fd >= 0) close(fd);
}

/* The type readdir reports for NAME in DIR (DT_*), -1 if it is not listed; *ino gets its
 * d_ino. */
int listed(const char *dir, const char *name, ino_t *ino) {
    DIR *d = opendir(dir);
    if (!d) return -2;
    int type = -1;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, name) == 0) {
            type = e->d_type;
            if (ino) *ino = e->d_ino;
            break;
        }
    closedir(d);
    return type;
}

const char *dtname(int t) {
    switch (t) {
    case -2: return "opendir-failed";
    case -1: return "missing";
    case DT_REG: return "DT_REG";
    case DT_DIR: return "DT_DIR";
    case DT_LNK: return "DT_LNK";
    case DT_FIFO: return "DT_FIFO";
    case DT_SOCK: return "DT_SOCK";
    case DT_CHR: return "DT_CHR";
    case DT_BLK: return "DT_BLK";
    case DT_UNKNOWN: return "DT_UNKNOWN";
    default: return "DT_?";
    }
}

void chk_listed(const char *check, const char *dir, const char *name, int dtype) {
    int t = listed(dir, name, NULL);
    chk_true(check, t == dtype, dtname(dtype), dtname(t));
}

/* opendir as a system call result. */
long od(const char *path) {
    DIR *d = opendir(path);
    if (!d) return -1;
    closedir(d);
    return 0;
}

/* ------------------------------------------------------------------ identity */

/* Run the following block in a child process as UID/GID (groups: GID and EXTRA when
 * nonzero); the parent waits for it. Use as AS(U1, G1) { ... } and never leave the block
 * with break/return/goto. */
int as_begin(uid_t uid, gid_t gid, gid_t extra) {
    fflush(stdout);
    fflush(stderr);
    g_children++;
    pid_t pid = fork();
    if (pid < 0) {
        char n[32];
        snprintf(n, sizeof n, "child%d", g_children);
        report(n, 0, "expected fork got %s", ename(errno));
        return 0;
    }
    if (pid == 0) {
        gid_t groups[2] = {gid, extra};
        if (setgroups(extra ? 2 : 1, groups) < 0 || setgid(gid) < 0 || setuid(uid) < 0) {
            fprintf(stderr, "# %s: cannot become %u:%u: %s\n", g_case, uid, gid, ename(errno));
            _exit(3);
        }
        g_child = 1;
        return 1;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char n[32], got[32];
        snprintf(n, sizeof n, "child%d", g_children);
        if (WIFSIGNALED(status))
            snprintf(got, sizeof got, "signal %d", WTERMSIG(status));
        else
            snprintf(got, sizeof got, "exit %d", WEXITSTATUS(status));
        report(n, 0, "expected exit 0 got %s", got);
    }
    return 0;
}
int as_end(void) {
    fflush(stdout);
    fflush(stderr);
    _exit(0);
}
