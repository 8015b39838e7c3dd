/* POSIX AIO on dafs descriptors through libdafs_preload.so.
 * Run under LD_PRELOAD with DAFS_MOUNT set:  aiotest PREFIX EXPORTDIR LOCALDIR [limit|dead]
 * PREFIX is a dafs mount prefix, EXPORTDIR the server's export directory (read directly,
 * without the library, to check the data byte for byte), LOCALDIR a local scratch
 * directory (its files must keep going to glibc's AIO). "limit" runs only the test of
 * DAFS_AIO_REQUESTS_MAX (set to 4 by the caller); "dead" kills the server (its pid in
 * DAFS_TEST_SERVER_PID) under a request in progress.
 * Prints "ok ..." / "FAIL ..." lines and "N passed, N failed" last. Every wait is bounded:
 * a request that never completes is a failure, not a hang. */
#define _GNU_SOURCE
#include <aio.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int passed, failed;
static const char *P, *E, *L;

#define CHECK(cond, ...) do { \
    if (cond) { passed++; printf("ok   "); } else { failed++; printf("FAIL (line %d, errno %s) ", __LINE__, strerror(errno)); } \
    printf(__VA_ARGS__); printf("\n"); fflush(stdout); } while (0)

enum { WAIT_LIMIT_S = 30 };

static char *path_in(const char *dir, const char *name) {
    static char buf[8][PATH_MAX]; static int i;
    char *b = buf[i++ % 8]; snprintf(b, PATH_MAX, "%s/%s", dir, name); return b;
}

static double now_s(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9;
}

static void fill(unsigned char *b, size_t n, unsigned seed, size_t base) {
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)((base + i) * 131u + seed * 7u + ((base + i) >> 9));
}

/* Poll aio_error until the request is no longer in progress (bounded): its final value,
 * and in *saw_inprogress whether EINPROGRESS was seen at least once. */
static int poll_done(struct aiocb *cb, int *saw_inprogress) {
    double end = now_s() + WAIT_LIMIT_S;
    int e;
    while ((e = aio_error(cb)) == EINPROGRESS && now_s() < end) {
        if (saw_inprogress) *saw_inprogress = 1;
    }
    return e;
}

/* The export's copy of NAME equals BUF (read without the library: a local path). */
static int export_equals(const char *name, const unsigned char *buf, size_t n) {
    int fd = open(path_in(E, name), O_RDONLY);
    if (fd < 0) return 0;
    unsigned char *got = malloc(n + 1);
    ssize_t r = 0, k;
    while ((size_t)r < n + 1 && (k = read(fd, got + r, n + 1 - r)) > 0) r += k;
    close(fd);
    int same = (size_t)r == n && memcmp(got, buf, n) == 0;
    free(got);
    return same;
}

static void setup(struct aiocb *cb, int fd, void *buf, size_t n, off_t off) {
    memset(cb, 0, sizeof *cb);
    cb->aio_fildes = fd; cb->aio_buf = buf; cb->aio_nbytes = n; cb->aio_offset = off;
    cb->aio_sigevent.sigev_notify = SIGEV_NONE;
}

