/*
 * posixtest: the project's POSIX conformance suite (issue 19).
 *
 *     posixtest DIR [CASE...]      run every case (or the named ones) inside DIR
 *     posixtest -l                 list the cases
 *
 * Runs as root. It chdirs into DIR (which must exist and be empty of the case names),
 * makes one subdirectory per case and runs the case in it. Cases about identity fork and
 * drop to uid/gid 65534 ("nobody") or 65533 ("another user") with setgroups, setgid and
 * setuid in the child. The expectations are what Linux does on ext4: the same program is
 * run on a local directory, in a FUSE mount of dafs and under the LD_PRELOAD library, and
 * scripts/test-posix.sh compares the three (tests/posix/known-differences.tsv lists what
 * may still differ).
 *
 * Output: one line per check, tab-separated,
 *     CASE  CHECK  ok
 *     CASE  CHECK  FAIL  expected X got Y
 * where X and Y are stable tokens (errno names, octal modes, uid:gid, "later"/"unchanged",
 * "missing"...), never values that change from run to run. Lines starting with '#' are
 * comments; setup problems go to stderr. The exit status is 0 unless the program could not
 * run at all (checks that fail do not change it).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define U1 65534 /* "nobody": the unprivileged user of the identity cases */
#define G1 65534
#define U2 65533 /* another unprivileged user */
#define G2 65533
#define GX 4242 /* a group neither user has, unless a case adds it */

/* ------------------------------------------------------------------ reporting */

static const char *g_case = "-";
static char g_base[PATH_MAX];
static int g_child;    /* set in a forked identity child */
static int g_children; /* identity children started in this case */

static const char *ename(int e) {
    const char *n = e ? strerrorname_np(e) : "0";
    return n ? n : "E?";
}

