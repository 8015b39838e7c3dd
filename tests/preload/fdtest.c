/* Descriptor, fork, exec, lock and stdio semantics of libdafs_preload.so.
 * Run under LD_PRELOAD with DAFS_MOUNT set:  fdtest PREFIX LOCALDIR
 * PREFIX is a dafs mount prefix (e.g. /dafs), LOCALDIR a local scratch directory.
 * Prints "ok ..." / "FAIL ..." lines and "N passed, N failed" last. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static int passed, failed;
static const char *P, *L;
extern char **environ;

#define CHECK(cond, ...) do { \
    if (cond) { passed++; printf("ok   "); } else { failed++; printf("FAIL (line %d, errno %s) ", __LINE__, strerror(errno)); } \
    printf(__VA_ARGS__); printf("\n"); fflush(stdout); } while (0)

static char *pp(const char *name) { /* path under the prefix */
    static char buf[8][PATH_MAX]; static int i;
    char *b = buf[i++ % 8]; snprintf(b, PATH_MAX, "%s/%s", P, name); return b;
}

static void test_basic(void) {
    int fd = open(pp("fd/basic.txt"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0, "open O_CREAT under the prefix (fd %d)", fd);
    CHECK(write(fd, "hello world\n", 12) == 12, "write");
    CHECK(lseek(fd, 0, SEEK_CUR) == 12, "offset after write");
    char b[64] = {0};
    CHECK(pread(fd, b, 5, 6) == 5 && memcmp(b, "world", 5) == 0, "pread at offset");
    CHECK(lseek(fd, 0, SEEK_CUR) == 12, "pread leaves the offset");
    CHECK(lseek(fd, -6, SEEK_END) == 6, "lseek SEEK_END");
    memset(b, 0, sizeof b);
    CHECK(read(fd, b, sizeof b) == 6 && strcmp(b, "world\n") == 0, "read from offset");
    CHECK(read(fd, b, sizeof b) == 0, "read at EOF returns 0");
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 12, "fstat size %lld", (long long)st.st_size);
    CHECK(ftruncate(fd, 5) == 0 && fstat(fd, &st) == 0 && st.st_size == 5, "ftruncate");
    CHECK(fsync(fd) == 0 && fdatasync(fd) == 0, "fsync/fdatasync");
    struct iovec iov[2] = {{"ab", 2}, {"cd", 2}};
    CHECK(pwritev(fd, iov, 2, 5) == 4, "pwritev");
    char x[3] = {0}, y[3] = {0};
    struct iovec rv[2] = {{x, 2}, {y, 2}};
    CHECK(preadv(fd, rv, 2, 5) == 4 && !strcmp(x, "ab") && !strcmp(y, "cd"), "preadv scatters");
    char link[PATH_MAX] = {0}, proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    CHECK(readlink(proc, link, sizeof link - 1) > 0 && !strcmp(link, pp("fd/basic.txt")), "readlink /proc/self/fd/N names the dafs path");
    CHECK(!isatty(fd) && errno == ENOTTY, "isatty: no (ENOTTY)");
    errno = 1234;
    CHECK(pread(fd, b, 1, 0) == 1 && errno == 1234, "a successful call leaves errno alone");
    CHECK(close(fd) == 0, "close");
    CHECK(close(fd) == -1 && errno == EBADF, "double close gives EBADF");
    CHECK(read(fd, b, 1) == -1 && errno == EBADF, "read on a closed dafs fd: EBADF");
    fd = open(pp("fd/basic.txt"), O_WRONLY);
    CHECK(fd >= 0 && read(fd, b, 1) == -1 && errno == EBADF, "read on O_WRONLY: EBADF");
    close(fd);
    fd = open(pp("fd/basic.txt"), O_RDONLY);
    CHECK(fd >= 0 && write(fd, "x", 1) == -1 && errno == EBADF, "write on O_RDONLY: EBADF");
    CHECK(ftruncate(fd, 0) == -1 && errno == EINVAL, "ftruncate on O_RDONLY: EINVAL");
    close(fd);
    CHECK(open(pp("fd/basic.txt"), O_RDWR | O_CREAT | O_EXCL, 0644) == -1 && errno == EEXIST, "O_EXCL on an existing file: EEXIST");
    CHECK(open(pp("fd/missing"), O_RDONLY) == -1 && errno == ENOENT, "open missing: ENOENT");
    CHECK(open(pp("fd/basic.txt/x"), O_RDONLY) == -1 && (errno == ENOTDIR || errno == ENOENT), "open below a file: ENOTDIR");
    CHECK(open(pp("fd"), O_WRONLY) == -1 && errno == EISDIR, "open a directory for writing: EISDIR");
    CHECK(mkdir(pp("fd"), 0755) == -1 && errno == EEXIST, "mkdir existing: EEXIST");
    CHECK(rmdir(pp("fd")) == -1 && errno == ENOTEMPTY, "rmdir non-empty: ENOTEMPTY");
    CHECK(unlink(pp("fd")) == -1 && (errno == EISDIR || errno == EPERM), "unlink a directory: EISDIR");
    /* remove(3): glibc's calls an internal unlinkat the interposer cannot see. */
    fd = open(pp("fd/removed.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && close(fd) == 0 && remove(pp("fd/removed.txt")) == 0 && access(pp("fd/removed.txt"), F_OK) == -1 && errno == ENOENT,
          "remove a file");
    CHECK(mkdir(pp("fd/rmdir-me"), 0755) == 0 && remove(pp("fd/rmdir-me")) == 0 && access(pp("fd/rmdir-me"), F_OK) == -1, "remove an empty directory");
    CHECK(remove(pp("fd/removed.txt")) == -1 && errno == ENOENT, "remove a missing file: ENOENT");
    CHECK(remove(pp("fd")) == -1 && errno == ENOTEMPTY, "remove a non-empty directory: ENOTEMPTY");
    char lp[PATH_MAX]; snprintf(lp, sizeof lp, "%s/xdev", L);
    CHECK(rename(pp("fd/basic.txt"), lp) == -1 && errno == EXDEV, "rename out of the prefix: EXDEV");
    CHECK(access(pp("fd/basic.txt"), R_OK | W_OK) == 0 && access(pp("fd/nope"), F_OK) == -1 && errno == ENOENT, "access");
    fd = open(pp("fd/sync.txt"), O_WRONLY | O_CREAT | O_TRUNC | O_SYNC, 0644);
    CHECK(fd >= 0 && write(fd, "durable", 7) == 7 && (fcntl(fd, F_GETFL) & O_SYNC) == O_SYNC && close(fd) == 0, "O_SYNC write");
    fd = open(pp("fd/append.txt"), O_WRONLY | O_CREAT | O_APPEND | O_TRUNC, 0644);
    CHECK(write(fd, "one\n", 4) == 4 && lseek(fd, 0, SEEK_SET) == 0 && write(fd, "two\n", 4) == 4 && lseek(fd, 0, SEEK_CUR) == 8,
          "O_APPEND writes go to the end");
    CHECK((fcntl(fd, F_GETFL) & (O_ACCMODE | O_APPEND)) == (O_WRONLY | O_APPEND), "F_GETFL reports O_WRONLY|O_APPEND");
    CHECK(fcntl(fd, F_SETFL, 0) == 0 && !(fcntl(fd, F_GETFL) & O_APPEND), "F_SETFL clears O_APPEND");
    CHECK(lseek(fd, 0, SEEK_SET) == 0 && write(fd, "ONE\n", 4) == 4 && lseek(fd, 0, SEEK_CUR) == 4, "... then writes go to the offset");
    CHECK(fcntl(fd, F_SETFL, O_APPEND) == 0 && write(fd, "3\n", 2) == 2 && lseek(fd, 0, SEEK_CUR) == 10, "F_SETFL sets O_APPEND again: appends");
    { char b2[16] = {0}; int r = open(pp("fd/append.txt"), O_RDONLY);
      CHECK(read(r, b2, sizeof b2) == 10 && !strcmp(b2, "ONE\ntwo\n3\n"), "file content after the O_APPEND switches"); close(r); }
    CHECK(fcntl(fd, F_OFD_SETLK, &(struct flock){.l_type = F_WRLCK}) == -1 && errno == EINVAL, "F_OFD_SETLK: EINVAL");
    close(fd);
}

static void test_dup(void) {
    int fd = open(pp("fd/dup.txt"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    write(fd, "0123456789", 10);
    int d = dup(fd);
    CHECK(d >= 0 && d != fd, "dup gives a new descriptor");
    CHECK(lseek(fd, 3, SEEK_SET) == 3 && lseek(d, 0, SEEK_CUR) == 3, "dup shares the offset");
    char b[4] = {0};
    CHECK(read(d, b, 2) == 2 && !strcmp(b, "34") && lseek(fd, 0, SEEK_CUR) == 5, "read through the dup moves both");
    int other = open(pp("fd/other.txt"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    write(other, "other", 5);
    CHECK(dup2(fd, other) == other, "dup2 onto an open dafs descriptor");
    CHECK(lseek(other, 0, SEEK_CUR) == 5, "the target now shares the first file's offset");
    int cx = fcntl(fd, F_DUPFD_CLOEXEC, 100);
    CHECK(cx >= 100 && (fcntl(cx, F_GETFD) & FD_CLOEXEC), "F_DUPFD_CLOEXEC >= 100 with FD_CLOEXEC");
    CHECK(fcntl(fd, F_GETFD) == 0 && fcntl(fd, F_SETFD, FD_CLOEXEC) == 0 && fcntl(fd, F_GETFD) == FD_CLOEXEC && fcntl(fd, F_SETFD, 0) == 0,
          "F_GETFD/F_SETFD");
    int d3 = dup3(fd, 77, O_CLOEXEC);
    CHECK(d3 == 77 && fcntl(77, F_GETFD) == FD_CLOEXEC, "dup3 O_CLOEXEC");
    close(fd); close(cx); close(77);
    CHECK(lseek(d, 0, SEEK_SET) == 0 && read(d, b, 3) == 3 && !memcmp(b, "012", 3), "file stays open while a dup remains");
    close(d); close(other);
    CHECK(close(other) == -1 && errno == EBADF, "all closed");
    /* dup2 of a local descriptor onto a dafs one replaces it */
    int df = open(pp("fd/dup.txt"), O_RDONLY);
    int nul = open("/dev/zero", O_RDONLY);
    CHECK(dup2(nul, df) == df && read(df, b, 1) == 1 && b[0] == 0, "dup2(local, dafs fd) makes it local");
    close(df); close(nul);
}

static void test_collision(void) {
    enum { N = 150 };
    int dfs[N], loc[N], ok = 1;
    for (int i = 0; i < N; i++) {
        char name[64]; snprintf(name, sizeof name, "fd/many-%d", i);
        dfs[i] = open(pp(name), O_RDWR | O_CREAT | O_TRUNC, 0644);
        loc[i] = open("/dev/zero", O_RDONLY);
        if (dfs[i] < 0 || loc[i] < 0) ok = 0;
        else if (write(dfs[i], name, strlen(name)) != (ssize_t)strlen(name)) ok = 0;
    }
    CHECK(ok, "opened %d dafs and %d local descriptors interleaved", N, N);
    for (int i = 0; i < N && ok; i++)
        for (int j = 0; j < N; j++)
            if (dfs[i] == loc[j] || (i != j && (dfs[i] == dfs[j] || loc[i] == loc[j]))) ok = 0;
    CHECK(ok, "no descriptor number is used twice");
    for (int i = 0; i < N && ok; i++) {
        char name[64], b[64] = {0}; snprintf(name, sizeof name, "fd/many-%d", i);
        char z = 1;
        if (pread(dfs[i], b, sizeof b, 0) != (ssize_t)strlen(name) || strcmp(b, name) || read(loc[i], &z, 1) != 1 || z != 0) ok = 0;
    }
    CHECK(ok, "each descriptor reads its own file");
    for (int i = 0; i < N; i++) { close(dfs[i]); close(loc[i]); }
    char name[64]; int rm = 1;
    for (int i = 0; i < N; i++) { snprintf(name, sizeof name, "fd/many-%d", i); if (unlink(pp(name))) rm = 0; }
    CHECK(rm, "unlink them");
}

static void test_dirs(void) {
    mkdir(pp("fd/dir"), 0755);
    close(open(pp("fd/dir/a"), O_CREAT | O_WRONLY, 0644));
    close(open(pp("fd/dir/b"), O_CREAT | O_WRONLY, 0644));
    DIR *d = opendir(pp("fd/dir"));
    CHECK(d != NULL, "opendir");
    int seen = 0, n = 0; struct dirent *e;
    errno = 0;
    while (d && (e = readdir(d))) {
        n++;
        if (!strcmp(e->d_name, ".")) seen |= 1;
        if (!strcmp(e->d_name, "..")) seen |= 2;
        if (!strcmp(e->d_name, "a") && e->d_type == DT_REG) seen |= 4;
        if (!strcmp(e->d_name, "b")) seen |= 8;
    }
    CHECK(n == 4 && seen == 15 && errno == 0, "readdir gives . .. a b (%d entries), errno 0 at the end", n);
    int dfd = d ? dirfd(d) : -1;
    struct stat st;
    CHECK(dfd >= 0 && fstatat(dfd, "a", &st, 0) == 0 && S_ISREG(st.st_mode), "fstatat relative to dirfd(DIR)");
    rewinddir(d);
    n = 0; while (d && readdir(d)) n++;
    CHECK(n == 4, "rewinddir");
    CHECK(d && closedir(d) == 0, "closedir");
    int fd = open(pp("fd/dir"), O_RDONLY | O_DIRECTORY);
    CHECK(fd >= 0, "open O_DIRECTORY");
    int f2 = openat(fd, "c", O_WRONLY | O_CREAT, 0600);
    CHECK(f2 >= 0 && write(f2, "c", 1) == 1 && close(f2) == 0, "openat relative to a dafs directory descriptor");
    CHECK(fstatat(fd, "c", &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_size == 1 && (st.st_mode & 0777) == 0600, "fstatat sees it");
    CHECK(renameat(fd, "c", fd, "c2") == 0 && unlinkat(fd, "c2", 0) == 0, "renameat/unlinkat relative to the dirfd");
    CHECK(mkdirat(fd, "sub", 0700) == 0 && unlinkat(fd, "sub", AT_REMOVEDIR) == 0, "mkdirat/unlinkat AT_REMOVEDIR");
    DIR *d2 = fdopendir(fd);
    n = 0; while (d2 && readdir(d2)) n++;
    CHECK(d2 && n == 4 && closedir(d2) == 0, "fdopendir");
    CHECK(fcntl(fd, F_GETFD) == -1 && errno == EBADF, "closedir closed the descriptor");
    struct dirent **names = NULL;
    int ns = scandir(pp("fd/dir"), &names, NULL, alphasort);
    CHECK(ns == 4 && !strcmp(names[0]->d_name, ".") && !strcmp(names[2]->d_name, "a") && !strcmp(names[3]->d_name, "b"), "scandir + alphasort (%d)", ns);
    for (int i = 0; i < ns; i++) free(names[i]);
    free(names);
    CHECK(pathconf(pp("fd/dir"), _PC_NAME_MAX) == 255, "pathconf _PC_NAME_MAX");
    /* chdir into the prefix: relative paths and getcwd follow */
    char old[PATH_MAX]; getcwd(old, sizeof old);
    CHECK(chdir(pp("fd/dir")) == 0, "chdir into the prefix");
    char cwd[PATH_MAX];
    CHECK(getcwd(cwd, sizeof cwd) && !strcmp(cwd, pp("fd/dir")), "getcwd reports the dafs directory (%s)", cwd);
    char *gc = get_current_dir_name();
    CHECK(gc && !strcmp(gc, pp("fd/dir")), "get_current_dir_name too");
    free(gc);
    CHECK(stat("a", &st) == 0 && S_ISREG(st.st_mode) && stat("../dir/b", &st) == 0, "relative paths resolve under it");
    char lp[PATH_MAX]; snprintf(lp, sizeof lp, "%s", L);
    CHECK(stat("/etc/hostname", &st) == 0, "absolute local paths still work");
    CHECK(chdir(old) == 0 && getcwd(cwd, sizeof cwd) && !strcmp(cwd, old), "chdir back to a local directory");
}

static void test_locks(void) {
    int fd = open(pp("fd/lock.db"), O_RDWR | O_CREAT, 0644);
    struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 100};
    CHECK(fcntl(fd, F_SETLK, &l) == 0, "F_SETLK write lock");
    l.l_type = F_RDLCK; l.l_start = 10; l.l_len = 5;
    CHECK(fcntl(fd, F_SETLK, &l) == 0, "the process's own locks do not conflict (downgrade part)");
    int pfd[2], gfd[2]; /* child -> parent report, parent -> child go */
    if (pipe(pfd) || pipe(gfd)) { perror("pipe"); exit(2); }
    pid_t pid = fork();
    if (pid == 0) {
        /* child: a separate session; the parent's locks conflict */
        struct flock c = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 50, .l_len = 10};
        int r1 = fcntl(fd, F_SETLK, &c), e1 = errno;
        struct flock g = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
        int r2 = fcntl(fd, F_GETLK, &g);
        char msg[64];
        snprintf(msg, sizeof msg, "%d %d %d %d", r1 == -1 && (e1 == EAGAIN || e1 == EACCES), r2 == 0, g.l_type == F_WRLCK, 0);
        write(pfd[1], msg, strlen(msg));
        /* wait for the parent to unlock, then lock with F_SETLKW */
        char go; if (read(gfd[0], &go, 1) != 1) _exit(4);
        c.l_type = F_WRLCK;
        int r3 = fcntl(fd, F_SETLKW, &c);
        _exit(r3 == 0 ? 0 : 3);
    }
    char msg[64] = {0}; usleep(10000);
    int n = 0; while (n < 7) { int r = read(pfd[0], msg + n, sizeof msg - 1 - n); if (r <= 0) break; n += r; }
    CHECK(!strncmp(msg, "1 1 1", 5), "child (other session) gets EAGAIN and F_GETLK reports F_WRLCK (%s)", msg);
    l.l_type = F_UNLCK; l.l_start = 0; l.l_len = 0;
    CHECK(fcntl(fd, F_SETLK, &l) == 0, "unlock");
    if (write(gfd[1], "g", 1) != 1) perror("write");
    int status = 0; waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child's F_SETLKW succeeds after the unlock");
    /* POSIX: closing any descriptor of the file releases the process's locks */
    l.l_type = F_WRLCK; l.l_start = 0; l.l_len = 10;
    fcntl(fd, F_SETLK, &l);
    int other = open(pp("fd/lock.db"), O_RDONLY);
    close(other);
    pid = fork();
    if (pid == 0) {
        struct flock c = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10};
        _exit(fcntl(fd, F_SETLK, &c) == 0 ? 0 : 1);
    }
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "closing another descriptor of the file released the lock");
    close(fd); close(pfd[0]); close(pfd[1]); close(gfd[0]); close(gfd[1]);
}

static void test_fork_exec(const char *self) {
    int fd = open(pp("fd/fork.txt"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    write(fd, "parent-data\n", 12);
    lseek(fd, 7, SEEK_SET);
    pid_t pid = fork();
    if (pid == 0) {
        char b[16] = {0};
        /* inherited: offset 7, re-opened in the child's own session */
        int ok = read(fd, b, 5) == 5 && !strcmp(b, "data\n");
        ok = ok && lseek(fd, 0, SEEK_END) == 12 && write(fd, "child\n", 6) == 6;
        int f2 = open(pp("fd/child-made.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ok = ok && f2 >= 0 && write(f2, "x", 1) == 1 && close(f2) == 0;
        _exit(ok ? 0 : 1);
    }
    int status = 0; waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "forked child reads/writes the inherited descriptor and opens new files");
    char b[32] = {0};
    CHECK(lseek(fd, 0, SEEK_CUR) == 7, "the parent's offset is its own after fork (documented divergence)");
    CHECK(pread(fd, b, sizeof b, 0) == 18 && !strcmp(b, "parent-data\nchild\n"), "parent sees the child's write");
    struct stat st;
    CHECK(stat(pp("fd/child-made.txt"), &st) == 0 && st.st_size == 1, "parent sees the child's file");
    /* exec: a non-CLOEXEC dafs descriptor survives, with its offset; a CLOEXEC one does not */
    int cx = open(pp("fd/fork.txt"), O_RDONLY | O_CLOEXEC);
    lseek(fd, 7, SEEK_SET);
    pid = fork();
    if (pid == 0) {
        char a1[16], a2[16];
        snprintf(a1, sizeof a1, "%d", fd); snprintf(a2, sizeof a2, "%d", cx);
        char *av[] = {(char *)self, "--exec-child", a1, a2, NULL};
        execv(self, av); /* execv/execve/execvp(e)/posix_spawn hand dafs descriptors over */
        _exit(127);
    }
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exec'd program reads the inherited descriptor from its offset; CLOEXEC one is gone (status %d)", WEXITSTATUS(status));
    /* stdin of an exec'd standard tool */
    pid = fork();
    if (pid == 0) {
        int out = open(pp("fd/cat-out.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        lseek(fd, 0, SEEK_SET);
        dup2(fd, 0); dup2(out, 1); close(out);
        char *av[] = {"cat", NULL};
        execvp("cat", av);
        _exit(127);
    }
    waitpid(pid, &status, 0);
    memset(b, 0, sizeof b);
    int f3 = open(pp("fd/cat-out.txt"), O_RDONLY);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && read(f3, b, sizeof b) == 18 && !strcmp(b, "parent-data\nchild\n"),
          "cat with stdin and stdout on dafs descriptors (after exec)");
    close(f3);
    /* posix_spawn with file actions putting dafs descriptors on the child's 0 and 1 */
    int out = open(pp("fd/spawn-out.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    lseek(fd, 0, SEEK_SET);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd, 0);
    posix_spawn_file_actions_adddup2(&fa, out, 1);
    char *av[] = {"cat", NULL};
    int sr = posix_spawnp(&pid, "cat", &fa, NULL, av, environ);
    posix_spawn_file_actions_destroy(&fa);
    status = -1;
    if (sr == 0) waitpid(pid, &status, 0);
    close(out);
    memset(b, 0, sizeof b);
    f3 = open(pp("fd/spawn-out.txt"), O_RDONLY);
    CHECK(sr == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 && read(f3, b, sizeof b) == 18 && !strcmp(b, "parent-data\nchild\n"),
          "posix_spawnp with dup2 file actions onto 0/1 (dafs stdin and stdout for cat)");
    close(f3); close(fd); close(cx);
}

static void test_mmap(void) {
    int fd = open(pp("fd/map.bin"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    char buf[10000];
    for (int i = 0; i < (int)sizeof buf; i++) buf[i] = (char)(i * 7);
    write(fd, buf, sizeof buf);
    char *m = mmap(NULL, sizeof buf, PROT_READ, MAP_PRIVATE, fd, 0);
    CHECK(m != MAP_FAILED && !memcmp(m, buf, sizeof buf), "mmap MAP_PRIVATE reads the file");
    if (m != MAP_FAILED) munmap(m, sizeof buf);
    m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 4096);
    CHECK(m != MAP_FAILED && !memcmp(m, buf + 4096, 4096), "mmap MAP_PRIVATE at an offset");
    if (m != MAP_FAILED) { m[0] = 'Z'; munmap(m, 4096); }
    char c = 0;
    CHECK(pread(fd, &c, 1, 4096) == 1 && c == buf[4096], "writes to a private mapping stay private");
    CHECK(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED && errno == ENODEV, "MAP_SHARED: ENODEV");
    close(fd);
}

/* A program that closes every descriptor it did not open itself must not cut the
 * library's session under its open dafs files. */
static void test_close_all(void) {
    int fd = open(pp("fd/keep.txt"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && write(fd, "kept", 4) == 4, "open before closing everything else");
    for (int i = 3; i < 1024; i++) if (i != fd) close(i);
    char b[8] = {0};
    errno = 0;
    CHECK(pread(fd, b, 4, 0) == 4 && !strcmp(b, "kept") && errno == 0, "the dafs file still works after close(3..1023)");
    int f2 = open(pp("fd/keep2.txt"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(f2 >= 0 && write(f2, "x", 1) == 1, "new dafs opens still work");
    close(f2); close(fd);
}

static int exec_child(int fd, int cx) {
    char b[16] = {0};
    /* checked first: the library's own connection may reuse the number later */
    if (fcntl(cx, F_GETFD) != -1 || errno != EBADF) return 3;
    if (read(fd, b, 5) != 5 || strcmp(b, "data\n")) return 2;
    return 0;
}

static void test_stdio(void) {
    FILE *f = fopen(pp("fd/stdio.txt"), "w");
    CHECK(f != NULL, "fopen w");
    CHECK(f && fprintf(f, "line %d\n", 1) == 7 && fputs("line 2\n", f) >= 0 && fwrite("line 3\n", 1, 7, f) == 7, "fprintf/fputs/fwrite");
    CHECK(f && fileno(f) >= 0, "fileno of a dafs stream");
    struct stat st;
    CHECK(f && fflush(f) == 0 && fstat(fileno(f), &st) == 0 && st.st_size == 21, "fflush, fstat(fileno)");
    CHECK(f && fclose(f) == 0, "fclose");
    f = fopen(pp("fd/stdio.txt"), "r");
    char line[64]; int n = 0;
    while (f && fgets(line, sizeof line, f)) { n++; }
    CHECK(n == 3, "fgets reads 3 lines");
    CHECK(f && fseek(f, 5, SEEK_SET) == 0 && ftell(f) == 5 && fgetc(f) == '1', "fseek/ftell/fgetc");
    fclose(f);
    f = fopen(pp("fd/stdio.txt"), "a+");
    CHECK(f && fputs("line 4\n", f) >= 0 && fseek(f, 0, SEEK_SET) == 0 && fgets(line, sizeof line, f) && !strcmp(line, "line 1\n"), "a+ appends and reads from the start");
    fclose(f);
    CHECK(stat(pp("fd/stdio.txt"), &st) == 0 && st.st_size == 28, "size after append (%lld)", (long long)st.st_size);
    int fd = open(pp("fd/stdio.txt"), O_RDONLY);
    f = fdopen(fd, "r");
    CHECK(f && fgets(line, sizeof line, f) && !strcmp(line, "line 1\n") && fclose(f) == 0, "fdopen on a dafs descriptor");
    CHECK(fopen(pp("fd/nope/x"), "r") == NULL && errno == ENOENT, "fopen missing: ENOENT");
    CHECK(freopen(pp("fd/stdio.txt"), "r", stdin) == NULL && errno == EOPNOTSUPP, "freopen onto a dafs path: EOPNOTSUPP (documented)");
}

/* Threads doing I/O on their own dafs files at the same time (the library serialises
 * them on one client); one of them forks meanwhile. */
static void *worker(void *arg) {
    long id = (long)arg;
    char name[64], buf[4096], back[4096];
    snprintf(name, sizeof name, "fd/thread-%ld", id);
    int fd = open(pp(name), O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return (void *)1;
    for (int i = 0; i < 200; i++) {
        memset(buf, 'a' + (int)((id + i) % 26), sizeof buf);
        if (pwrite(fd, buf, sizeof buf, (off_t)i * 4096) != (ssize_t)sizeof buf) return (void *)2;
        if (pread(fd, back, sizeof back, (off_t)i * 4096) != (ssize_t)sizeof back || memcmp(buf, back, sizeof buf)) return (void *)3;
        if (id == 0 && i == 100) {
            pid_t p = fork();
            if (p == 0) _exit(pread(fd, back, 10, 0) == 10 ? 0 : 1);
            int st = 0; waitpid(p, &st, 0);
            if (!WIFEXITED(st) || WEXITSTATUS(st)) return (void *)4;
        }
    }
    struct stat st;
    if (fstat(fd, &st) || st.st_size != 200 * 4096) return (void *)5;
    close(fd);
    return NULL;
}

static void test_threads(void) {
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    long bad = 0;
    for (int i = 0; i < 4; i++) { void *r; pthread_join(t[i], &r); if (r) bad = (long)r; }
    CHECK(bad == 0, "4 threads x 200 pwrite/pread of 4 KiB, one forking meanwhile (code %ld)", bad);
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--exec-child")) return exec_child(atoi(argv[2]), atoi(argv[3]));
    if (argc != 3) { fprintf(stderr, "usage: fdtest PREFIX LOCALDIR\n"); return 2; }
    P = argv[1]; L = argv[2];
    if (mkdir(pp("fd"), 0755)) { perror("mkdir"); return 2; }
    test_basic();
    test_dup();
    test_collision();
    test_dirs();
    test_locks();
    test_fork_exec(argv[0]);
    test_stdio();
    test_threads();
    test_mmap();
    test_close_all();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