static void test_write_read(void) {
    const size_t n = 16u << 20; /* several client chunks */
    unsigned char *w = malloc(n), *r = calloc(1, n);
    fill(w, n, 1, 0);
    int fd = open(path_in(P, "aio/big.dat"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0, "open a dafs file");
    struct aiocb cb;
    setup(&cb, fd, w, n, 0);
    CHECK(aio_write(&cb) == 0, "aio_write of 16 MiB is queued");
    int e = poll_done(&cb, NULL);
    CHECK(e == 0, "aio_error becomes 0 (got %d)", e);
    CHECK(aio_return(&cb) == (ssize_t)n, "aio_return gives 16 MiB");
    /* Once returned, the request is gone (POSIX's EINVAL): not 0 again, which made
     * ROMIO complete an MPI request twice when MPI_Testall polled it again. */
    CHECK(aio_error(&cb) == -1 && errno == EINVAL, "aio_error after aio_return: -1, EINVAL");
    CHECK(aio_return(&cb) == -1 && errno == EINVAL, "aio_return twice: -1, EINVAL");
    CHECK(export_equals("aio/big.dat", w, n), "the export's file equals what aio_write wrote, byte for byte");

    setup(&cb, fd, r, n, 0);
    CHECK(aio_read(&cb) == 0, "aio_read of 16 MiB is queued");
    const struct aiocb *list[3] = {NULL, &cb, NULL};
    struct timespec ten = {10, 0};
    double end = now_s() + WAIT_LIMIT_S;
    int rc = 0;
    while (aio_error(&cb) == EINPROGRESS && now_s() < end) {
        rc = aio_suspend(list, 3, &ten);
        if (rc != 0 && errno != EAGAIN && errno != EINTR) break;
    }
    CHECK(rc == 0 && aio_error(&cb) == 0, "aio_suspend (NULL entries, 10 s timeout) returns once the read is done");
    CHECK(aio_return(&cb) == (ssize_t)n && memcmp(r, w, n) == 0, "aio_return 16 MiB, data byte for byte");
    CHECK(aio_suspend(list, 3, &ten) == 0, "aio_suspend on a completed request returns 0 at once");

    /* A read of several chunks that crosses end of file: the bytes up to there. */
    unsigned char *r2 = malloc(n + (4u << 20));
    setup(&cb, fd, r2, n + (4u << 20), 100);
    CHECK(aio_read(&cb) == 0 && poll_done(&cb, NULL) == 0 && aio_return(&cb) == (ssize_t)n - 100 &&
          memcmp(r2, w + 100, n - 100) == 0, "a 20 MiB aio_read at offset 100 of the 16 MiB file returns 16 MiB - 100, data right");
    free(r2);

    /* A short read at end of file, and one of zero bytes. */
    memset(r, 0, 1000);
    setup(&cb, fd, r, 1000, (off_t)n - 100);
    CHECK(aio_read(&cb) == 0 && poll_done(&cb, NULL) == 0 && aio_return(&cb) == 100 &&
          memcmp(r, w + n - 100, 100) == 0, "aio_read across end of file returns the 100 bytes there");
    setup(&cb, fd, r, 0, 0);
    CHECK(aio_read(&cb) == 0 && poll_done(&cb, NULL) == 0 && aio_return(&cb) == 0, "a zero-byte aio_read returns 0");

    /* aio_suspend with a timeout that expires first (EAGAIN) while the request stays
     * in progress, then without one. */
    setup(&cb, fd, r, n, 0);
    CHECK(aio_read(&cb) == 0, "aio_read queued again");
    struct timespec tiny = {0, 1};
    errno = 0;
    rc = aio_suspend(list, 3, &tiny);
    CHECK((rc == -1 && errno == EAGAIN && aio_error(&cb) == EINPROGRESS) || (rc == 0 && aio_error(&cb) == 0),
          "aio_suspend with a 1 ns timeout: EAGAIN while in progress (rc %d)", rc);
    struct timespec bad = {0, 2000000000L};
    CHECK(aio_suspend(list, 3, &bad) == -1 && errno == EINVAL, "aio_suspend with tv_nsec >= 1e9: EINVAL");
    while (aio_error(&cb) == EINPROGRESS) aio_suspend(list, 3, NULL);
    CHECK(aio_return(&cb) == (ssize_t)n && memcmp(r, w, n) == 0, "aio_suspend without a timeout waits for the read");
    close(fd);
    free(w); free(r);
}

/* Has every thread of process PID stopped? (SIGSTOP takes effect asynchronously: a
 * server thread busy on another CPU may still run for a moment.) */
static int all_stopped(pid_t pid) {
    char dir[64], stat_path[PATH_MAX], line[512];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    if (!d) return 0;
    int all = 1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        snprintf(stat_path, sizeof stat_path, "%s/%s/stat", dir, e->d_name);
        FILE *f = fopen(stat_path, "r");
        if (!f) continue;
        char *close_paren = fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
        fclose(f);
        if (close_paren && close_paren[1] == ' ' && close_paren[2] != 'T' && close_paren[2] != 't') all = 0;
    }
    closedir(d);
    return all;
}

static int stop_server(pid_t pid) {
    if (kill(pid, SIGSTOP) != 0) return 0;
    double end = now_s() + WAIT_LIMIT_S;
    while (!all_stopped(pid) && now_s() < end) usleep(1000);
    return all_stopped(pid);
}

/* Truly asynchronous: with the server stopped (SIGSTOP), aio_write and aio_read still
 * return at once, aio_error says EINPROGRESS and aio_suspend times out; after SIGCONT
 * they complete. (A library that did the I/O at submission would hang here.) */