static void report(const char *check, int ok, const char *fmt, ...) {
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
static void setup_failed(const char *what, const char *path) {
    fprintf(stderr, "# %s: setup: %s %s: %s\n", g_case, what, path, ename(errno));
}

/* A system call that must succeed (any result but -1). Returns the result. */
static long chk_ok(const char *check, long r) {
    int e = errno;
    if (r == -1)
        report(check, 0, "expected success got %s", ename(e));
    else
        report(check, 1, NULL);
    errno = e;
    return r;
}
#define OK(check, call) (errno = 0, chk_ok((check), (long)(call)))

/* A system call that must fail with errno WANT (or ALT when nonzero: POSIX allows both). */
static long chk_err(const char *check, long r, int want, int alt) {
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
#define ERR(check, call, e) (errno = 0, chk_err((check), (long)(call), (e), 0))
#define ERR2(check, call, e, alt) (errno = 0, chk_err((check), (long)(call), (e), (alt)))

/* A result that must equal WANT (a byte count, a length...). */
static void chk_eq(const char *check, long got, long want) {
    if (got == want)
        report(check, 1, NULL);
    else if (got == -1 && errno)
        report(check, 0, "expected %ld got %s", want, ename(errno));
    else
        report(check, 0, "expected %ld got %ld", want, got);
}
#define EQ(check, call, want) (errno = 0, chk_eq((check), (long)(call), (long)(want)))

static void chk_true(const char *check, int cond, const char *want, const char *got) {
    if (cond)
        report(check, 1, NULL);
    else
        report(check, 0, "expected %s got %s", want, got);
}

/* ------------------------------------------------------------------ attributes */

/* lstat (or stat) of PATH for CHECK; reports the failure and returns 0 if it fails. */
static int get(const char *check, const char *path, struct stat *st, int follow) {
    if ((follow ? stat(path, st) : lstat(path, st)) == 0) return 1;
    report(check, 0, "expected an object got %s %s", follow ? "stat" : "lstat", ename(errno));
    return 0;
}

static const char *tname(mode_t m) {
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

static void chk_type(const char *check, const char *path, mode_t type) {
    struct stat st;
    if (!get(check, path, &st, 0)) return;
    chk_true(check, (st.st_mode & S_IFMT) == type, tname(type), tname(st.st_mode));
}

static void chk_mode(const char *check, const char *path, mode_t want) {
    struct stat st;
    if (!get(check, path, &st, 0)) return;
    if ((st.st_mode & 07777) == want)
        report(check, 1, NULL);
    else
        report(check, 0, "expected %04o got %04o", want, st.st_mode & 07777);
}

static void chk_owner(const char *check, const char *path, uid_t uid, gid_t gid) {
    struct stat st;
    if (!get(check, path, &st, 0)) return;
    if (st.st_uid == uid && st.st_gid == gid)
        report(check, 1, NULL);
    else
        report(check, 0, "expected %u:%u got %u:%u", uid, gid, st.st_uid, st.st_gid);
}

static void chk_gid(const char *check, const char *path, gid_t gid) {
    struct stat st;
    if (!get(check, path, &st, 0)) return;
    if (st.st_gid == gid)
        report(check, 1, NULL);
    else
        report(check, 0, "expected gid %u got gid %u", gid, st.st_gid);
}

static void chk_nlink(const char *check, const char *path, unsigned long n) {
    struct stat st;
    if (!get(check, path, &st, 0)) return;
    if (st.st_nlink == n)
        report(check, 1, NULL);
    else
        report(check, 0, "expected nlink %lu got nlink %lu", n, (unsigned long)st.st_nlink);
}

static void chk_size(const char *check, const char *path, long long size) {
    struct stat st;
    if (!get(check, path, &st, 0)) return;
    if (st.st_size == size)
        report(check, 1, NULL);
    else
        report(check, 0, "expected size %lld got size %lld", size, (long long)st.st_size);
}

static void chk_rdev(const char *check, const char *path, dev_t rdev) {
    struct stat st;
    if (!get(check, path, &st, 0)) return;
    if (st.st_rdev == rdev)
        report(check, 1, NULL);
    else
        report(check, 0, "expected rdev %u,%u got rdev %u,%u", major(rdev), minor(rdev),
               major(st.st_rdev), minor(st.st_rdev));
}

static void chk_exists(const char *check, const char *path) {
    struct stat st;
    if (get(check, path, &st, 0)) report(check, 1, NULL);
}

static void chk_absent(const char *check, const char *path) {
    struct stat st;
    if (lstat(path, &st) == 0)
        report(check, 0, "expected ENOENT got %s", tname(st.st_mode));
    else
        chk_true(check, errno == ENOENT, "ENOENT", ename(errno));
}

static ino_t ino_of(const char *path, int follow) {
    struct stat st;
    if ((follow ? stat(path, &st) : lstat(path, &st)) < 0) return 0;
    return st.st_ino;
}

/* PATH and OTHER are the same object (inode number). */
static void chk_same(const char *check, const char *path, const char *other, int follow) {
    ino_t a = ino_of(path, follow), b = ino_of(other, follow);
    if (!a || !b)
        report(check, 0, "expected same inode got %s", ename(ENOENT));
    else
        chk_true(check, a == b, "same inode", "different inode");
}

static void chk_content(const char *check, const char *path, const char *want) {
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

struct snap {
    int err; /* errno of the lstat, 0 if it worked */
    struct stat st;
};

static struct snap snap(const char *path) {
    struct snap s;
    memset(&s, 0, sizeof s);
    if (lstat(path, &s.st) < 0) s.err = errno;
    return s;
}

static int ts_cmp(struct timespec a, struct timespec b) {
    if (a.tv_sec != b.tv_sec) return a.tv_sec < b.tv_sec ? -1 : 1;
    if (a.tv_nsec != b.tv_nsec) return a.tv_nsec < b.tv_nsec ? -1 : 1;
    return 0;
}

enum which { ATIME, MTIME, CTIME };
static struct timespec ts_of(const struct snap *s, enum which w) {
    return w == ATIME ? s->st.st_atim : w == MTIME ? s->st.st_mtim : s->st.st_ctim;
}

/* Time W of the object moved forward from BEFORE to AFTER. */
static void chk_later(const char *check, struct snap before, struct snap after, enum which w) {
    if (before.err || after.err) {
        report(check, 0, "expected later got lstat %s", ename(before.err ? before.err : after.err));
        return;
    }
    int c = ts_cmp(ts_of(&after, w), ts_of(&before, w));
    chk_true(check, c > 0, "later", c == 0 ? "unchanged" : "earlier");
}

/* Time W of the object did not change from BEFORE to AFTER. */
static void chk_kept(const char *check, struct snap before, struct snap after, enum which w) {
    if (before.err || after.err) {
        report(check, 0, "expected unchanged got lstat %s", ename(before.err ? before.err : after.err));
        return;
    }
    chk_true(check, ts_cmp(ts_of(&after, w), ts_of(&before, w)) == 0, "unchanged", "changed");
}

/* Time W of PATH is exactly T. */
static void chk_time(const char *check, const char *path, enum which w, struct timespec t) {
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
static void chk_now(const char *check, const char *path, enum which w) {
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
static void tick(void) {
    struct timespec t = {0, 25 * 1000 * 1000};
    nanosleep(&t, NULL);
}

/* ------------------------------------------------------------------ setup helpers */

/* A regular file with exactly MODE (not masked by the umask), owned by UID:GID (-1: as
 * created), holding CONTENT. The owner is set before the mode (chown clears set-id bits). */
static void mkfo(const char *path, mode_t mode, uid_t uid, gid_t gid, const char *content) {
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
static void mkf(const char *path, mode_t mode, const char *content) {
    mkfo(path, mode, (uid_t)-1, (gid_t)-1, content);
}

/* A directory with exactly MODE, owned by UID:GID (-1: as created). */
static void mkdo(const char *path, mode_t mode, uid_t uid, gid_t gid) {
    if (mkdir(path, 0700) < 0) {
        setup_failed("mkdir", path);
        return;
    }
    if ((uid != (uid_t)-1 || gid != (gid_t)-1) && chown(path, uid, gid) < 0) setup_failed("chown", path);
    if (chmod(path, mode) < 0) setup_failed("chmod", path);
}
static void mkd(const char *path, mode_t mode) {
    mkdo(path, mode, (uid_t)-1, (gid_t)-1);
}

static void mkl(const char *target, const char *path) {
    if (symlink(target, path) < 0) setup_failed("symlink", path);
}

static void mkn(const char *path, mode_t mode, dev_t dev) {
    if (mknod(path, mode, dev) < 0) setup_failed("mknod", path);
}

static void cl(int fd) {
    if (fd >= 0) close(fd);
}

/* The type readdir reports for NAME in DIR (DT_*), -1 if it is not listed; *ino gets its
 * d_ino. */
static int listed(const char *dir, const char *name, ino_t *ino) {
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

static const char *dtname(int t) {
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

static void chk_listed(const char *check, const char *dir, const char *name, int dtype) {
    int t = listed(dir, name, NULL);
    chk_true(check, t == dtype, dtname(dtype), dtname(t));
}

/* opendir as a system call result. */
static long od(const char *path) {
    DIR *d = opendir(path);
    if (!d) return -1;
    closedir(d);
    return 0;
}

/* ------------------------------------------------------------------ identity */

/* Run the following block in a child process as UID/GID (groups: GID and EXTRA when
 * nonzero); the parent waits for it. Use as AS(U1, G1) { ... } and never leave the block
 * with break/return/goto. */
static int as_begin(uid_t uid, gid_t gid, gid_t extra) {
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
static int as_end(void) {
    fflush(stdout);
    fflush(stderr);
    _exit(0);
}
#define AS_G(uid, gid, extra) \
    for (int as_once_ = as_begin((uid), (gid), (extra)); as_once_; as_once_ = as_end())
#define AS(uid, gid) AS_G((uid), (gid), 0)

/* ================================================================== cases */

static void c_open(void) {
    int fd;
    char b[8];
    ERR("missing_ENOENT", open("missing", O_RDONLY), ENOENT);
    fd = OK("O_CREAT", open("f", O_CREAT | O_WRONLY, 0666));
    if (fd >= 0) EQ("O_CREAT_write", write(fd, "0123456789", 10), 10);
    cl(fd);
    chk_type("O_CREAT_type", "f", S_IFREG);
    chk_mode("O_CREAT_mode_umask", "f", 0644);
    chk_size("O_CREAT_size", "f", 10);
    chk_nlink("O_CREAT_nlink", "f", 1);
    ERR("O_EXCL_existing_EEXIST", open("f", O_CREAT | O_EXCL | O_WRONLY, 0644), EEXIST);
    mkl("nowhere", "dangling");
    ERR("O_EXCL_dangling_symlink_EEXIST", open("dangling", O_CREAT | O_EXCL | O_WRONLY, 0644), EEXIST);
    chk_absent("O_EXCL_dangling_symlink_no_target", "nowhere");
    cl(OK("O_CREAT_existing", open("f", O_CREAT | O_RDWR, 0600)));
    chk_size("O_CREAT_existing_keeps_data", "f", 10);
    chk_mode("O_CREAT_existing_keeps_mode", "f", 0644);
    cl(OK("O_TRUNC", open("f", O_TRUNC | O_WRONLY)));
    chk_size("O_TRUNC_size", "f", 0);
    cl(OK("O_CREAT_dangling_symlink", open("dangling", O_CREAT | O_WRONLY, 0644)));
    chk_type("O_CREAT_dangling_symlink_creates_target", "nowhere", S_IFREG);
    mkd("d", 0755);
    mkf("d/g", 0644, "g");
    ERR("O_DIRECTORY_file_ENOTDIR", open("f", O_RDONLY | O_DIRECTORY), ENOTDIR);
    cl(OK("O_DIRECTORY_dir", open("d", O_RDONLY | O_DIRECTORY)));
    cl(OK("dir_O_RDONLY", open("d", O_RDONLY)));
    ERR("dir_O_WRONLY_EISDIR", open("d", O_WRONLY), EISDIR);
    ERR("dir_O_RDWR_EISDIR", open("d", O_RDWR), EISDIR);
    ERR("dir_O_CREAT_EISDIR", open("d", O_CREAT | O_WRONLY, 0644), EISDIR);
    ERR("dir_O_CREAT_RDONLY_EISDIR", open("d", O_CREAT | O_RDONLY, 0644), EISDIR);
    ERR("O_CREAT_O_DIRECTORY_EINVAL", open("nd", O_CREAT | O_DIRECTORY | O_RDONLY, 0755), EINVAL);
    mkl("f", "lf");
    mkl("d", "ld");
    ERR("O_NOFOLLOW_symlink_ELOOP", open("lf", O_RDONLY | O_NOFOLLOW), ELOOP);
    cl(OK("O_NOFOLLOW_file", open("f", O_RDONLY | O_NOFOLLOW)));
    cl(OK("O_NOFOLLOW_symlink_in_prefix", open("ld/g", O_RDONLY | O_NOFOLLOW)));
    cl(OK("via_symlink", open("lf", O_RDONLY)));
    cl(OK("O_PATH_O_NOFOLLOW_symlink", open("lf", O_PATH | O_NOFOLLOW)));
    ERR("file_as_dir_ENOTDIR", open("f/x", O_RDONLY), ENOTDIR);
    ERR("file_as_dir_O_CREAT_ENOTDIR", open("f/x", O_CREAT | O_WRONLY, 0644), ENOTDIR);
    ERR("missing_dir_ENOENT", open("nodir/x", O_RDONLY), ENOENT);
    ERR("missing_dir_O_CREAT_ENOENT", open("nodir/x", O_CREAT | O_WRONLY, 0644), ENOENT);
    ERR("file_trailing_slash_ENOTDIR", open("f/", O_RDONLY), ENOTDIR);
    ERR("O_CREAT_trailing_slash_EISDIR", open("new/", O_CREAT | O_WRONLY, 0644), EISDIR);
    ERR("empty_path_ENOENT", open("", O_RDONLY), ENOENT);
    fd = open("f", O_RDONLY);
    ERR("write_O_RDONLY_EBADF", write(fd, "x", 1), EBADF);
    cl(fd);
    fd = open("f", O_WRONLY);
    ERR("read_O_WRONLY_EBADF", read(fd, b, 1), EBADF);
    cl(fd);
    mkf("a", 0644, "ab");
    fd = OK("O_APPEND", open("a", O_WRONLY | O_APPEND));
    if (fd >= 0) {
        lseek(fd, 0, SEEK_SET);
        EQ("O_APPEND_write", write(fd, "c", 1), 1);
        EQ("O_APPEND_offset_at_end", lseek(fd, 0, SEEK_CUR), 3);
    }
    cl(fd);
    chk_content("O_APPEND_appends", "a", "abc");
    fd = OK("creat", creat("c", 0640));
    if (fd >= 0) EQ("creat_is_O_WRONLY", fcntl(fd, F_GETFL) & O_ACCMODE, O_WRONLY);
    cl(fd);
    chk_mode("creat_mode", "c", 0640);
    cl(OK("creat_existing", creat("a", 0600)));
    chk_size("creat_existing_truncates", "a", 0);
    chk_mode("creat_existing_keeps_mode", "a", 0644);
    int dfd = open("d", O_RDONLY | O_DIRECTORY);
    cl(OK("openat_dirfd", openat(dfd, "g", O_RDONLY)));
    cl(OK("openat_dirfd_O_CREAT", openat(dfd, "h", O_CREAT | O_WRONLY, 0644)));
    chk_type("openat_dirfd_O_CREAT_in_dir", "d/h", S_IFREG);
    cl(dfd);
    fd = open("f", O_RDONLY);
    ERR("openat_file_dirfd_ENOTDIR", openat(fd, "x", O_RDONLY), ENOTDIR);
    cl(fd);
    ERR("openat_bad_dirfd_EBADF", openat(987, "x", O_RDONLY), EBADF);
    fd = open("f", O_RDWR);
    if (fd >= 0) {
        EQ("pwrite", pwrite(fd, "xyz", 3, 5), 3);
        chk_size("pwrite_past_end_grows", "f", 8);
        EQ("pread_hole_zero", pread(fd, b, 8, 0) == 8 && b[0] == 0 && b[4] == 0 && b[5] == 'x', 1);
    }
    cl(fd);
}

static void c_open_perm(void) {
    mkf("r600", 0600, "x");
    mkf("r604", 0604, "x");
    mkfo("r640g", 0640, 0, G1, "x");
    mkfo("o060", 0060, U1, G1, "x");
    mkf("r000", 0000, "x");
    mkd("d700", 0700);
    mkf("d700/f", 0644, "x");
    mkd("d711", 0711);
    mkf("d711/f", 0644, "x");
    mkd("d755", 0755);
    mkd("d777", 0777);
    cl(OK("root_read_0000", open("r000", O_RDONLY)));
    cl(OK("root_write_0000", open("r000", O_WRONLY)));
    AS(U1, G1) {
        ERR("other_read_0600_EACCES", open("r600", O_RDONLY), EACCES);
        ERR("other_write_0600_EACCES", open("r600", O_WRONLY), EACCES);
        cl(OK("other_read_0604", open("r604", O_RDONLY)));
        ERR("other_write_0604_EACCES", open("r604", O_WRONLY), EACCES);
        ERR("other_rdwr_0604_EACCES", open("r604", O_RDWR), EACCES);
        ERR("other_O_TRUNC_0604_EACCES", open("r604", O_RDONLY | O_TRUNC), EACCES);
        cl(OK("group_read_0640", open("r640g", O_RDONLY)));
        ERR("group_write_0640_EACCES", open("r640g", O_WRONLY), EACCES);
        ERR("owner_class_first_0060_EACCES", open("o060", O_RDONLY), EACCES);
        ERR("other_read_0000_EACCES", open("r000", O_RDONLY), EACCES);
        ERR("no_search_0700_EACCES", open("d700/f", O_RDONLY), EACCES);
        cl(OK("search_only_0711", open("d711/f", O_RDONLY)));
        ERR("list_0711_EACCES", open("d711", O_RDONLY | O_DIRECTORY), EACCES);
        ERR("create_in_0755_EACCES", open("d755/new", O_CREAT | O_WRONLY, 0644), EACCES);
        ERR("O_EXCL_existing_EEXIST", open("r600", O_CREAT | O_EXCL | O_WRONLY, 0644), EEXIST);
        cl(OK("create_in_0777", open("d777/mine", O_CREAT | O_EXCL | O_WRONLY, 0600)));
        cl(OK("owner_reopen_0600", open("d777/mine", O_RDWR)));
    }
    chk_absent("create_in_0755_nothing_created", "d755/new");
    chk_owner("create_in_0777_owner", "d777/mine", U1, G1);
}

static void c_owner(void) {
    mkd("w", 0777);
    AS(U1, G1) {
        cl(OK("create_file", open("w/f", O_CREAT | O_WRONLY, 0644)));
        OK("mkdir", mkdir("w/d", 0755));
        OK("symlink", symlink("f", "w/l"));
        OK("mkfifo", mkfifo("w/p", 0644));
        OK("mknod_socket", mknod("w/s", S_IFSOCK | 0644, 0));
        OK("link", link("w/f", "w/h"));
    }
    chk_owner("file_owner", "w/f", U1, G1);
    chk_owner("dir_owner", "w/d", U1, G1);
    chk_owner("symlink_owner", "w/l", U1, G1);
    chk_owner("fifo_owner", "w/p", U1, G1);
    chk_owner("socket_owner", "w/s", U1, G1);
    chk_owner("hard_link_same_owner", "w/h", U1, G1);
    AS_G(U2, G2, GX) {
        cl(OK("other_user_create_file", open("w/f2", O_CREAT | O_WRONLY, 0644)));
        OK("other_user_mkdir", mkdir("w/d2", 0755));
    }
    chk_owner("primary_gid_not_supplementary_file", "w/f2", U2, G2);
    chk_owner("primary_gid_not_supplementary_dir", "w/d2", U2, G2);
    cl(OK("root_create_file", open("rf", O_CREAT | O_WRONLY, 0644)));
    chk_owner("root_file_owner", "rf", 0, 0);
}

static void c_umask(void) {
    umask(0);
    cl(OK("umask0_file_0777", open("f777", O_CREAT | O_WRONLY, 0777)));
    chk_mode("umask0_file_mode_0777", "f777", 0777);
    OK("umask0_mkdir_0777", mkdir("d777", 0777));
    chk_mode("umask0_mkdir_mode_0777", "d777", 0777);
    OK("umask0_mkfifo_0777", mkfifo("p777", 0777));
    chk_mode("umask0_mkfifo_mode_0777", "p777", 0777);
    OK("umask0_mknod_0666", mknod("n666", S_IFREG | 0666, 0));
    chk_mode("umask0_mknod_mode_0666", "n666", 0666);
    cl(OK("umask0_file_04755", open("suid", O_CREAT | O_WRONLY, 04755)));
    chk_mode("umask0_file_mode_04755", "suid", 04755);
    OK("umask0_mkdir_sticky", mkdir("dsticky", 01777));
    chk_mode("umask0_mkdir_keeps_sticky", "dsticky", 01777);
    OK("umask0_mkdir_07777", mkdir("d7777", 07777));
    chk_mode("umask0_mkdir_drops_setid", "d7777", 01777);
    umask(022);
    cl(OK("umask022_file", open("f022", O_CREAT | O_WRONLY, 0777)));
    chk_mode("umask022_file_mode", "f022", 0755);
    OK("umask022_mkdir", mkdir("d022", 0777));
    chk_mode("umask022_mkdir_mode", "d022", 0755);
    umask(077);
    cl(OK("umask077_file", open("f077", O_CREAT | O_WRONLY, 0666)));
    chk_mode("umask077_file_mode", "f077", 0600);
    OK("umask077_mkdir", mkdir("d077", 0777));
    chk_mode("umask077_mkdir_mode", "d077", 0700);
    OK("umask077_symlink", symlink("x", "l077"));
    chk_mode("umask077_symlink_mode_0777", "l077", 0777);
    umask(0272);
    cl(OK("umask0272_file", open("f272", O_CREAT | O_WRONLY, 0777)));
    chk_mode("umask0272_file_mode", "f272", 0505);
    EQ("umask_returns_previous", umask(022), 0272);
}

static void c_mkdir(void) {
    struct snap p0 = snap(".");
    tick();
    OK("mkdir", mkdir("d", 0755));
    chk_type("mkdir_type", "d", S_IFDIR);
    chk_mode("mkdir_mode", "d", 0755);
    chk_nlink("mkdir_nlink_2", "d", 2);
    chk_nlink("mkdir_parent_nlink_3", ".", 3);
    struct snap p1 = snap(".");
    chk_later("mkdir_parent_mtime", p0, p1, MTIME);
    chk_later("mkdir_parent_ctime", p0, p1, CTIME);
    chk_listed("mkdir_listed", ".", "d", DT_DIR);
    mkf("f", 0644, "x");
    mkl("nowhere", "dangling");
    ERR("existing_dir_EEXIST", mkdir("d", 0755), EEXIST);
    ERR("existing_file_EEXIST", mkdir("f", 0755), EEXIST);
    ERR("dangling_symlink_EEXIST", mkdir("dangling", 0755), EEXIST);
    chk_absent("dangling_symlink_target_not_created", "nowhere");
    ERR("missing_parent_ENOENT", mkdir("nodir/x", 0755), ENOENT);
    ERR("file_parent_ENOTDIR", mkdir("f/x", 0755), ENOTDIR);
    ERR("empty_ENOENT", mkdir("", 0755), ENOENT);
    ERR("dot_EEXIST", mkdir(".", 0755), EEXIST);
    OK("trailing_slash", mkdir("t/", 0755));
    chk_type("trailing_slash_type", "t", S_IFDIR);
    OK("nested", mkdir("d/e", 0700));
    chk_nlink("nested_parent_nlink_3", "d", 3);
    int dfd = open("d", O_RDONLY | O_DIRECTORY);
    OK("mkdirat_dirfd", mkdirat(dfd, "at", 0755));
    chk_type("mkdirat_dirfd_in_dir", "d/at", S_IFDIR);
    cl(dfd);
    int fd = open("f", O_RDONLY);
    ERR("mkdirat_file_dirfd_ENOTDIR", mkdirat(fd, "x", 0755), ENOTDIR);
    cl(fd);
    ERR("mkdirat_bad_dirfd_EBADF", mkdirat(987, "x", 0755), EBADF);
    mkd("ro", 0755);
    AS(U1, G1) {
        ERR("no_write_EACCES", mkdir("ro/x", 0755), EACCES);
    }
}

static void c_rmdir(void) {
    mkd("d", 0755);
    mkd("full", 0755);
    mkf("full/f", 0644, "x");
    mkf("f", 0644, "x");
    mkl("d", "ld");
    struct snap p0 = snap(".");
    tick();
    OK("rmdir", rmdir("d"));
    chk_absent("rmdir_gone", "d");
    struct snap p1 = snap(".");
    chk_nlink("rmdir_parent_nlink", ".", 3);
    chk_later("rmdir_parent_mtime", p0, p1, MTIME);
    chk_later("rmdir_parent_ctime", p0, p1, CTIME);
    ERR2("nonempty_ENOTEMPTY", rmdir("full"), ENOTEMPTY, EEXIST);
    ERR("file_ENOTDIR", rmdir("f"), ENOTDIR);
    mkd("d", 0755);
    ERR("symlink_to_dir_ENOTDIR", rmdir("ld"), ENOTDIR);
    ERR("missing_ENOENT", rmdir("missing"), ENOENT);
    ERR("dot_EINVAL", rmdir("."), EINVAL);
    ERR("sub_dot_EINVAL", rmdir("d/."), EINVAL);
    ERR("dotdot_ENOTEMPTY", rmdir(".."), ENOTEMPTY);
    ERR("file_prefix_ENOTDIR", rmdir("f/x"), ENOTDIR);
    OK("trailing_slash", rmdir("d/"));
    chk_absent("trailing_slash_gone", "d");
    mkd("ro", 0755);
    mkd("ro/sub", 0777);
    AS(U1, G1) {
        ERR("no_write_EACCES", rmdir("ro/sub"), EACCES);
    }
}

static void c_unlink(void) {
    mkf("f", 0644, "data");
    mkf("g", 0644, "x");
    mkd("d", 0755);
    if (link("f", "f2") < 0) setup_failed("link", "f2");
    mkl("g", "lg");
    struct snap p0 = snap("."), f0 = snap("f");
    tick();
    OK("unlink", unlink("f2"));
    chk_absent("unlink_gone", "f2");
    chk_nlink("other_link_nlink_1", "f", 1);
    chk_later("other_link_ctime", f0, snap("f"), CTIME);
    struct snap p1 = snap(".");
    chk_later("parent_mtime", p0, p1, MTIME);
    chk_later("parent_ctime", p0, p1, CTIME);
    ERR("dir_EISDIR", unlink("d"), EISDIR);
    ERR("missing_ENOENT", unlink("missing"), ENOENT);
    ERR("file_prefix_ENOTDIR", unlink("f/x"), ENOTDIR);
    ERR("missing_prefix_ENOENT", unlink("nodir/x"), ENOENT);
    ERR("file_trailing_slash_ENOTDIR", unlink("f/"), ENOTDIR);
    OK("symlink", unlink("lg"));
    chk_absent("symlink_gone", "lg");
    chk_exists("symlink_target_kept", "g");
    int fd = open("f", O_RDWR);
    OK("open_file", unlink("f"));
    chk_absent("open_file_gone", "f");
    if (fd >= 0) {
        char b[8] = {0};
        struct stat st;
        EQ("open_file_still_readable", pread(fd, b, 4, 0), 4);
        EQ("open_file_still_writable", pwrite(fd, "more", 4, 4), 4);
        EQ("open_file_fstat_nlink_0", fstat(fd, &st) == 0 ? (long)st.st_nlink : -1, 0);
    }
    cl(fd);
    mkd("e", 0755);
    OK("unlinkat_AT_REMOVEDIR", unlinkat(AT_FDCWD, "e", AT_REMOVEDIR));
    chk_absent("unlinkat_AT_REMOVEDIR_gone", "e");
    ERR("unlinkat_AT_REMOVEDIR_file_ENOTDIR", unlinkat(AT_FDCWD, "g", AT_REMOVEDIR), ENOTDIR);
    ERR("unlinkat_bad_flag_EINVAL", unlinkat(AT_FDCWD, "g", 0x4), EINVAL);
    mkd("ro", 0755);
    mkf("ro/f", 0666, "x");
    AS(U1, G1) {
        ERR("no_write_EACCES", unlink("ro/f"), EACCES);
    }
}

static void c_rename_file(void) {
    char b[8] = {0};
    mkf("a", 0644, "A");
    mkf("b", 0644, "B");
    mkd("d", 0755);
    if (link("b", "b2") < 0) setup_failed("link", "b2");
    ino_t ia = ino_of("a", 0);
    struct snap a0 = snap("a"), p0 = snap(".");
    int fd = open("a", O_RDONLY);
    tick();
    OK("rename", rename("a", "c"));
    chk_absent("rename_old_gone", "a");
    chk_true("rename_same_inode", ino_of("c", 0) == ia, "same inode", "different inode");
    chk_content("rename_content", "c", "A");
    chk_later("renamed_file_ctime", a0, snap("c"), CTIME);
    chk_kept("renamed_file_mtime", a0, snap("c"), MTIME);
    struct snap p1 = snap(".");
    chk_later("parent_mtime", p0, p1, MTIME);
    chk_later("parent_ctime", p0, p1, CTIME);
    if (fd >= 0) EQ("open_fd_survives", pread(fd, b, 1, 0) == 1 && b[0] == 'A', 1);
    cl(fd);
    OK("over_existing", rename("c", "b"));
    chk_true("over_existing_same_inode", ino_of("b", 0) == ia, "same inode", "different inode");
    chk_content("over_existing_content", "b", "A");
    chk_absent("over_existing_old_gone", "c");
    chk_nlink("replaced_file_nlink_drops", "b2", 1);
    OK("onto_itself", rename("b", "b"));
    chk_exists("onto_itself_kept", "b");
    if (link("b", "b3") < 0) setup_failed("link", "b3");
    OK("hard_links_same_inode", rename("b", "b3"));
    chk_exists("hard_links_same_inode_source_kept", "b");
    chk_exists("hard_links_same_inode_target_kept", "b3");
    ERR("over_dir_EISDIR", rename("b", "d"), EISDIR);
    ERR("missing_ENOENT", rename("missing", "z"), ENOENT);
    ERR("into_missing_dir_ENOENT", rename("b", "nodir/z"), ENOENT);
    ERR("to_trailing_slash_ENOTDIR", rename("b", "z/"), ENOTDIR);
    ERR("from_trailing_slash_ENOTDIR", rename("b/", "z"), ENOTDIR);
    ERR("empty_ENOENT", rename("", "z"), ENOENT);
    struct snap d0 = snap("d");
    p0 = snap(".");
    tick();
    OK("into_subdir", rename("b3", "d/b3"));
    chk_later("into_subdir_target_dir_mtime", d0, snap("d"), MTIME);
    chk_later("into_subdir_source_dir_mtime", p0, snap("."), MTIME);
    mkl("d", "ld");
    OK("symlink", rename("ld", "ld2"));
    chk_type("symlink_renamed_itself", "ld2", S_IFLNK);
    chk_type("symlink_target_untouched", "d", S_IFDIR);
    int dfd = open("d", O_RDONLY | O_DIRECTORY);
    OK("renameat_dirfd", renameat(dfd, "b3", AT_FDCWD, "b4"));
    chk_content("renameat_dirfd_moved", "b4", "A");
    cl(dfd);
    mkf("x", 0644, "X");
    mkf("y", 0644, "Y");
    ERR("RENAME_NOREPLACE_EEXIST", renameat2(AT_FDCWD, "x", AT_FDCWD, "y", RENAME_NOREPLACE), EEXIST);
    chk_content("RENAME_NOREPLACE_target_kept", "y", "Y");
    OK("RENAME_NOREPLACE", renameat2(AT_FDCWD, "x", AT_FDCWD, "x2", RENAME_NOREPLACE));
    OK("RENAME_EXCHANGE", renameat2(AT_FDCWD, "x2", AT_FDCWD, "y", RENAME_EXCHANGE));
    chk_content("RENAME_EXCHANGE_swapped_a", "y", "X");
    chk_content("RENAME_EXCHANGE_swapped_b", "x2", "Y");
    ERR("RENAME_EXCHANGE_missing_ENOENT", renameat2(AT_FDCWD, "y", AT_FDCWD, "none", RENAME_EXCHANGE),
        ENOENT);
}

static void c_rename_dir(void) {
    mkd("a", 0755);
    mkd("a/sub", 0755);
    mkd("b", 0755);
    mkd("b/full", 0755);
    mkf("b/full/x", 0644, "x");
    mkd("e", 0755);
    mkf("file", 0644, "x");
    ino_t ia = ino_of("a", 0);
    struct snap a0 = snap("a");
    tick();
    OK("rename", rename("a", "a2"));
    chk_absent("rename_old_gone", "a");
    chk_true("rename_same_inode", ino_of("a2", 0) == ia, "same inode", "different inode");
    chk_later("renamed_dir_ctime", a0, snap("a2"), CTIME);
    OK("into_other_dir", rename("a2/sub", "b/sub"));
    chk_nlink("into_other_dir_source_parent_nlink", "a2", 2);
    chk_nlink("into_other_dir_target_parent_nlink", "b", 4);
    chk_same("into_other_dir_dotdot_updated", "b/sub/..", "b", 1);
    ino_t isub = ino_of("b/sub", 0);
    OK("over_empty_dir", rename("b/sub", "e"));
    chk_true("over_empty_dir_same_inode", ino_of("e", 0) == isub, "same inode", "different inode");
    chk_nlink("over_empty_dir_parent_nlink", "b", 3);
    ERR2("over_nonempty_ENOTEMPTY", rename("e", "b/full"), ENOTEMPTY, EEXIST);
    ERR("over_file_ENOTDIR", rename("e", "file"), ENOTDIR);
    ERR("file_over_dir_EISDIR", rename("file", "e"), EISDIR);
    ERR("into_own_subdir_EINVAL", rename("b", "b/full/b"), EINVAL);
    ERR("into_itself_EINVAL", rename("b", "b/b"), EINVAL);
    ERR2("onto_ancestor_ENOTEMPTY", rename("b/full", "b"), ENOTEMPTY, EEXIST);
    OK("onto_itself", rename("e", "e"));
    OK("trailing_slashes", rename("e/", "e2/"));
    chk_type("trailing_slashes_moved", "e2", S_IFDIR);
    ERR2("dot_EBUSY", rename(".", "x"), EBUSY, EINVAL);
    ERR2("dotdot_EBUSY", rename("..", "x"), EBUSY, EINVAL);
    ERR2("to_dot_EBUSY", rename("e2", "."), EBUSY, EINVAL);
    ERR("missing_ENOENT", rename("missing", "x"), ENOENT);
    mkd("ro", 0755);
    mkd("w", 0777);
    mkdo("w/sub", 0755, U1, G1);
    AS(U1, G1) {
        ERR("into_unwritable_EACCES", rename("w/sub", "ro/sub"), EACCES);
        OK("own_dir_in_writable", rename("w/sub", "w/sub2"));
    }
}

static void c_rename_sticky(void) {
    mkd("t", 01777);
    mkfo("t/u2f", 0644, U2, G2, "x");
    mkfo("t/u1f", 0644, U1, G1, "x");
    mkfo("t/u1g", 0644, U1, G1, "x");
    mkdo("t/u2d", 0755, U2, G2);
    mkd("n", 0777);
    mkfo("n/u2f", 0644, U2, G2, "x");
    mkdo("s1", 01777, U1, G1);
    mkfo("s1/u2f", 0644, U2, G2, "x");
    mkd("ro", 0755);
    mkf("ro/f", 0666, "x");
    mkd("mv", 0777);
    mkdo("mv/u2dir", 0755, U2, G2);
    mkdo("mv/u1dir", 0755, U1, G1);
    AS(U1, G1) {
        ERR("unlink_other_EPERM", unlink("t/u2f"), EPERM);
        ERR("rename_other_EPERM", rename("t/u2f", "t/x"), EPERM);
        ERR("rename_over_other_EPERM", rename("t/u1f", "t/u2f"), EPERM);
        ERR("rmdir_other_EPERM", rmdir("t/u2d"), EPERM);
        ERR("rename_other_out_EPERM", rename("t/u2f", "n/x"), EPERM);
        OK("unlink_own", unlink("t/u1g"));
        OK("rename_own", rename("t/u1f", "t/u1f2"));
        OK("dir_owner_unlinks_other", unlink("s1/u2f"));
        OK("not_sticky_unlink_other", unlink("n/u2f"));
        ERR("no_write_unlink_EACCES", unlink("ro/f"), EACCES);
        ERR("no_write_rename_EACCES", rename("ro/f", "n/f"), EACCES);
        ERR("move_others_dir_EACCES", rename("mv/u2dir", "n/u2dir"), EACCES);
        OK("move_own_dir", rename("mv/u1dir", "n/u1dir"));
    }
    chk_exists("other_file_kept", "t/u2f");
    chk_exists("other_dir_kept", "t/u2d");
    chk_absent("own_file_unlinked", "t/u1g");
    chk_absent("not_sticky_other_unlinked", "n/u2f");
    AS(U2, G2) {
        OK("owner_unlinks_own_in_sticky", unlink("t/u2f"));
    }
}

static void c_link(void) {
    mkf("f", 0644, "data");
    mkd("d", 0755);
    mkl("f", "l");
    mkl("nowhere", "dangling");
    OK("link", link("f", "g"));
    chk_nlink("link_nlink_source", "f", 2);
    chk_nlink("link_nlink_new", "g", 2);
    chk_same("link_same_inode", "f", "g", 0);
    chk_content("link_content", "g", "data");
    ERR("existing_EEXIST", link("f", "g"), EEXIST);
    ERR("to_dir_EEXIST", link("f", "d"), EEXIST);
    ERR("to_dangling_symlink_EEXIST", link("f", "dangling"), EEXIST);
    ERR("dir_EPERM", link("d", "d2"), EPERM);
    ERR("missing_ENOENT", link("missing", "x"), ENOENT);
    ERR("into_missing_dir_ENOENT", link("f", "nodir/x"), ENOENT);
    ERR("file_prefix_ENOTDIR", link("f/x", "y"), ENOTDIR);
    ERR("to_trailing_slash_ENOENT", link("f", "z/"), ENOENT);
    OK("symlink_not_followed", link("l", "hl"));
    chk_type("symlink_not_followed_type", "hl", S_IFLNK);
    OK("linkat_AT_SYMLINK_FOLLOW", linkat(AT_FDCWD, "l", AT_FDCWD, "hf", AT_SYMLINK_FOLLOW));
    chk_type("linkat_AT_SYMLINK_FOLLOW_type", "hf", S_IFREG);
    chk_same("linkat_AT_SYMLINK_FOLLOW_inode", "hf", "f", 0);
    chk_nlink("three_links", "f", 3);
    OK("dangling_symlink", link("dangling", "hd"));
    chk_type("dangling_symlink_type", "hd", S_IFLNK);
    OK("unlink_one", unlink("g"));
    chk_nlink("unlink_one_nlink", "f", 2);
    int dfd = open("d", O_RDONLY | O_DIRECTORY);
    OK("linkat_dirfd", linkat(AT_FDCWD, "f", dfd, "in", 0));
    chk_same("linkat_dirfd_inode", "d/in", "f", 0);
    cl(dfd);
    mkd("ro", 0755);
    mkd("w", 0777);
    mkfo("w/mine", 0644, U1, G1, "x");
    mkf("r600", 0600, "x");
    FILE *p = fopen("/proc/sys/fs/protected_hardlinks", "r");
    int protected = 0;
    if (p) {
        if (fscanf(p, "%d", &protected) != 1) protected = 0;
        fclose(p);
    }
    AS(U1, G1) {
        ERR("no_write_EACCES", link("w/mine", "ro/x"), EACCES);
        OK("own_file", link("w/mine", "w/mine2"));
        if (protected)
            ERR("protected_hardlinks_EPERM", link("r600", "w/r600"), EPERM);
        else
            OK("protected_hardlinks_EPERM", link("r600", "w/r600"));
    }
}

static void c_symlink(void) {
    char b[PATH_MAX + 2];
    mkf("f", 0644, "data");
    mkd("d", 0755);
    mkf("d/g", 0644, "g");
    OK("symlink", symlink("target-of-l", "l"));
    chk_type("symlink_type", "l", S_IFLNK);
    chk_mode("symlink_mode_0777", "l", 0777);
    chk_size("symlink_size_is_target_length", "l", 11);
    memset(b, 0, sizeof b);
    EQ("readlink", readlink("l", b, sizeof b), 11);
    chk_true("readlink_content", strcmp(b, "target-of-l") == 0, "target-of-l", "other");
    memset(b, 0, sizeof b);
    EQ("readlink_short_buffer_truncates", readlink("l", b, 4), 4);
    chk_true("readlink_short_buffer_content", memcmp(b, "targ", 4) == 0 && b[4] == 0, "targ", "other");
    ERR("existing_symlink_EEXIST", symlink("x", "l"), EEXIST);
    ERR("existing_file_EEXIST", symlink("x", "f"), EEXIST);
    ERR("existing_dir_EEXIST", symlink("x", "d"), EEXIST);
    ERR("readlink_file_EINVAL", readlink("f", b, sizeof b), EINVAL);
    ERR("readlink_dir_EINVAL", readlink("d", b, sizeof b), EINVAL);
    ERR("readlink_missing_ENOENT", readlink("missing", b, sizeof b), ENOENT);
    ERR("empty_target_ENOENT", symlink("", "e"), ENOENT);
    ERR("missing_dir_ENOENT", symlink("x", "nodir/x"), ENOENT);
    struct stat st;
    ERR("dangling_stat_ENOENT", stat("l", &st), ENOENT);
    OK("dangling_lstat", lstat("l", &st));
    mkl("f", "lf");
    mkl("d", "ld");
    chk_same("stat_follows", "lf", "f", 1);
    chk_true("lstat_does_not_follow", ino_of("lf", 0) != ino_of("f", 0), "different inode", "same inode");
    OK("traverse_in_prefix", stat("ld/g", &st));
    mkl("../f", "d/up");
    chk_same("relative_target_dotdot", "d/up", "f", 1);
    mkl("/", "rootlink");
    chk_same("absolute_target", "rootlink", "/", 1);
    chk_content("read_through", "lf", "data");
    int fd = open("lf", O_WRONLY | O_APPEND);
    if (fd >= 0) EQ("write_through", write(fd, "+", 1), 1);
    cl(fd);
    chk_content("write_through_reaches_target", "f", "data+");
    int dfd = open("d", O_RDONLY | O_DIRECTORY);
    OK("symlinkat_dirfd", symlinkat("g", dfd, "lg"));
    memset(b, 0, sizeof b);
    EQ("readlinkat_dirfd", readlinkat(dfd, "lg", b, sizeof b), 1);
    cl(dfd);
    chk_content("symlinkat_dirfd_resolves", "d/lg", "g");
    static char longt[PATH_MAX + 1];
    memset(longt, 'x', PATH_MAX - 1);
    longt[PATH_MAX - 1] = 0; /* 4095 bytes */
    OK("target_4095_bytes", symlink(longt, "long"));
    EQ("target_4095_bytes_readlink", readlink("long", b, sizeof b), PATH_MAX - 1);
    chk_size("target_4095_bytes_size", "long", PATH_MAX - 1);
    longt[PATH_MAX - 1] = 'x';
    longt[PATH_MAX] = 0; /* 4096 bytes */
    ERR("target_4096_bytes_ENAMETOOLONG", symlink(longt, "long2"), ENAMETOOLONG);
    mkd("ro", 0755);
    mkd("w", 0777);
    AS(U1, G1) {
        ERR("no_write_EACCES", symlink("x", "ro/x"), EACCES);
        OK("nonroot", symlink("x", "w/x"));
    }
    chk_owner("nonroot_owner", "w/x", U1, G1);
}

static void c_chmod(void) {
    mkf("f", 0644, "x");
    mkd("d", 0755);
    mkl("f", "l");
    OK("chmod_0", chmod("f", 0));
    chk_mode("chmod_0_mode", "f", 0);
    OK("chmod_0777", chmod("f", 0777));
    chk_mode("chmod_0777_mode", "f", 0777);
    OK("chmod_07777", chmod("f", 07777));
    chk_mode("chmod_07777_mode", "f", 07777);
    OK("chmod_04755", chmod("f", 04755));
    chk_mode("chmod_04755_mode", "f", 04755);
    OK("chmod_type_bits_ignored", chmod("f", S_IFDIR | 0640));
    chk_type("chmod_type_bits_ignored_type", "f", S_IFREG);
    chk_mode("chmod_type_bits_ignored_mode", "f", 0640);
    OK("dir_01777", chmod("d", 01777));
    chk_mode("dir_01777_mode", "d", 01777);
    OK("dir_02755", chmod("d", 02755));
    chk_mode("dir_02755_mode", "d", 02755);
    OK("via_symlink", chmod("l", 0600));
    chk_mode("via_symlink_target_changed", "f", 0600);
    chk_mode("via_symlink_link_unchanged", "l", 0777);
    int fd = open("f", O_RDONLY);
    OK("fchmod", fchmod(fd, 0640));
    chk_mode("fchmod_mode", "f", 0640);
    cl(fd);
    OK("fchmodat", fchmodat(AT_FDCWD, "f", 0604, 0));
    chk_mode("fchmodat_mode", "f", 0604);
    OK("fchmodat_NOFOLLOW_file", fchmodat(AT_FDCWD, "f", 0644, AT_SYMLINK_NOFOLLOW));
    chk_mode("fchmodat_NOFOLLOW_file_mode", "f", 0644);
    ERR("fchmodat_NOFOLLOW_symlink_EOPNOTSUPP", fchmodat(AT_FDCWD, "l", 0600, AT_SYMLINK_NOFOLLOW),
        EOPNOTSUPP);
    chk_mode("fchmodat_NOFOLLOW_symlink_target_kept", "f", 0644);
    ERR("missing_ENOENT", chmod("missing", 0644), ENOENT);
    ERR("fchmod_bad_fd_EBADF", fchmod(987, 0644), EBADF);
    mkfo("mine", 0644, U1, G1, "x");
    mkfo("mine_g0", 0644, U1, 0, "x");
    mkf("rootf", 0644, "x");
    AS(U1, G1) {
        ERR("other_EPERM", chmod("rootf", 0777), EPERM);
        int rfd = open("rootf", O_RDONLY);
        ERR("fchmod_other_EPERM", fchmod(rfd, 0777), EPERM);
        cl(rfd);
        OK("owner", chmod("mine", 0600));
        OK("owner_setgid_member", chmod("mine", 02755));
        OK("owner_setgid_not_member", chmod("mine_g0", 02755));
        OK("owner_setuid", chmod("mine_g0", 04755));
    }
    chk_mode("other_EPERM_mode_kept", "rootf", 0644);
    chk_mode("owner_setgid_member_mode", "mine", 02755);
    chk_mode("owner_setuid_mode", "mine_g0", 04755);
    mkfo("mine2", 0644, U1, 0, "x");
    AS(U1, G1) {
        OK("owner_setgid_not_member_cleared", chmod("mine2", 02755));
    }
    chk_mode("owner_setgid_not_member_cleared_mode", "mine2", 0755);
}

static void c_chown(void) {
    mkf("f", 0644, "x");
    mkl("f", "l");
    OK("root_uid_gid", chown("f", U1, G1));
    chk_owner("root_uid_gid_owner", "f", U1, G1);
    OK("root_minus1", chown("f", (uid_t)-1, (gid_t)-1));
    chk_owner("root_minus1_owner_kept", "f", U1, G1);
    OK("root_uid_only", chown("f", U2, (gid_t)-1));
    chk_owner("root_uid_only_owner", "f", U2, G1);
    OK("root_gid_only", chown("f", (uid_t)-1, G2));
    chk_owner("root_gid_only_owner", "f", U2, G2);
    OK("lchown", lchown("l", U1, G1));
    chk_owner("lchown_link_owner", "l", U1, G1);
    chk_owner("lchown_target_kept", "f", U2, G2);
    OK("via_symlink", chown("l", 0, 0));
    chk_owner("via_symlink_target_owner", "f", 0, 0);
    chk_owner("via_symlink_link_kept", "l", U1, G1);
    OK("fchownat_NOFOLLOW", fchownat(AT_FDCWD, "l", U2, G2, AT_SYMLINK_NOFOLLOW));
    chk_owner("fchownat_NOFOLLOW_link_owner", "l", U2, G2);
    chk_owner("fchownat_NOFOLLOW_target_kept", "f", 0, 0);
    int fd = open("f", O_RDONLY);
    OK("fchown", fchown(fd, U1, G2));
    chk_owner("fchown_owner", "f", U1, G2);
    cl(fd);
    ERR("missing_ENOENT", chown("missing", 0, 0), ENOENT);
    ERR("fchown_bad_fd_EBADF", fchown(987, 0, 0), EBADF);
    mkf("s", 06755, "x");
    OK("root_setid_file", chown("s", U1, (gid_t)-1));
    chk_mode("root_clears_setuid_setgid", "s", 0755);
    mkf("s2", 02745, "x");
    OK("root_setgid_no_group_exec", chown("s2", U1, (gid_t)-1));
    chk_mode("root_keeps_setgid_without_group_exec", "s2", 02745);
    mkd("sd", 06755);
    OK("root_setid_dir", chown("sd", U1, (gid_t)-1));
    chk_mode("root_dir_keeps_setid", "sd", 06755);
    mkfo("mine", 0644, U1, 0, "x");
    mkfo("mine_s", 06755, U1, G1, "x");
    mkf("rootf", 0644, "x");
    mkl("rootf", "rootl");
    AS_G(U1, G1, GX) {
        ERR("nonroot_give_away_EPERM", chown("mine", U2, (gid_t)-1), EPERM);
        ERR("nonroot_other_file_EPERM", chown("rootf", U1, G1), EPERM);
        ERR("nonroot_group_not_member_EPERM", chown("mine", (uid_t)-1, G2), EPERM);
        OK("nonroot_group_primary", chown("mine", (uid_t)-1, G1));
        OK("nonroot_group_supplementary", chown("mine", (uid_t)-1, GX));
        OK("nonroot_same_uid", chown("mine", U1, (gid_t)-1));
        OK("nonroot_setid_file", chown("mine_s", (uid_t)-1, GX));
        ERR("nonroot_lchown_other_EPERM", lchown("rootl", U1, G1), EPERM);
    }
    chk_owner("nonroot_final_owner", "mine", U1, GX);
    chk_mode("nonroot_clears_setuid_setgid", "mine_s", 0755);
    chk_owner("nonroot_other_file_owner_kept", "rootf", 0, 0);
}

static void c_truncate(void) {
    char b[16];
    mkf("f", 0644, "hello");
    mkd("d", 0755);
    mkl("f", "l");
    OK("grow", truncate("f", 1000));
    chk_size("grow_size", "f", 1000);
    int fd = open("f", O_RDONLY);
    memset(b, 1, sizeof b);
    EQ("grow_zero_filled", fd >= 0 && pread(fd, b, 8, 5) == 8 && b[0] == 0 && b[7] == 0, 1);
    cl(fd);
    OK("shrink", truncate("f", 3));
    chk_size("shrink_size", "f", 3);
    chk_content("shrink_content", "f", "hel");
    OK("via_symlink", truncate("l", 7));
    chk_size("via_symlink_size", "f", 7);
    chk_type("via_symlink_link_kept", "l", S_IFLNK);
    OK("zero", truncate("f", 0));
    chk_size("zero_size", "f", 0);
    ERR("dir_EISDIR", truncate("d", 0), EISDIR);
    ERR("negative_EINVAL", truncate("f", -1), EINVAL);
    ERR("missing_ENOENT", truncate("missing", 0), ENOENT);
    if (mkfifo("p", 0644) < 0) setup_failed("mkfifo", "p");
    ERR("fifo_EINVAL", truncate("p", 0), EINVAL);
    fd = open("f", O_RDONLY);
    ERR("ftruncate_O_RDONLY_EINVAL", ftruncate(fd, 0), EINVAL);
    cl(fd);
    fd = open("d", O_RDONLY | O_DIRECTORY);
    ERR("ftruncate_dir_EINVAL", ftruncate(fd, 0), EINVAL);
    cl(fd);
    fd = open("f", O_RDWR);
    OK("ftruncate_grow", ftruncate(fd, 4096));
    chk_size("ftruncate_grow_size", "f", 4096);
    struct stat st;
    EQ("ftruncate_grow_fstat_size", fd >= 0 && fstat(fd, &st) == 0 ? (long)st.st_size : -1, 4096);
    ERR("ftruncate_negative_EINVAL", ftruncate(fd, -5), EINVAL);
    OK("ftruncate_shrink", ftruncate(fd, 10));
    chk_size("ftruncate_shrink_size", "f", 10);
    cl(fd);
    ERR("ftruncate_bad_fd_EBADF", ftruncate(987, 0), EBADF);
    mkf("w666", 0666, "x");
    AS(U1, G1) {
        ERR("other_0644_EACCES", truncate("f", 0), EACCES);
        OK("other_0666", truncate("w666", 3));
    }
    chk_size("other_0644_size_kept", "f", 10);
    chk_size("other_0666_size", "w666", 3);
}

static void c_utimes(void) {
    struct timespec t[2] = {{1000000000, 123456789}, {1100000000, 987654321}};
    mkf("f", 0644, "x");
    OK("explicit", utimensat(AT_FDCWD, "f", t, 0));
    chk_time("explicit_atime", "f", ATIME, t[0]);
    chk_time("explicit_mtime", "f", MTIME, t[1]);
    chk_now("explicit_ctime_now", "f", CTIME);
    struct timespec t2[2] = {{0, UTIME_OMIT}, {1200000000, 5}};
    OK("omit_atime", utimensat(AT_FDCWD, "f", t2, 0));
    chk_time("omit_atime_kept", "f", ATIME, t[0]);
    chk_time("omit_atime_mtime_set", "f", MTIME, t2[1]);
    struct timespec t3[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
    OK("now_atime", utimensat(AT_FDCWD, "f", t3, 0));
    chk_now("now_atime_set", "f", ATIME);
    chk_time("now_atime_mtime_kept", "f", MTIME, t2[1]);
    OK("null_times", utimensat(AT_FDCWD, "f", NULL, 0));
    chk_now("null_times_atime", "f", ATIME);
    chk_now("null_times_mtime", "f", MTIME);
    struct timeval tv[2] = {{1300000000, 250000}, {1300000001, 500000}};
    OK("utimes", utimes("f", tv));
    chk_time("utimes_mtime_usec", "f", MTIME, (struct timespec){1300000001, 500000000});
    int fd = open("f", O_RDONLY);
    OK("futimens", futimens(fd, t));
    chk_time("futimens_mtime", "f", MTIME, t[1]);
    cl(fd);
    struct timespec old[2] = {{-1000, 0}, {-100000, 42}};
    OK("pre_epoch", utimensat(AT_FDCWD, "f", old, 0));
    chk_time("pre_epoch_mtime", "f", MTIME, old[1]);
    struct timespec y2038[2] = {{2200000000LL, 0}, {4000000000LL, 7}};
    OK("after_2038", utimensat(AT_FDCWD, "f", y2038, 0));
    chk_time("after_2038_mtime", "f", MTIME, y2038[1]);
    ERR("missing_ENOENT", utimensat(AT_FDCWD, "missing", NULL, 0), ENOENT);
    struct timespec bad[2] = {{0, 1000000000}, {0, 0}};
    ERR("nsec_1e9_EINVAL", utimensat(AT_FDCWD, "f", bad, 0), EINVAL);
    struct timespec neg[2] = {{0, 0}, {0, -1}};
    ERR("nsec_negative_EINVAL", utimensat(AT_FDCWD, "f", neg, 0), EINVAL);
    ERR("bad_flag_EINVAL", utimensat(AT_FDCWD, "f", NULL, 0x4), EINVAL);
    mkd("d", 0755);
    OK("dir", utimensat(AT_FDCWD, "d", t, 0));
    chk_time("dir_mtime", "d", MTIME, t[1]);
    mkf("w666", 0666, "x");
    mkf("r644", 0644, "x");
    mkfo("own444", 0444, U1, G1, "x");
    AS(U1, G1) {
        OK("writer_null_times", utimensat(AT_FDCWD, "w666", NULL, 0));
        struct timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
        OK("writer_UTIME_NOW", utimensat(AT_FDCWD, "w666", now, 0));
        ERR("writer_explicit_EPERM", utimensat(AT_FDCWD, "w666", t, 0), EPERM);
        ERR("other_null_times_EACCES", utimensat(AT_FDCWD, "r644", NULL, 0), EACCES);
        ERR("other_explicit_EPERM", utimensat(AT_FDCWD, "r644", t, 0), EPERM);
        OK("owner_explicit_readonly_file", utimensat(AT_FDCWD, "own444", t, 0));
        OK("owner_null_times_readonly_file", utimensat(AT_FDCWD, "own444", NULL, 0));
        int wfd = open("w666", O_RDONLY);
        ERR("writer_futimens_explicit_EPERM", futimens(wfd, t), EPERM);
        cl(wfd);
    }
    chk_now("writer_null_times_mtime", "w666", MTIME);
}

static void c_access(void) {
    mkf("x755", 0755, "x");
    mkf("r644", 0644, "x");
    mkf("r600", 0600, "x");
    mkf("n000", 0000, "x");
    mkf("x100", 0100, "x");
    mkd("d644", 0644);
    mkd("d700", 0700);
    mkf("d700/f", 0644, "x");
    mkl("nowhere", "dangling");
    mkfo("mine", 0600, U1, G1, "x");
    OK("F_OK", access("r644", F_OK));
    ERR("F_OK_missing_ENOENT", access("missing", F_OK), ENOENT);
    ERR("F_OK_dangling_ENOENT", access("dangling", F_OK), ENOENT);
    OK("faccessat_NOFOLLOW_dangling", faccessat(AT_FDCWD, "dangling", F_OK, AT_SYMLINK_NOFOLLOW));
    OK("root_RW_on_0000", access("n000", R_OK | W_OK));
    ERR("root_X_on_0644_EACCES", access("r644", X_OK), EACCES);
    OK("root_X_on_0755", access("x755", X_OK));
    OK("root_X_on_0100", access("x100", X_OK));
    OK("root_X_on_dir_0644", access("d644", X_OK));
    OK("faccessat_AT_EACCESS", faccessat(AT_FDCWD, "r644", R_OK, AT_EACCESS));
    ERR("bad_mode_EINVAL", access("r644", 0100), EINVAL);
    ERR("file_prefix_ENOTDIR", access("r644/x", F_OK), ENOTDIR);
    AS(U1, G1) {
        ERR("other_R_0600_EACCES", access("r600", R_OK), EACCES);
        ERR("other_W_0644_EACCES", access("r644", W_OK), EACCES);
        OK("other_R_0644", access("r644", R_OK));
        OK("other_X_0755", access("x755", X_OK));
        ERR("other_X_0644_EACCES", access("r644", X_OK), EACCES);
        ERR("other_R_0000_EACCES", access("n000", R_OK), EACCES);
        OK("other_F_OK_0000", access("n000", F_OK));
        ERR("no_search_EACCES", access("d700/f", F_OK), EACCES);
        OK("owner_RW_0600", access("mine", R_OK | W_OK));
        ERR("owner_X_0600_EACCES", access("mine", X_OK), EACCES);
    }
}

static void c_mknod(void) {
    OK("mkfifo", mkfifo("p", 0666));
    chk_type("mkfifo_type", "p", S_IFIFO);
    chk_mode("mkfifo_mode_umask", "p", 0644);
    chk_nlink("mkfifo_nlink", "p", 1);
    chk_size("mkfifo_size", "p", 0);
    ERR("mkfifo_existing_EEXIST", mkfifo("p", 0644), EEXIST);
    OK("mknod_fifo", mknod("p2", S_IFIFO | 0600, 0));
    chk_type("mknod_fifo_type", "p2", S_IFIFO);
    chk_mode("mknod_fifo_mode", "p2", 0600);
    OK("mknod_socket", mknod("s", S_IFSOCK | 0644, 0));
    chk_type("mknod_socket_type", "s", S_IFSOCK);
    OK("mknod_chr", mknod("c", S_IFCHR | 0644, makedev(1, 7)));
    chk_type("mknod_chr_type", "c", S_IFCHR);
    chk_rdev("mknod_chr_rdev", "c", makedev(1, 7));
    chk_mode("mknod_chr_mode", "c", 0644);
    OK("mknod_blk", mknod("b", S_IFBLK | 0640, makedev(7, 3)));
    chk_type("mknod_blk_type", "b", S_IFBLK);
    chk_rdev("mknod_blk_rdev", "b", makedev(7, 3));
    OK("mknod_chr_large_numbers", mknod("c2", S_IFCHR | 0600, makedev(259, 123456)));
    chk_rdev("mknod_chr_large_numbers_rdev", "c2", makedev(259, 123456));
    OK("mknod_reg", mknod("r", S_IFREG | 0644, 0));
    chk_type("mknod_reg_type", "r", S_IFREG);
    OK("mknod_type_0_is_reg", mknod("r0", 0644, 0));
    chk_type("mknod_type_0_is_reg_type", "r0", S_IFREG);
    ERR("mknod_dir_EPERM", mknod("dd", S_IFDIR | 0755, 0), EPERM);
    ERR("mknod_bad_type_EINVAL", mknod("x", S_IFMT | 0644, 0), EINVAL);
    ERR("mknod_existing_EEXIST", mknod("c", S_IFCHR | 0644, makedev(1, 7)), EEXIST);
    ERR("mknod_missing_dir_ENOENT", mknod("nodir/c", S_IFIFO | 0644, 0), ENOENT);
    mkd("d", 0755);
    int dfd = open("d", O_RDONLY | O_DIRECTORY);
    OK("mkfifoat_dirfd", mkfifoat(dfd, "p", 0644));
    OK("mknodat_dirfd", mknodat(dfd, "c", S_IFCHR | 0644, makedev(1, 3)));
    cl(dfd);
    chk_type("mkfifoat_dirfd_type", "d/p", S_IFIFO);
    chk_type("mknodat_dirfd_type", "d/c", S_IFCHR);
    /* FIFO I/O (never blocking: a FIFO open without O_NONBLOCK waits for the other end). */
    ERR("fifo_open_write_no_reader_ENXIO", open("p", O_WRONLY | O_NONBLOCK), ENXIO);
    int rfd = OK("fifo_open_read_nonblock", open("p", O_RDONLY | O_NONBLOCK));
    int wfd = OK("fifo_open_write", open("p", O_WRONLY | O_NONBLOCK));
    char b[8] = {0};
    EQ("fifo_write", write(wfd, "ping", 4), 4);
    EQ("fifo_read", read(rfd, b, sizeof b), 4);
    chk_true("fifo_read_data", memcmp(b, "ping", 4) == 0, "ping", "other");
    cl(rfd);
    cl(wfd);
    chk_size("fifo_size_stays_0", "p", 0);
    ERR("open_socket_ENXIO", open("s", O_RDONLY), ENXIO);
    mkd("w", 0777);
    AS(U1, G1) {
        ERR("nonroot_mknod_chr_EPERM", mknod("w/c", S_IFCHR | 0644, makedev(1, 7)), EPERM);
        ERR("nonroot_mknod_blk_EPERM", mknod("w/b", S_IFBLK | 0644, makedev(7, 3)), EPERM);
        OK("nonroot_mkfifo", mkfifo("w/p", 0644));
        OK("nonroot_mknod_socket", mknod("w/s", S_IFSOCK | 0644, 0));
    }
    chk_owner("nonroot_mkfifo_owner", "w/p", U1, G1);
    chk_owner("nonroot_mknod_socket_owner", "w/s", U1, G1);
}

/* Each kind of special file through the operations every object supports. */
static void c_special_ops(void) {
    static const struct {
        const char *name;
        mode_t type;
        dev_t dev;
    } kinds[] = {
        {"fifo", S_IFIFO, 0},
        {"socket", S_IFSOCK, 0},
        {"chr", S_IFCHR, 0},
        {"blk", S_IFBLK, 0},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        const char *k = kinds[i].name;
        dev_t dev = kinds[i].type == S_IFCHR ? makedev(5, 1) : kinds[i].type == S_IFBLK ? makedev(8, 16) : 0;
        char n[80], a[40], r[40], l[40], v[40];
        snprintf(a, sizeof a, "%s", k);
        snprintf(v, sizeof v, "%s.victim", k);
        snprintf(r, sizeof r, "%s.renamed", k);
        snprintf(l, sizeof l, "%s.link", k);
#define N(suffix) (snprintf(n, sizeof n, "%s_%s", k, suffix), n)
        OK(N("create"), mknod(a, kinds[i].type | 0644, dev));
        OK(N("rename"), rename(a, r));
        chk_absent(N("rename_old_gone"), a);
        chk_type(N("rename_type_kept"), r, kinds[i].type);
        if (dev) chk_rdev(N("rename_rdev_kept"), r, dev);
        OK(N("link"), link(r, l));
        chk_nlink(N("link_nlink"), r, 2);
        chk_same(N("link_same_inode"), r, l, 0);
        OK(N("chmod"), chmod(r, 0600));
        chk_mode(N("chmod_mode"), r, 0600);
        OK(N("chown"), chown(r, U1, G1));
        chk_owner(N("chown_owner"), r, U1, G1);
        struct timespec t[2] = {{1000000000, 0}, {1000000001, 0}};
        OK(N("utimensat"), utimensat(AT_FDCWD, r, t, 0));
        chk_time(N("utimensat_mtime"), r, MTIME, t[1]);
        mkf(v, 0644, "x");
        OK(N("rename_over_file"), rename(l, v));
        chk_type(N("rename_over_file_type"), v, kinds[i].type);
        OK(N("unlink"), unlink(v));
        chk_nlink(N("unlink_nlink"), r, 1);
        OK(N("unlink_last"), unlink(r));
        chk_absent(N("unlink_last_gone"), r);
#undef N
    }
    mkf("file", 0644, "x");
    if (mkfifo("fifo", 0644) < 0) setup_failed("mkfifo", "fifo");
    OK("file_over_fifo", rename("file", "fifo"));
    chk_type("file_over_fifo_type", "fifo", S_IFREG);
}

static void c_socket(void) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strcpy(a.sun_path, "sock");
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    OK("bind", bind(s, (struct sockaddr *)&a, sizeof a));
    chk_type("bind_type", "sock", S_IFSOCK);
    chk_mode("bind_mode_umask", "sock", 0755);
    chk_listed("bind_listed", ".", "sock", DT_SOCK);
    OK("listen", listen(s, 4));
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    OK("connect", connect(c, (struct sockaddr *)&a, sizeof a));
    int x = accept(s, NULL, NULL);
    char b[8] = {0};
    EQ("connected_write", write(c, "hi", 2), 2);
    EQ("connected_read", x >= 0 ? read(x, b, sizeof b) : -1, 2);
    cl(x);
    cl(c);
    int s2 = socket(AF_UNIX, SOCK_STREAM, 0);
    ERR("bind_existing_EADDRINUSE", bind(s2, (struct sockaddr *)&a, sizeof a), EADDRINUSE);
    cl(s2);
    cl(s);
    OK("rename", rename("sock", "sock2"));
    chk_type("rename_type", "sock2", S_IFSOCK);
    OK("unlink", unlink("sock2"));
    chk_absent("unlink_gone", "sock2");
    mkd("w", 0777);
    AS(U1, G1) {
        struct sockaddr_un w = {.sun_family = AF_UNIX};
        strcpy(w.sun_path, "w/sock");
        int us = socket(AF_UNIX, SOCK_STREAM, 0);
        OK("nonroot_bind", bind(us, (struct sockaddr *)&w, sizeof w));
        cl(us);
    }
    chk_owner("nonroot_bind_owner", "w/sock", U1, G1);
}

static void c_readdir(void) {
    mkf("f", 0644, "x");
    mkd("d", 0755);
    mkl("f", "l");
    mkn("p", S_IFIFO | 0644, 0);
    mkn("s", S_IFSOCK | 0644, 0);
    mkn("c", S_IFCHR | 0644, makedev(1, 7));
    mkn("b", S_IFBLK | 0644, makedev(7, 3));
    chk_listed("type_regular", ".", "f", DT_REG);
    chk_listed("type_directory", ".", "d", DT_DIR);
    chk_listed("type_symlink", ".", "l", DT_LNK);
    chk_listed("type_fifo", ".", "p", DT_FIFO);
    chk_listed("type_socket", ".", "s", DT_SOCK);
    chk_listed("type_chr", ".", "c", DT_CHR);
    chk_listed("type_blk", ".", "b", DT_BLK);
    chk_listed("dot", ".", ".", DT_DIR);
    chk_listed("dotdot", ".", "..", DT_DIR);
    DIR *dir = opendir(".");
    long n = 0;
    if (dir) {
        while (readdir(dir)) n++;
        closedir(dir);
    }
    EQ("count", n, 9);
    ino_t di = 0;
    listed(".", "f", &di);
    chk_true("d_ino_is_st_ino_file", di && di == ino_of("f", 0), "st_ino", "another number");
    listed(".", "d", &di);
    chk_true("d_ino_is_st_ino_dir", di && di == ino_of("d", 0), "st_ino", "another number");
    listed(".", "p", &di);
    chk_true("d_ino_is_st_ino_fifo", di && di == ino_of("p", 0), "st_ino", "another number");
    if (unlink("f") < 0) setup_failed("unlink", "f");
    chk_listed("unlinked_not_listed", ".", "f", -1);
    dir = opendir("d");
    n = 0;
    if (dir) {
        while (readdir(dir)) n++;
        closedir(dir);
    }
    EQ("empty_dir_count", n, 2);
    mkf("g", 0644, "x");
    ERR("opendir_file_ENOTDIR", od("g"), ENOTDIR);
    ERR("opendir_missing_ENOENT", od("missing"), ENOENT);
    mkd("big", 0755);
    for (int i = 0; i < 300; i++) {
        char name[32];
        snprintf(name, sizeof name, "big/entry-%03d", i);
        if (i % 3 == 0)
            mkn(name, S_IFIFO | 0644, 0);
        else
            mkf(name, 0644, NULL);
    }
    dir = opendir("big");
    long nf = 0, nr = 0, other = 0;
    if (dir) {
        struct dirent *e;
        while ((e = readdir(dir))) {
            if (e->d_name[0] == '.') continue;
            if (e->d_type == DT_FIFO)
                nf++;
            else if (e->d_type == DT_REG)
                nr++;
            else
                other++;
        }
        closedir(dir);
    }
    EQ("300_entries_fifos", nf, 100);
    EQ("300_entries_regular", nr, 200);
    EQ("300_entries_other", other, 0);
}

static void c_names(void) {
    char n255[256], m255[256], n256[257], p[300];
    memset(n255, 'a', 255);
    n255[255] = 0;
    memset(m255, 'c', 255);
    m255[255] = 0;
    memset(n256, 'b', 256);
    n256[256] = 0;
    struct stat st;
    char b[64];
    cl(OK("create_255", open(n255, O_CREAT | O_WRONLY, 0644)));
    OK("stat_255", stat(n255, &st));
    chk_listed("readdir_255", ".", n255, DT_REG);
    OK("rename_255", rename(n255, m255));
    OK("link_255", link(m255, n255));
    OK("unlink_255", unlink(m255));
    OK("symlink_255", symlink(n255, m255));
    EQ("readlink_255", readlink(m255, p, sizeof p), 255);
    OK("unlink_symlink_255", unlink(m255));
    OK("mkdir_255", mkdir(m255, 0755));
    snprintf(p, sizeof p, "%s/x", m255);
    cl(OK("create_in_dir_255", open(p, O_CREAT | O_WRONLY, 0644)));
    OK("unlink_in_dir_255", unlink(p));
    OK("rmdir_255", rmdir(m255));
    mkf("f", 0644, "x");
    mkd("d", 0755);
    ERR("open_creat_256_ENAMETOOLONG", open(n256, O_CREAT | O_WRONLY, 0644), ENAMETOOLONG);
    ERR("open_256_ENAMETOOLONG", open(n256, O_RDONLY), ENAMETOOLONG);
    ERR("stat_256_ENAMETOOLONG", stat(n256, &st), ENAMETOOLONG);
    ERR("lstat_256_ENAMETOOLONG", lstat(n256, &st), ENAMETOOLONG);
    ERR("mkdir_256_ENAMETOOLONG", mkdir(n256, 0755), ENAMETOOLONG);
    ERR("rmdir_256_ENAMETOOLONG", rmdir(n256), ENAMETOOLONG);
    ERR("unlink_256_ENAMETOOLONG", unlink(n256), ENAMETOOLONG);
    ERR("rename_from_256_ENAMETOOLONG", rename(n256, "x"), ENAMETOOLONG);
    ERR("rename_to_256_ENAMETOOLONG", rename("f", n256), ENAMETOOLONG);
    ERR("link_to_256_ENAMETOOLONG", link("f", n256), ENAMETOOLONG);
    ERR("symlink_at_256_ENAMETOOLONG", symlink("f", n256), ENAMETOOLONG);
    ERR("readlink_256_ENAMETOOLONG", readlink(n256, b, sizeof b), ENAMETOOLONG);
    ERR("mkfifo_256_ENAMETOOLONG", mkfifo(n256, 0644), ENAMETOOLONG);
    ERR("chmod_256_ENAMETOOLONG", chmod(n256, 0644), ENAMETOOLONG);
    ERR("chown_256_ENAMETOOLONG", chown(n256, 0, 0), ENAMETOOLONG);
    ERR("truncate_256_ENAMETOOLONG", truncate(n256, 0), ENAMETOOLONG);
    ERR("access_256_ENAMETOOLONG", access(n256, F_OK), ENAMETOOLONG);
    ERR("utimensat_256_ENAMETOOLONG", utimensat(AT_FDCWD, n256, NULL, 0), ENAMETOOLONG);
    ERR("chdir_256_ENAMETOOLONG", chdir(n256), ENAMETOOLONG);
    snprintf(p, sizeof p, "d/%s", n256);
    ERR("open_creat_256_in_dir_ENAMETOOLONG", open(p, O_CREAT | O_WRONLY, 0644), ENAMETOOLONG);
    snprintf(p, sizeof p, "%s/x", n256);
    ERR("stat_256_prefix_ENAMETOOLONG", stat(p, &st), ENAMETOOLONG);
    OK("symlink_to_256_target", symlink(n256, "lt"));
    ERR("stat_via_symlink_256_ENAMETOOLONG", stat("lt", &st), ENAMETOOLONG);
    static const struct {
        const char *check, *name;
    } odd[] = {
        {"space", "with space"},       {"tab", "with\ttab"},        {"newline", "with\nnewline"},
        {"utf8", "caf\xc3\xa9-\xe2\x9c\x93"}, {"control", "ctl\x01\x1f"}, {"leading_dash", "-dash"},
        {"three_dots", "..."},          {"hidden", ".hidden"},       {"backslash", "back\\slash"},
        {"non_utf8", "bytes\xff\xfe"},
    };
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        char n[64];
        snprintf(n, sizeof n, "create_%s", odd[i].check);
        cl(OK(n, open(odd[i].name, O_CREAT | O_WRONLY, 0644)));
        snprintf(n, sizeof n, "readdir_%s", odd[i].check);
        chk_listed(n, ".", odd[i].name, DT_REG);
    }
}

/* Paths of PATH_MAX - 1 bytes (the longest a system call takes), relative to the working
 * directory; the absolute path is longer still. */
static void c_pathmax(void) {
    static char path[PATH_MAX + 2], other[PATH_MAX + 2];
    size_t len = 0;
    mkf("src", 0644, "x");
    int made = 1;
    for (int i = 0; i < 20; i++) { /* 20 components of 200 bytes: 4020 bytes with slashes */
        memset(path + len, 'a' + i, 200);
        len += 200;
        path[len] = 0;
        if (mkdir(path, 0755) < 0) made = 0;
        path[len++] = '/';
        path[len] = 0;
    }
    chk_true("nested_mkdir_4019_bytes", made, "created", "failed");
    memset(path + len, 'f', 75);
    path[len + 75] = 0; /* 4095 bytes */
    memcpy(other, path, len);
    memset(other + len, 'g', 75);
    other[len + 75] = 0;
    struct stat st;
    char b[16];
    cl(OK("create_4095", open(path, O_CREAT | O_WRONLY, 0644)));
    OK("stat_4095", stat(path, &st));
    OK("chmod_4095", chmod(path, 0600));
    OK("rename_4095", rename(path, other));
    OK("link_4095", link(other, path));
    OK("unlink_4095", unlink(other));
    OK("truncate_4095", truncate(path, 10));
    OK("utimensat_4095", utimensat(AT_FDCWD, path, NULL, 0));
    OK("access_4095", access(path, R_OK));
    OK("unlink_4095_last", unlink(path));
    OK("mkdir_4095", mkdir(path, 0755));
    OK("rmdir_4095", rmdir(path));
    OK("symlink_4095", symlink("target", path));
    EQ("readlink_4095", readlink(path, b, sizeof b), 6);
    OK("unlink_symlink_4095", unlink(path));
    path[len + 75] = 'f';
    path[len + 76] = 0; /* 4096 bytes */
    ERR("create_4096_ENAMETOOLONG", open(path, O_CREAT | O_WRONLY, 0644), ENAMETOOLONG);
    ERR("stat_4096_ENAMETOOLONG", stat(path, &st), ENAMETOOLONG);
    ERR("mkdir_4096_ENAMETOOLONG", mkdir(path, 0755), ENAMETOOLONG);
    ERR("unlink_4096_ENAMETOOLONG", unlink(path), ENAMETOOLONG);
    ERR("rename_to_4096_ENAMETOOLONG", rename("src", path), ENAMETOOLONG);
    path[len - 1] = 0; /* the deepest directory, 4019 bytes */
    OK("chdir_4019", chdir(path));
    cl(OK("create_in_deep_cwd", open("here", O_CREAT | O_WRONLY, 0644)));
    chk_exists("create_in_deep_cwd_visible", "here");
    OK("chdir_dotdot_from_deep", chdir(".."));
    chk_type("chdir_dotdot_from_deep_lands", path + len - 201 /* last component */, S_IFDIR);
}

/* ENOENT and ENOTDIR for a missing directory or a file used as one, in every call. */
static void c_prefix_errors(void) {
    mkf("f", 0644, "x");
    struct stat st;
    char b[16];
    struct timespec t[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
    for (int k = 0; k < 2; k++) {
        const char *P = k ? "f/x" : "nodir/x";
        int E = k ? ENOTDIR : ENOENT;
        char n[64];
#define PFX(op, call) (snprintf(n, sizeof n, "%s_%s", op, ename(E)), ERR(n, call, E))
        PFX("stat", stat(P, &st));
        PFX("lstat", lstat(P, &st));
        PFX("open", open(P, O_RDONLY));
        PFX("open_creat", open(P, O_CREAT | O_WRONLY, 0644));
        PFX("mkdir", mkdir(P, 0755));
        PFX("rmdir", rmdir(P));
        PFX("unlink", unlink(P));
        PFX("rename_from", rename(P, "g"));
        PFX("rename_to", rename("f", P));
        PFX("link_from", link(P, "g"));
        PFX("link_to", link("f", P));
        PFX("symlink_at", symlink("t", P));
        PFX("readlink", readlink(P, b, sizeof b));
        PFX("chmod", chmod(P, 0644));
        PFX("chown", chown(P, 0, 0));
        PFX("lchown", lchown(P, 0, 0));
        PFX("truncate", truncate(P, 0));
        PFX("utimensat", utimensat(AT_FDCWD, P, t, 0));
        PFX("access", access(P, F_OK));
        PFX("mkfifo", mkfifo(P, 0644));
        PFX("mknod", mknod(P, S_IFREG | 0644, 0));
        PFX("chdir", chdir(P));
        PFX("opendir", od(P));
#undef PFX
    }
    chk_content("file_untouched", "f", "x");
}

/* ELOOP: symlink loops in the last component and in a prefix, and the 40-link limit. */
static void c_eloop(void) {
    mkl("loop2", "loop1");
    mkl("loop1", "loop2");
    mkl("self", "self");
    struct stat st;
    char b[16];
    ERR("stat_ELOOP", stat("loop1", &st), ELOOP);
    ERR("stat_self_ELOOP", stat("self", &st), ELOOP);
    ERR("open_ELOOP", open("loop1", O_RDONLY), ELOOP);
    ERR("open_creat_ELOOP", open("loop1", O_CREAT | O_WRONLY, 0644), ELOOP);
    ERR("chmod_ELOOP", chmod("loop1", 0644), ELOOP);
    ERR("chown_ELOOP", chown("loop1", 0, 0), ELOOP);
    ERR("truncate_ELOOP", truncate("loop1", 0), ELOOP);
    ERR("access_ELOOP", access("loop1", F_OK), ELOOP);
    ERR("utimensat_ELOOP", utimensat(AT_FDCWD, "loop1", NULL, 0), ELOOP);
    ERR("chdir_ELOOP", chdir("loop1"), ELOOP);
    ERR("opendir_ELOOP", od("loop1"), ELOOP);
    ERR("prefix_lstat_ELOOP", lstat("loop1/x", &st), ELOOP);
    ERR("prefix_mkdir_ELOOP", mkdir("loop1/x", 0755), ELOOP);
    ERR("prefix_unlink_ELOOP", unlink("loop1/x"), ELOOP);
    ERR("prefix_rename_to_ELOOP", rename("self", "loop1/x"), ELOOP);
    ERR("prefix_symlink_at_ELOOP", symlink("t", "loop1/x"), ELOOP);
    ERR("prefix_mkfifo_ELOOP", mkfifo("loop1/x", 0644), ELOOP);
    OK("lstat_loop", lstat("loop1", &st));
    EQ("readlink_loop", readlink("loop1", b, sizeof b), 5);
    OK("lchown_loop", lchown("loop1", U1, G1));
    OK("unlink_loop", unlink("loop1"));
    chk_type("unlink_loop_other_kept", "loop2", S_IFLNK);
    /* l00 -> l01 -> ... -> l40 -> target: opening l01 follows 40 links, l00 41. */
    mkf("target", 0644, "end");
    for (int i = 0; i <= 40; i++) {
        char name[8], to[8];
        snprintf(name, sizeof name, "l%02d", i);
        if (i == 40)
            snprintf(to, sizeof to, "target");
        else
            snprintf(to, sizeof to, "l%02d", i + 1);
        mkl(to, name);
    }
    chk_content("40_links_followed", "l01", "end");
    ERR("41_links_ELOOP", open("l00", O_RDONLY), ELOOP);
}

static void c_times(void) {
    char b[8];
    mkf("f", 0644, "x");
    mkd("d", 0755);
    struct snap s0 = snap("f"), s1;
    tick();
    int fd = open("f", O_WRONLY);
    EQ("write", write(fd, "abc", 3), 3);
    cl(fd);
    s1 = snap("f");
    chk_later("write_mtime", s0, s1, MTIME);
    chk_later("write_ctime", s0, s1, CTIME);
    s0 = s1;
    tick();
    fd = open("f", O_RDONLY);
    EQ("read", read(fd, b, 3), 3);
    cl(fd);
    s1 = snap("f");
    chk_kept("read_mtime", s0, s1, MTIME);
    chk_kept("read_ctime", s0, s1, CTIME);
    s0 = s1;
    tick();
    fd = open("f", O_RDWR);
    EQ("pwrite", pwrite(fd, "z", 1, 10), 1);
    cl(fd);
    s1 = snap("f");
    chk_later("pwrite_mtime", s0, s1, MTIME);
    s0 = s1;
    tick();
    OK("chmod", chmod("f", 0600));
    s1 = snap("f");
    chk_later("chmod_ctime", s0, s1, CTIME);
    chk_kept("chmod_mtime", s0, s1, MTIME);
    s0 = s1;
    tick();
    OK("chown_same_owner", chown("f", 0, 0));
    s1 = snap("f");
    chk_later("chown_ctime", s0, s1, CTIME);
    chk_kept("chown_mtime", s0, s1, MTIME);
    s0 = s1;
    struct snap p0 = snap("."), p1;
    tick();
    OK("link", link("f", "g"));
    s1 = snap("f");
    p1 = snap(".");
    chk_later("link_file_ctime", s0, s1, CTIME);
    chk_kept("link_file_mtime", s0, s1, MTIME);
    chk_later("link_dir_mtime", p0, p1, MTIME);
    chk_later("link_dir_ctime", p0, p1, CTIME);
    s0 = s1;
    p0 = p1;
    tick();
    OK("unlink", unlink("g"));
    s1 = snap("f");
    p1 = snap(".");
    chk_later("unlink_file_ctime", s0, s1, CTIME);
    chk_later("unlink_dir_mtime", p0, p1, MTIME);
    s0 = s1;
    p0 = p1;
    tick();
    OK("rename", rename("f", "f2"));
    s1 = snap("f2");
    p1 = snap(".");
    chk_later("rename_file_ctime", s0, s1, CTIME);
    chk_kept("rename_file_mtime", s0, s1, MTIME);
    chk_later("rename_dir_mtime", p0, p1, MTIME);
    s0 = s1;
    p0 = p1;
    struct snap d0 = snap("d"), d1;
    tick();
    OK("rename_into_dir", rename("f2", "d/f"));
    d1 = snap("d");
    chk_later("rename_into_dir_target_mtime", d0, d1, MTIME);
    chk_later("rename_into_dir_source_mtime", p0, snap("."), MTIME);
    d0 = d1;
    tick();
    cl(OK("create", open("d/new", O_CREAT | O_WRONLY, 0644)));
    d1 = snap("d");
    chk_later("create_dir_mtime", d0, d1, MTIME);
    chk_later("create_dir_ctime", d0, d1, CTIME);
    struct snap n = snap("d/new");
    chk_true("create_mtime_equals_ctime", !n.err && ts_cmp(n.st.st_mtim, n.st.st_ctim) == 0, "equal",
             "different");
    chk_true("create_atime_equals_mtime", !n.err && ts_cmp(n.st.st_atim, n.st.st_mtim) == 0, "equal",
             "different");
    chk_later("create_file_time_after_parent_before", d0, n, MTIME);
    d0 = d1;
    tick();
    OK("mkdir", mkdir("d/sub", 0755));
    d1 = snap("d");
    chk_later("mkdir_parent_mtime", d0, d1, MTIME);
    d0 = d1;
    tick();
    OK("rmdir", rmdir("d/sub"));
    d1 = snap("d");
    chk_later("rmdir_parent_mtime", d0, d1, MTIME);
    d0 = d1;
    tick();
    OK("symlink", symlink("x", "d/l"));
    d1 = snap("d");
    chk_later("symlink_parent_mtime", d0, d1, MTIME);
    d0 = d1;
    tick();
    OK("mkfifo", mkfifo("d/p", 0644));
    d1 = snap("d");
    chk_later("mkfifo_parent_mtime", d0, d1, MTIME);
    s0 = snap("d/f");
    tick();
    OK("truncate", truncate("d/f", 100));
    s1 = snap("d/f");
    chk_later("truncate_mtime", s0, s1, MTIME);
    chk_later("truncate_ctime", s0, s1, CTIME);
    s0 = s1;
    tick();
    fd = open("d/f", O_RDWR);
    OK("ftruncate", ftruncate(fd, 50));
    cl(fd);
    s1 = snap("d/f");
    chk_later("ftruncate_mtime", s0, s1, MTIME);
    chk_later("ftruncate_ctime", s0, s1, CTIME);
    s0 = s1;
    tick();
    cl(OK("O_TRUNC", open("d/f", O_WRONLY | O_TRUNC)));
    s1 = snap("d/f");
    chk_later("O_TRUNC_mtime", s0, s1, MTIME);
    chk_later("O_TRUNC_ctime", s0, s1, CTIME);
    s0 = s1;
    tick();
    cl(OK("O_TRUNC_empty", open("d/f", O_WRONLY | O_TRUNC)));
    s1 = snap("d/f");
    chk_later("O_TRUNC_empty_mtime", s0, s1, MTIME);
    s0 = s1;
    tick();
    struct timespec t[2] = {{1000000000, 0}, {1000000000, 0}};
    OK("utimensat", utimensat(AT_FDCWD, "d/f", t, 0));
    s1 = snap("d/f");
    chk_later("utimensat_ctime", s0, s1, CTIME);
    mkd("a", 0755);
    mkd("a/moved", 0755);
    mkd("b", 0755);
    s0 = snap("a/moved");
    tick();
    OK("rename_dir", rename("a/moved", "b/moved"));
    chk_later("rename_dir_ctime", s0, snap("b/moved"), CTIME);
}

/* A write or truncate by anyone but root clears set-user-ID, and set-group-ID when the
 * file is group-executable or the writer is not in its group; root's writes keep them. */
static void c_suid_clear(void) {
    mkd("w", 0777);
    mkfo("w/a", 06777, U2, G2, "x");
    mkfo("w/b", 06777, U2, G2, "x");
    mkfo("w/c", 02767, U2, G2, "x");
    mkfo("w/m", 02767, U2, G1, "x");
    mkfo("w/o", 04755, U1, G1, "x");
    mkfo("w/t", 06777, U2, G2, "x");
    mkfo("w/r", 06777, U2, G2, "x");
    AS(U1, G1) {
        int fd = open("w/a", O_WRONLY);
        EQ("other_write", write(fd, "y", 1), 1);
        cl(fd);
        fd = open("w/b", O_RDWR);
        EQ("other_pwrite", pwrite(fd, "y", 1, 3), 1);
        cl(fd);
        fd = open("w/c", O_WRONLY);
        EQ("nonmember_write_setgid_no_group_exec", write(fd, "y", 1), 1);
        cl(fd);
        fd = open("w/m", O_WRONLY);
        EQ("member_write_setgid_no_group_exec", write(fd, "y", 1), 1);
        cl(fd);
        fd = open("w/o", O_WRONLY);
        EQ("owner_write", write(fd, "y", 1), 1);
        cl(fd);
        fd = open("w/t", O_WRONLY);
        OK("other_ftruncate", ftruncate(fd, 0));
        cl(fd);
    }
    chk_mode("other_write_clears", "w/a", 0777);
    chk_mode("other_pwrite_clears", "w/b", 0777);
    chk_mode("nonmember_setgid_without_group_exec_clears", "w/c", 0767);
    chk_mode("member_setgid_without_group_exec_kept", "w/m", 02767);
    chk_mode("owner_write_clears", "w/o", 0755);
    chk_mode("other_ftruncate_clears", "w/t", 0777);
    int fd = open("w/r", O_WRONLY);
    EQ("root_write", write(fd, "y", 1), 1);
    cl(fd);
    chk_mode("root_write_keeps", "w/r", 06777);
}

static void c_setgid_dir(void) {
    mkdo("sg", 02777, 0, GX);
    mkd("plain", 0777);
    cl(OK("root_create", open("sg/rf", O_CREAT | O_WRONLY, 0644)));
    chk_owner("root_create_group", "sg/rf", 0, GX);
    OK("root_mkdir", mkdir("sg/rd", 0755));
    chk_owner("root_mkdir_group", "sg/rd", 0, GX);
    chk_mode("root_mkdir_inherits_setgid", "sg/rd", 02755);
    OK("root_mkdir_nested", mkdir("sg/rd/deeper", 0700));
    chk_owner("root_mkdir_nested_group", "sg/rd/deeper", 0, GX);
    chk_mode("root_mkdir_nested_setgid", "sg/rd/deeper", 02700);
    AS(U1, G1) {
        cl(OK("create", open("sg/uf", O_CREAT | O_WRONLY, 0644)));
        OK("mkdir", mkdir("sg/ud", 0755));
        OK("symlink", symlink("uf", "sg/ul"));
        OK("mkfifo", mkfifo("sg/up", 0644));
        cl(OK("create_setgid_not_member", open("sg/us", O_CREAT | O_WRONLY, 02755)));
        cl(OK("create_in_plain", open("plain/uf", O_CREAT | O_WRONLY, 0644)));
    }
    chk_owner("create_group", "sg/uf", U1, GX);
    chk_owner("mkdir_group", "sg/ud", U1, GX);
    chk_mode("mkdir_inherits_setgid", "sg/ud", 02755);
    chk_owner("symlink_group", "sg/ul", U1, GX);
    chk_owner("mkfifo_group", "sg/up", U1, GX);
    chk_mode("create_setgid_not_member_cleared", "sg/us", 0755);
    chk_owner("create_in_plain_group", "plain/uf", U1, G1);
    AS_G(U1, G1, GX) {
        cl(OK("create_setgid_member", open("sg/ms", O_CREAT | O_WRONLY, 02755)));
    }
    chk_mode("create_setgid_member_kept", "sg/ms", 02755);
    mkf("moved", 0644, "x");
    OK("rename_into", rename("moved", "sg/moved"));
    chk_gid("rename_into_keeps_group", "sg/moved", 0);
    mkf("linked", 0644, "x");
    OK("link_into", link("linked", "sg/linked"));
    chk_gid("link_into_keeps_group", "sg/linked", 0);
    OK("chmod_keeps_setgid", chmod("sg", 02775));
    chk_mode("chmod_keeps_setgid_mode", "sg", 02775);
}

/* A symbolic link's own owner and times. */
static void c_symlink_attrs(void) {
    mkf("f", 0644, "x");
    mkl("f", "l");
    mkl("f", "l2");
    struct timespec t[2] = {{1000000000, 111}, {1000000001, 222}};
    struct timespec tf[2] = {{1500000000, 0}, {1500000000, 0}};
    if (utimensat(AT_FDCWD, "f", tf, 0) < 0) setup_failed("utimensat", "f");
    OK("lchown", lchown("l", U1, G1));
    chk_owner("lchown_link", "l", U1, G1);
    chk_owner("lchown_target_kept", "f", 0, 0);
    OK("fchownat_NOFOLLOW", fchownat(AT_FDCWD, "l", U2, G2, AT_SYMLINK_NOFOLLOW));
    chk_owner("fchownat_NOFOLLOW_link", "l", U2, G2);
    chk_owner("fchownat_NOFOLLOW_target_kept", "f", 0, 0);
    OK("fchownat_follow", fchownat(AT_FDCWD, "l", U1, G1, 0));
    chk_owner("fchownat_follow_target", "f", U1, G1);
    chk_owner("fchownat_follow_link_kept", "l", U2, G2);
    OK("utimensat_NOFOLLOW", utimensat(AT_FDCWD, "l", t, AT_SYMLINK_NOFOLLOW));
    chk_time("utimensat_NOFOLLOW_link_atime", "l", ATIME, t[0]);
    chk_time("utimensat_NOFOLLOW_link_mtime", "l", MTIME, t[1]);
    chk_time("utimensat_NOFOLLOW_target_kept", "f", MTIME, tf[1]);
    struct timeval tv[2] = {{1200000000, 0}, {1200000001, 0}};
    OK("lutimes", lutimes("l2", tv));
    chk_time("lutimes_link_mtime", "l2", MTIME, (struct timespec){1200000001, 0});
    chk_time("lutimes_target_kept", "f", MTIME, tf[1]);
    OK("utimensat_follow", utimensat(AT_FDCWD, "l2", t, 0));
    chk_time("utimensat_follow_target", "f", MTIME, t[1]);
    chk_time("utimensat_follow_link_kept", "l2", MTIME, (struct timespec){1200000001, 0});
    struct timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
    OK("utimensat_NOFOLLOW_now", utimensat(AT_FDCWD, "l2", now, AT_SYMLINK_NOFOLLOW));
    chk_now("utimensat_NOFOLLOW_now_mtime", "l2", MTIME);
    mkl("f", "rootl");
    mkd("w", 0777);
    AS(U1, G1) {
        ERR("nonroot_lchown_other_EPERM", lchown("rootl", U1, G1), EPERM);
        ERR("nonroot_utimensat_NOFOLLOW_other_EPERM",
            utimensat(AT_FDCWD, "rootl", t, AT_SYMLINK_NOFOLLOW), EPERM);
        OK("nonroot_symlink", symlink("../f", "w/mine"));
        OK("nonroot_utimensat_NOFOLLOW_own", utimensat(AT_FDCWD, "w/mine", t, AT_SYMLINK_NOFOLLOW));
    }
    chk_owner("nonroot_symlink_owner", "w/mine", U1, G1);
    chk_time("nonroot_utimensat_NOFOLLOW_own_mtime", "w/mine", MTIME, t[1]);
}

static void c_chdir(void) {
    char cwd[PATH_MAX];
    mkd("d", 0755);
    mkd("d700", 0700);
    mkf("f", 0644, "x");
    OK("chdir", chdir("d"));
    const char *p = getcwd(cwd, sizeof cwd);
    size_t n = p ? strlen(p) : 0;
    chk_true("getcwd", p && n >= 8 && strcmp(p + n - 8, "/chdir/d") == 0, ".../chdir/d",
             p ? "another path" : ename(errno));
    cl(OK("relative_create", open("inner", O_CREAT | O_WRONLY, 0644)));
    OK("chdir_dotdot", chdir(".."));
    chk_type("relative_create_landed", "d/inner", S_IFREG);
    ERR("file_ENOTDIR", chdir("f"), ENOTDIR);
    ERR("missing_ENOENT", chdir("missing"), ENOENT);
    int fd = open("d", O_RDONLY | O_DIRECTORY);
    OK("fchdir", fchdir(fd));
    cl(fd);
    cl(OK("fchdir_relative_create", open("x", O_CREAT | O_WRONLY, 0644)));
    if (chdir("..") < 0) setup_failed("chdir", "..");
    chk_type("fchdir_relative_create_landed", "d/x", S_IFREG);
    fd = open("f", O_RDONLY);
    ERR("fchdir_file_ENOTDIR", fchdir(fd), ENOTDIR);
    cl(fd);
    AS(U1, G1) {
        ERR("no_search_EACCES", chdir("d700"), EACCES);
    }
}

/* ------------------------------------------------------------------ the table */

static const struct tcase {
    const char *name;
    void (*fn)(void);
} cases[] = {
    {"open", c_open},
    {"open_perm", c_open_perm},
    {"owner", c_owner},
    {"umask", c_umask},
    {"mkdir", c_mkdir},
    {"rmdir", c_rmdir},
    {"unlink", c_unlink},
    {"rename_file", c_rename_file},
    {"rename_dir", c_rename_dir},
    {"rename_sticky", c_rename_sticky},
    {"link", c_link},
    {"symlink", c_symlink},
    {"chmod", c_chmod},
    {"chown", c_chown},
    {"truncate", c_truncate},
    {"utimes", c_utimes},
    {"access", c_access},
    {"mknod", c_mknod},
    {"special_ops", c_special_ops},
    {"socket", c_socket},
    {"readdir", c_readdir},
    {"names", c_names},
    {"pathmax", c_pathmax},
    {"prefix_errors", c_prefix_errors},
    {"eloop", c_eloop},
    {"times", c_times},
    {"suid_clear", c_suid_clear},
    {"setgid_dir", c_setgid_dir},
    {"symlink_attrs", c_symlink_attrs},
    {"chdir", c_chdir},
};

static int selected(const char *name, int argc, char **argv) {
    if (argc == 0) return 1;
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], name) == 0) return 1;
    return 0;
}

int main(int argc, char **argv) {
    size_t ncases = sizeof cases / sizeof cases[0];
    if (argc == 2 && strcmp(argv[1], "-l") == 0) {
        for (size_t i = 0; i < ncases; i++) puts(cases[i].name);
        return 0;
    }
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: posixtest DIR [CASE...]  |  posixtest -l\n");
        return 2;
    }
    if (geteuid() != 0) {
        fprintf(stderr, "posixtest: must run as root (identity cases switch users)\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    umask(022);
    if (chdir(argv[1]) < 0 || !getcwd(g_base, sizeof g_base)) {
        fprintf(stderr, "posixtest: cannot enter %s: %s\n", argv[1], strerror(errno));
        return 2;
    }
    for (size_t i = 0; i < ncases; i++) {
        if (!selected(cases[i].name, argc - 2, argv + 2)) continue;
        g_case = cases[i].name;
        g_children = 0;
        /* The case's directory, as a check of its own: where it cannot be made, every
         * other check of the case is missing. */
        errno = 0;
        long r = mkdir(g_case, 0755);
        if (r == 0) r = chmod(g_case, 0755);
        if (r == 0) r = chdir(g_case);
        if (chk_ok("setup", r) < 0) continue;
        cases[i].fn();
        if (g_child) _exit(0); /* a child that left its AS block: never run on */
        umask(022);
        if (chdir(g_base) < 0) {
            fprintf(stderr, "posixtest: cannot return to %s: %s\n", g_base, strerror(errno));
            return 2;
        }
    }
    printf("# end\n");
    return 0;
}