static void test_inprogress(pid_t server) {
    enum { N = 8192 }; /* inline: below the server's threshold, no registration round trip */
    static unsigned char w[N], r[N];
    fill(w, N, 5, 0);
    int fd = open(path_in(P, "aio/stopped.dat"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    struct aiocb wc, rc;
    setup(&wc, fd, w, N, 0);
    setup(&rc, fd, r, N, N);
    CHECK(fd >= 0 && stop_server(server), "server stopped (SIGSTOP, every thread)");
    double t0 = now_s();
    CHECK(aio_write(&wc) == 0 && aio_read(&rc) == 0, "aio_write and aio_read return while the server is stopped");
    CHECK(aio_error(&wc) == EINPROGRESS && aio_error(&rc) == EINPROGRESS, "aio_error: EINPROGRESS");
    const struct aiocb *list[2] = {&wc, &rc};
    struct timespec t = {0, 200 * 1000 * 1000};
    errno = 0;
    CHECK(aio_suspend(list, 2, &t) == -1 && errno == EAGAIN && now_s() - t0 >= 0.19, "aio_suspend with a 200 ms timeout: EAGAIN after 200 ms");
    CHECK(aio_return(&wc) == -1 && errno == EINPROGRESS, "aio_return before completion: -1, EINPROGRESS, request kept");
    CHECK(aio_error(&wc) == EINPROGRESS, "still EINPROGRESS");
    /* A forked child does not own the parent's session: its copies of the requests
     * report EIO (they would never complete there), the parent's are unaffected. */
    pid_t child = fork();
    if (child == 0) {
        int e = aio_error(&wc);
        _exit(e == EIO && aio_return(&wc) == -1 && errno == EIO ? 0 : 1);
    }
    int status = -1;
    CHECK(child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "in a forked child the parent's request in progress reports EIO");
    CHECK(aio_error(&wc) == EINPROGRESS, "in the parent it is still in progress");
    kill(server, SIGCONT);
    int ew = poll_done(&wc, NULL), er = poll_done(&rc, NULL);
    CHECK(ew == 0 && er == 0, "after SIGCONT both complete: aio_error 0 (%d, %d)", ew, er);
    CHECK(aio_return(&wc) == N && aio_return(&rc) == 0, "aio_return: %d bytes written, 0 read (at end of file then)", N);
    CHECK(export_equals("aio/stopped.dat", w, N), "the export has the data, byte for byte");
    close(fd);
}

static void test_listio(void) {
    enum { K = 6, BLK = 300000 };
    unsigned char *w = malloc(K * BLK), *r = calloc(K, BLK);
    fill(w, K * BLK, 2, 0);
    int fd = open(path_in(P, "aio/list.dat"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    struct aiocb cbs[K], nop;
    struct aiocb *list[K + 2];
    for (int i = 0; i < K; i++) {
        setup(&cbs[i], fd, w + i * BLK, BLK, (off_t)i * BLK);
        cbs[i].aio_lio_opcode = LIO_WRITE;
        list[i] = &cbs[i];
    }
    setup(&nop, fd, NULL, 0, 0);
    nop.aio_lio_opcode = LIO_NOP;
    list[K] = &nop; list[K + 1] = NULL;
    CHECK(lio_listio(LIO_WAIT, list, K + 2, NULL) == 0, "lio_listio(LIO_WAIT) of 6 writes (+ LIO_NOP, NULL)");
    int ok = 1;
    for (int i = 0; i < K; i++) ok &= aio_error(&cbs[i]) == 0 && aio_return(&cbs[i]) == BLK;
    CHECK(ok, "after LIO_WAIT every write is complete with its byte count");
    CHECK(export_equals("aio/list.dat", w, K * BLK), "the export's file equals the listed writes, byte for byte");

    for (int i = 0; i < K; i++) {
        setup(&cbs[i], fd, r + (K - 1 - i) * BLK, BLK, (off_t)(K - 1 - i) * BLK);
        cbs[i].aio_lio_opcode = LIO_READ;
    }
    CHECK(lio_listio(LIO_NOWAIT, list, K, NULL) == 0, "lio_listio(LIO_NOWAIT) of 6 reads returns");
    double end = now_s() + WAIT_LIMIT_S;
    int left = K;
    while (left > 0 && now_s() < end) {
        aio_suspend((const struct aiocb *const *)list, K, NULL);
        left = 0;
        for (int i = 0; i < K; i++) left += aio_error(&cbs[i]) == EINPROGRESS;
    }
    ok = left == 0;
    for (int i = 0; i < K; i++) ok &= aio_error(&cbs[i]) == 0 && aio_return(&cbs[i]) == BLK;
    CHECK(ok && memcmp(r, w, K * BLK) == 0, "LIO_NOWAIT reads complete (aio_suspend), data byte for byte");

    /* A list with one bad entry: LIO_WAIT fails with EIO, the entry has its error. */
    setup(&cbs[0], fd, r, BLK, 0); cbs[0].aio_lio_opcode = LIO_READ;
    setup(&cbs[1], fd, r + BLK, BLK, -5); cbs[1].aio_lio_opcode = LIO_READ;
    CHECK(lio_listio(LIO_WAIT, list, 2, NULL) == -1 && errno == EIO, "lio_listio with a negative offset: EIO");
    CHECK(aio_error(&cbs[0]) == 0 && aio_return(&cbs[0]) == BLK, "... the good entry completed");
    CHECK(aio_error(&cbs[1]) == EINVAL && aio_return(&cbs[1]) == -1, "... the bad one reports EINVAL");
    CHECK(lio_listio(42, list, 1, NULL) == -1 && errno == EINVAL, "lio_listio with a bad mode: EINVAL");
    close(fd);
    free(w); free(r);
}

static void test_fsync_cancel(void) {
    const size_t n = 8u << 20;
    unsigned char *w = malloc(n), *r = malloc(n);
    fill(w, n, 3, 0);
    int fd = open(path_in(P, "aio/sync.dat"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    struct aiocb cb, sc;
    setup(&cb, fd, w, n, 0);
    setup(&sc, fd, NULL, 0, 0);
    CHECK(aio_write(&cb) == 0, "aio_write queued before aio_fsync");
    CHECK(aio_fsync(O_SYNC, &sc) == 0, "aio_fsync(O_SYNC)");
    CHECK(poll_done(&sc, NULL) == 0 && aio_return(&sc) == 0, "aio_fsync completes with 0");
    CHECK(aio_error(&cb) == 0 && aio_return(&cb) == (ssize_t)n, "the write queued before it is complete");
    CHECK(export_equals("aio/sync.dat", w, n), "after aio_fsync the export has the data");
    CHECK(aio_fsync(12345, &sc) == -1 && errno == EINVAL, "aio_fsync with a bad op: EINVAL");
    CHECK(aio_fsync(O_DSYNC, &sc) == 0 && poll_done(&sc, NULL) == 0 && aio_return(&sc) == 0, "aio_fsync(O_DSYNC)");

    /* Cancel: a read in progress is cancelled (its buffer is left alone); a write in
     * progress may have reached the server and is not. */
    memset(r, 0xee, n);
    setup(&cb, fd, r, n, 0);
    CHECK(aio_read(&cb) == 0, "aio_read queued");
    int c = aio_cancel(fd, &cb);
    if (c == AIO_CANCELED) {
        CHECK(aio_error(&cb) == ECANCELED && aio_return(&cb) == -1, "aio_cancel of a read in progress: AIO_CANCELED, ECANCELED");
        usleep(200000);
        aio_cancel(fd, NULL); /* reaps the dropped data */
        int untouched = 1;
        for (size_t i = 0; i < n; i++) untouched &= r[i] == 0xee;
        CHECK(untouched, "a cancelled read leaves the buffer alone");
    } else {
        CHECK(c == AIO_ALLDONE && aio_error(&cb) == 0 && aio_return(&cb) == (ssize_t)n, "aio_cancel of a finished read: AIO_ALLDONE");
    }
    setup(&cb, fd, w, n, 0);
    CHECK(aio_write(&cb) == 0, "aio_write queued");
    c = aio_cancel(fd, NULL);
    CHECK(c == AIO_NOTCANCELED || c == AIO_ALLDONE, "aio_cancel(fd, NULL) with a write in progress: AIO_NOTCANCELED (got %d)", c);
    CHECK(poll_done(&cb, NULL) == 0 && aio_return(&cb) == (ssize_t)n, "... and the write completes");
    CHECK(aio_cancel(fd, NULL) == AIO_ALLDONE, "aio_cancel with nothing in progress: AIO_ALLDONE");
    struct aiocb other;
    setup(&other, fd + 1, r, 1, 0);
    CHECK(aio_cancel(fd, &other) == -1 && errno == EINVAL, "aio_cancel with an aiocb of another descriptor: EINVAL");
    close(fd);
    free(w); free(r);
}

static void test_errors(void) {
    char b[16];
    struct aiocb cb;
    int fd = open(path_in(P, "aio/sync.dat"), O_WRONLY);
    setup(&cb, fd, b, sizeof b, 0);
    int rc = aio_read(&cb);
    CHECK((rc == -1 && errno == EBADF) || (rc == 0 && poll_done(&cb, NULL) == EBADF), "aio_read on an O_WRONLY dafs descriptor: EBADF");
    close(fd);
    fd = open(path_in(P, "aio/sync.dat"), O_RDONLY);
    setup(&cb, fd, b, sizeof b, 0);
    rc = aio_write(&cb);
    CHECK((rc == -1 && errno == EBADF) || (rc == 0 && poll_done(&cb, NULL) == EBADF), "aio_write on an O_RDONLY dafs descriptor: EBADF");
    setup(&cb, fd, b, sizeof b, -1);
    CHECK(aio_read(&cb) == -1 && errno == EINVAL, "negative aio_offset: EINVAL");
    setup(&cb, fd, b, sizeof b, 0);
    cb.aio_reqprio = -1;
    CHECK(aio_read(&cb) == -1 && errno == EINVAL, "negative aio_reqprio: EINVAL");
    setup(&cb, fd, b, sizeof b, 0);
    cb.aio_sigevent.sigev_notify = 77;
    CHECK(aio_read(&cb) == -1 && errno == EINVAL, "an unknown sigev_notify: EINVAL");
    close(fd);

    /* O_APPEND: aio_write appends. */
    fd = open(path_in(P, "aio/append.txt"), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    setup(&cb, fd, "first,", 6, 0);
    CHECK(aio_write(&cb) == 0 && poll_done(&cb, NULL) == 0 && aio_return(&cb) == 6, "aio_write on O_APPEND");
    setup(&cb, fd, "second", 6, 0);
    CHECK(aio_write(&cb) == 0 && poll_done(&cb, NULL) == 0 && aio_return(&cb) == 6, "a second one");
    CHECK(export_equals("aio/append.txt", (const unsigned char *)"first,second", 12), "O_APPEND aio_writes append (offset ignored)");
    close(fd);
}

/* Notification: SIGEV_SIGNAL queues the signal with sigev_value, SIGEV_THREAD runs the
 * function on a thread; signal 0 (ROMIO's zeroed aiocb) is no notification. */
static volatile sig_atomic_t got_signal, got_value, thread_value;
static void on_signal(int sig, siginfo_t *si, void *ctx) {
    (void)ctx;
    got_signal = sig;
    got_value = si->si_value.sival_int;
}
static void on_thread(union sigval v) { thread_value = v.sival_int; }

static void test_notify(void) {
    char b[64] = "notified";
    int fd = open(path_in(P, "aio/notify.dat"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGUSR1, &sa, NULL);
    struct aiocb cb;
    setup(&cb, fd, b, 8, 0);
    cb.aio_sigevent.sigev_notify = SIGEV_SIGNAL;
    cb.aio_sigevent.sigev_signo = SIGUSR1;
    cb.aio_sigevent.sigev_value.sival_int = 4242;
    CHECK(aio_write(&cb) == 0, "aio_write with SIGEV_SIGNAL");
    double end = now_s() + WAIT_LIMIT_S;
    while (!got_signal && now_s() < end) usleep(1000);
    CHECK(got_signal == SIGUSR1 && got_value == 4242, "the signal arrives with sigev_value (%d)", (int)got_value);
    CHECK(aio_error(&cb) == 0 && aio_return(&cb) == 8, "... and the write is complete");
    setup(&cb, fd, b + 8, 8, 0);
    cb.aio_sigevent.sigev_notify = SIGEV_THREAD;
    cb.aio_sigevent.sigev_notify_function = on_thread;
    cb.aio_sigevent.sigev_value.sival_int = 777;
    CHECK(aio_read(&cb) == 0, "aio_read with SIGEV_THREAD");
    end = now_s() + WAIT_LIMIT_S;
    while (!thread_value && now_s() < end) usleep(1000);
    CHECK(thread_value == 777, "the notification function runs with sigev_value");
    CHECK(aio_error(&cb) == 0 && aio_return(&cb) == 8 && memcmp(b + 8, "notified", 8) == 0, "... and the read is complete");
    setup(&cb, fd, b, 8, 0);
    cb.aio_sigevent.sigev_notify = SIGEV_SIGNAL;
    cb.aio_sigevent.sigev_signo = 0;
    CHECK(aio_read(&cb) == 0 && poll_done(&cb, NULL) == 0 && aio_return(&cb) == 8, "SIGEV_SIGNAL with signal 0 (ROMIO's zeroed aiocb) is accepted");
    close(fd);
}

/* close() with requests in progress: they still end (completed or failed), and the
 * data of a completed write is in the file. */
static void test_close_pending(void) {
    const size_t n = 4u << 20;
    unsigned char *w = malloc(n), *r = malloc(n);
    fill(w, n, 6, 0);
    int fd = open(path_in(P, "aio/closed.dat"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    struct aiocb wc, rc;
    setup(&wc, fd, w, n, 0);
    setup(&rc, fd, r, n, 0);
    CHECK(aio_write(&wc) == 0 && aio_read(&rc) == 0 && close(fd) == 0, "close with an aio_write and an aio_read in progress");
    int ew = poll_done(&wc, NULL), er = poll_done(&rc, NULL);
    CHECK(ew != EINPROGRESS && er != EINPROGRESS, "both end (write: %s, read: %s)", strerror(ew), strerror(er));
    ssize_t got = aio_return(&wc);
    aio_return(&rc);
    CHECK(ew != 0 || (got == (ssize_t)n && export_equals("aio/closed.dat", w, n)), "a write reported complete is in the file");
    free(w); free(r);
}

/* Many requests at once: more than the session has slots. */
static void test_many(void) {
    enum { N = 300, BLK = 20000 };
    unsigned char *w = malloc(N * BLK), *r = calloc(N, BLK);
    fill(w, N * BLK, 4, 0);
    int fd = open(path_in(P, "aio/many.dat"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    static struct aiocb cbs[N];
    int ok = 1;
    for (int i = 0; i < N; i++) {
        setup(&cbs[i], fd, w + (size_t)i * BLK, BLK, (off_t)i * BLK);
        ok &= aio_write(&cbs[i]) == 0;
    }
    for (int i = 0; i < N; i++) ok &= poll_done(&cbs[i], NULL) == 0 && aio_return(&cbs[i]) == BLK;
    CHECK(ok, "300 aio_writes in flight at once all complete");
    CHECK(export_equals("aio/many.dat", w, (size_t)N * BLK), "... the export's file is byte for byte right");
    ok = 1;
    for (int i = 0; i < N; i++) {
        setup(&cbs[i], fd, r + (size_t)i * BLK, BLK, (off_t)i * BLK);
        ok &= aio_read(&cbs[i]) == 0;
    }
    for (int i = N - 1; i >= 0; i--) ok &= poll_done(&cbs[i], NULL) == 0 && aio_return(&cbs[i]) == BLK;
    CHECK(ok && memcmp(r, w, (size_t)N * BLK) == 0, "300 aio_reads at once, reaped in reverse order, data right");
    close(fd);
    free(w); free(r);
}

/* Local files still go to glibc's AIO, also in a list mixed with dafs requests. */
static void test_local(void) {
    char lb[4096], rb[4096], db[4096];
    memset(lb, 'L', sizeof lb);
    int lfd = open(path_in(L, "aio-local.dat"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    int dfd = open(path_in(P, "aio/mixed.dat"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    struct aiocb lc, dc;
    setup(&lc, lfd, lb, sizeof lb, 0);
    CHECK(aio_write(&lc) == 0 && poll_done(&lc, NULL) == 0 && aio_return(&lc) == sizeof lb, "aio_write on a local file (glibc)");
    struct stat st;
    CHECK(stat(path_in(L, "aio-local.dat"), &st) == 0 && st.st_size == sizeof lb, "... the local file has the data");
    memset(db, 'D', sizeof db);
    setup(&dc, dfd, db, sizeof db, 0);
    setup(&lc, lfd, rb, sizeof rb, 0);
    CHECK(aio_write(&dc) == 0 && aio_read(&lc) == 0, "a dafs aio_write and a local aio_read at once");
    const struct aiocb *list[2] = {&lc, &dc};
    double end = now_s() + WAIT_LIMIT_S;
    while ((aio_error(&lc) == EINPROGRESS || aio_error(&dc) == EINPROGRESS) && now_s() < end) aio_suspend(list, 2, NULL);
    CHECK(aio_return(&lc) == sizeof rb && memcmp(rb, lb, sizeof rb) == 0, "the local read completes (mixed aio_suspend)");
    CHECK(aio_return(&dc) == sizeof db && export_equals("aio/mixed.dat", (unsigned char *)db, sizeof db), "the dafs write completes");
    struct aiocb *ll[1] = {&lc};
    setup(&lc, lfd, rb, 100, 0); lc.aio_lio_opcode = LIO_READ;
    CHECK(lio_listio(LIO_WAIT, ll, 1, NULL) == 0 && aio_return(&lc) == 100, "lio_listio on a local file (glibc)");
    close(lfd); close(dfd);
}

/* DAFS_AIO_REQUESTS_MAX=4: a fifth request is refused with EAGAIN until one is returned. */
static void test_limit(void) {
    char b[5][100];
    struct aiocb cbs[5];
    int fd = open(path_in(P, "aio/limit.dat"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    int ok = 1;
    for (int i = 0; i < 4; i++) {
        setup(&cbs[i], fd, b[i], sizeof b[i], i * 100);
        ok &= aio_write(&cbs[i]) == 0;
    }
    CHECK(ok, "4 requests (the limit) are queued");
    setup(&cbs[4], fd, b[4], sizeof b[4], 400);
    CHECK(aio_write(&cbs[4]) == -1 && errno == EAGAIN, "the fifth: EAGAIN");
    CHECK(poll_done(&cbs[0], NULL) == 0 && aio_return(&cbs[0]) == 100, "one completes and is returned");
    CHECK(aio_write(&cbs[4]) == 0, "then the fifth is queued");
    for (int i = 1; i < 5; i++) ok &= poll_done(&cbs[i], NULL) == 0 && aio_return(&cbs[i]) == 100;
    CHECK(ok, "all complete");
    close(fd);
}

/* The server killed (SIGKILL) under requests in progress: they end with an error within
 * the client's request deadline (DAFS_REQUEST_DEADLINE_MS, set by the caller), never
 * stay in progress, and aio_suspend returns. */
static void test_dead(pid_t server) {
    enum { N = 8192 };
    static unsigned char b[N];
    int fd = open(path_in(P, "dead.dat"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && pwrite(fd, b, N, 0) == N, "a file on the doomed server");
    struct aiocb cb;
    setup(&cb, fd, b, N, 0);
    CHECK(stop_server(server), "server stopped");
    CHECK(aio_read(&cb) == 0 && aio_error(&cb) == EINPROGRESS, "aio_read in progress");
    kill(server, SIGKILL);
    const struct aiocb *list[1] = {&cb};
    double t0 = now_s();
    int rc = aio_suspend(list, 1, NULL);
    int e = aio_error(&cb);
    CHECK(rc == 0 && e != 0 && e != EINPROGRESS, "aio_suspend returns, the request failed (%s) after %.1f s", strerror(e), now_s() - t0);
    CHECK(aio_return(&cb) == -1 && errno == e, "aio_return: -1 with that error");
    close(fd);
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: aiotest PREFIX EXPORTDIR LOCALDIR [limit|dead]\n"); return 2; }
    P = argv[1]; E = argv[2]; L = argv[3];
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 4 && strcmp(argv[4], "dead") == 0) {
        const char *sp = getenv("DAFS_TEST_SERVER_PID");
        if (sp && *sp) test_dead((pid_t)atoi(sp));
        else CHECK(0, "DAFS_TEST_SERVER_PID is not set");
    } else if (argc > 4 && strcmp(argv[4], "limit") == 0) {
        mkdir(path_in(P, "aio"), 0755);
        test_limit();
    } else {
        CHECK(mkdir(path_in(P, "aio"), 0755) == 0 || errno == EEXIST, "mkdir");
        test_write_read();
        const char *sp = getenv("DAFS_TEST_SERVER_PID");
        if (sp && *sp) test_inprogress((pid_t)atoi(sp));
        else CHECK(0, "DAFS_TEST_SERVER_PID is not set");
        test_listio();
        test_fsync_cancel();
        test_errors();
        test_notify();
        test_close_pending();
        test_many();
        test_local();
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
