/*
 * Tests of libdafs_odm (adapters/odm/include/dafs_odm.h) against one backend:
 *   ODM_BACKEND=dafs|local  ODM_TARGET=host:port|dafs+shm://...|/local/dir
 *   ODM_PROVIDER=tcp|auto   (dafs)   ODM_EXPORT_DIR=where the files land on local disk
 * Second clients are separate processes (this program run with --peer ...), each with
 * its own context (and DAFS session). Prints one line per test and "N passed, N failed".
 */
#define _GNU_SOURCE
#include <dafs_odm.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(odm_ioreq_t) == 128, "odm_ioreq_t layout");

static const char *self_exe, *export_dir;
static char dir[64];

#define CHECK_STRERROR odm_strerror
#include "check.h" /* tests/c: the C tests' check macros */

static odm_ctx_t *ctx_new(void) {
    odm_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    const char *be = getenv("ODM_BACKEND"), *pv = getenv("ODM_PROVIDER");
    cfg.backend = be && !strcmp(be, "local") ? ODM_BACKEND_LOCAL : ODM_BACKEND_DAFS;
    cfg.provider = pv && !strcmp(pv, "tcp") ? ODM_PROVIDER_TCP : ODM_PROVIDER_AUTO;
    cfg.target = getenv("ODM_TARGET");
    odm_ctx_t *c = NULL;
    int r = odm_init(&cfg, &c);
    if (r) fprintf(stderr, "    odm_init %s: %s\n", cfg.target, odm_strerror(r));
    return c;
}

static char *path(const char *name) {
    static char buf[8][256];
    static int i;
    char *p = buf[i++ % 8];
    snprintf(p, 256, "%s/%s", dir, name);
    return p;
}

/* Bytes [off, off+n) of the file as stored on disk, or -errno. */
static long disk_read(const char *name, void *buf, size_t n, off_t off) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s/%s", export_dir, dir, name);
    int fd = open(p, O_RDONLY);
    if (fd < 0) return -errno;
    long r = pread(fd, buf, n, off);
    close(fd);
    return r;
}

static long disk_size(const char *name) {
    char p[512];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s/%s", export_dir, dir, name);
    return stat(p, &st) == 0 ? (long)st.st_size : -errno;
}

static void fill(unsigned char *p, size_t n, unsigned seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        p[i] = (unsigned char)x;
    }
}

/* Blocking I/O through odm_io (submit one, wait for it). */
static long io1(odm_ctx_t *c, int op, odm_fid_t fid, void *buf, size_t len, uint64_t off) {
    odm_ioreq_t r;
    memset(&r, 0, sizeof r);
    r.op = (uint32_t)op;
    r.fid = fid;
    r.buf = buf;
    r.len = len;
    r.offset = off;
    odm_ioreq_t *s[1] = {&r};
    int e = odm_io(c, s, 1, s, 1, NULL, 0, 0, NULL, -1);
    return e ? e : (long)r.result;
}

/* Run this program as another client: returns what the peer printed (its result). */
static int peer(const char *op, const char *p, const char *key) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' --peer %s '%s' '%s'", self_exe, op, p, key);
    FILE *f = popen(cmd, "r");
    if (!f) return -9999;
    int v = -9999;
    if (fscanf(f, "%d", &v) != 1) v = -9998;
    pclose(f);
    return v;
}

static int peer_main(const char *op, const char *p, const char *key) {
    odm_ctx_t *c = ctx_new();
    if (!c) { printf("-9997\n"); return 0; }
    odm_fid_t fid = 0;
    int r;
    if (!strcmp(op, "identify")) {
        /* identify, then read 4 bytes: prints the rc, or the bytes as a number */
        r = odm_identify(c, p, 0, key, (uint32_t)strlen(key), &fid);
        if (!r) {
            unsigned char b[4] = {0};
            long n = io1(c, ODM_READ, fid, b, 4, 0);
            r = n == 4 ? (int)(b[0] | b[1] << 8 | b[2] << 16) + 1 : (int)(n < 0 ? n : -9996);
        }
    } else if (!strcmp(op, "create-crash")) {
        r = odm_create(c, p, 8192, 1, key, (uint32_t)strlen(key), &fid);
        unsigned char b[512];
        memset(b, 7, sizeof b);
        if (!r && io1(c, ODM_WRITE, fid, b, sizeof b, 0) != (long)sizeof b) r = -9995;
        printf("%d\n", r);
        fflush(stdout);
        _exit(0); /* no commit, no fini: the process dies */
    } else {
        r = -9994;
    }
    printf("%d\n", r);
    odm_fini(c);
    return 0;
}

/* ---------------------------------------------------------------------------------- */

static int t_create_commit_visibility(void) {
    odm_ctx_t *c = ctx_new();
    CHECK(c);
    odm_fid_t fid = 0;
    OK(odm_create(c, path("c1"), 65536, 3, "keyA", 4, &fid));
    CHECK(fid != 0);
    unsigned char w[4096], r[4096];
    fill(w, sizeof w, 1);
    w[0] = 10; w[1] = 20; w[2] = 30;
    CHECK_EQ(io1(c, ODM_WRITE, fid, w, sizeof w, 0), 4096);
    /* Invisible to another client, and on disk, until commit. */
    CHECK_EQ(peer("identify", path("c1"), "keyA"), -ENOENT);
    CHECK_EQ(disk_size("c1"), -ENOENT);
    odm_fid_t dup = 0;
    CHECK_EQ(odm_identify(c, path("c1"), 0, "keyA", 4, &dup), -ENOENT);
    OK(odm_commit(c, fid));
    CHECK_EQ(odm_commit(c, fid), -EINVAL);
    CHECK_EQ(odm_abort(c, fid), -EINVAL); /* committed: nothing to abort */
    CHECK_EQ(peer("identify", path("c1"), "keyA"), (10 | 20 << 8 | 30 << 16) + 1);
    /* The server's copy: header, then the data at ODM offset 0. */
    CHECK_EQ(disk_size("c1"), ODM_HEADER_BYTES + 65536);
    CHECK_EQ(disk_read("c1", r, sizeof r, ODM_HEADER_BYTES), 4096);
    CHECK(memcmp(r, w, sizeof w) == 0);
    CHECK_EQ(disk_read("c1", r, 8, 0), 8);
    CHECK(memcmp(r, "DAFSODM1", 8) == 0);
    /* Creating an existing name fails. */
    CHECK_EQ(odm_create(c, path("c1"), 0, 3, "keyA", 4, &dup), -EEXIST);
    OK(odm_unidentify(c, fid));
    CHECK_EQ(odm_unidentify(c, fid), -EBADF);
    CHECK_EQ(io1(c, ODM_READ, fid, r, 16, 0), -EBADF);
    odm_fini(c);
    return 0;
}

static int t_abort_and_crash_discard(void) {
    odm_ctx_t *c = ctx_new();
    CHECK(c);
    odm_fid_t fid = 0;
    OK(odm_create(c, path("a1"), 4096, 1, "k", 1, &fid));
    unsigned char w[4096];
    fill(w, sizeof w, 2);
    CHECK_EQ(io1(c, ODM_WRITE, fid, w, sizeof w, 0), 4096);
    OK(odm_abort(c, fid));
    CHECK_EQ(odm_abort(c, fid), -EBADF);
    CHECK_EQ(disk_size("a1"), -ENOENT);
    CHECK_EQ(peer("identify", path("a1"), "k"), -ENOENT);
    /* The name is free again. */
    OK(odm_create(c, path("a1"), 4096, 1, "k", 1, &fid));
    OK(odm_commit(c, fid));
    OK(odm_unidentify(c, fid));
    CHECK_EQ(disk_size("a1"), ODM_HEADER_BYTES + 4096);
    /* A process that dies before commit leaves nothing behind. */
    CHECK_EQ(peer("create-crash", path("a2"), "k"), 0);
    CHECK_EQ(disk_size("a2"), -ENOENT);
    CHECK_EQ(odm_identify(c, path("a2"), 0, "k", 1, &fid), -ENOENT);
    /* fini discards uncommitted files too. */
    OK(odm_create(c, path("a3"), 4096, 1, "k", 1, &fid));
    odm_fini(c);
    CHECK_EQ(disk_size("a3"), -ENOENT);
    return 0;
}

static int t_keys_and_types(void) {
    odm_ctx_t *c = ctx_new();
    CHECK(c);
    odm_fid_t fid = 0, g = 0;
    OK(odm_create(c, path("k1"), 4096, 7, "right-key", 9, &fid));
    OK(odm_commit(c, fid));
    /* While this context holds it (DAFS: also refused by the server's open key). */
    CHECK_EQ(peer("identify", path("k1"), "wrong-key"), -EACCES);
    CHECK_EQ(peer("identify", path("k1"), ""), -EACCES);
    CHECK_EQ(peer("identify", path("k1"), "right-key"), 1);
    OK(odm_unidentify(c, fid));
    /* And with nobody holding it: the key in the file's header. */
    CHECK_EQ(peer("identify", path("k1"), "wrong-key"), -EACCES);
    CHECK_EQ(odm_identify(c, path("k1"), 0, "right-kez", 9, &g), -EACCES);
    CHECK_EQ(g, 0);
    CHECK_EQ(odm_identify(c, path("k1"), 8, "right-key", 9, &g), -EMEDIUMTYPE);
    OK(odm_identify(c, path("k1"), 7, "right-key", 9, &g));
    OK(odm_unidentify(c, g));
    char big[ODM_KEY_BYTES_MAX + 1];
    memset(big, 'x', sizeof big);
    CHECK_EQ(odm_identify(c, path("k1"), 0, big, sizeof big, &g), -EINVAL);
    CHECK_EQ(odm_create(c, path("k2"), 0, 0, big, sizeof big, &g), -EINVAL);
    CHECK_EQ(odm_identify(c, path("missing"), 0, "", 0, &g), -ENOENT);
    /* A file that is not an ODM file. */
    char p[512];
    snprintf(p, sizeof p, "%s/%s/plain", export_dir, dir);
    int fd = open(p, O_CREAT | O_WRONLY, 0644);
    CHECK(fd >= 0);
    CHECK_EQ(write(fd, "hello", 5), 5);
    close(fd);
    CHECK_EQ(odm_identify(c, path("plain"), 0, "", 0, &g), -ENOTSUP);
    odm_fini(c);
    return 0;
}

static int t_resize(void) {
    odm_ctx_t *c = ctx_new();
    CHECK(c);
    odm_fid_t fid = 0;
    OK(odm_create(c, path("r1"), 1 << 20, 1, "", 0, &fid));
    uint64_t sz = 0;
    OK(odm_size(c, fid, &sz));
    CHECK_EQ(sz, 1 << 20);
    unsigned char *b = odm_alloc(c, 1 << 20);
    CHECK(b);
    fill(b, 1 << 20, 3);
    CHECK_EQ(io1(c, ODM_WRITE, fid, b, 1 << 20, 0), 1 << 20);
    OK(odm_resize(c, fid, 3 << 20));
    OK(odm_size(c, fid, &sz));
    CHECK_EQ(sz, 3 << 20);
    OK(odm_commit(c, fid));
    CHECK_EQ(disk_size("r1"), ODM_HEADER_BYTES + (3 << 20));
    memset(b, 0xff, 4096);
    CHECK_EQ(io1(c, ODM_READ, fid, b, 4096, (2 << 20) + 5), 4096);
    for (int i = 0; i < 4096; i++) CHECK_EQ(b[i], 0);
    OK(odm_resize(c, fid, 100));
    CHECK_EQ(disk_size("r1"), ODM_HEADER_BYTES + 100);
    CHECK_EQ(io1(c, ODM_READ, fid, b, 4096, 0), 100); /* short read at end of file */
    CHECK_EQ(io1(c, ODM_READ, fid, b, 4096, 100), 0);
    OK(odm_free(c, b));
    CHECK_EQ(odm_free(c, b), -EINVAL);
    OK(odm_unidentify(c, fid));
    CHECK_EQ(odm_resize(c, fid, 5), -EBADF);
    odm_fini(c);
    return 0;
}

/* Submit/wait semantics: specific waits, N of them, timeouts, argument errors, big I/Os
 * and memory that is not from odm_alloc. */
static int t_io_semantics(void) {
    odm_ctx_t *c = ctx_new();
    CHECK(c);
    odm_fid_t fid = 0;
    const size_t big = (9u << 20) + 512; /* above the largest single DAFS I/O (8 MiB): split */
    OK(odm_create(c, path("s1"), big, 1, "", 0, &fid));
    unsigned char *w = odm_alloc(c, big), *r = malloc(big);
    CHECK(w && r);
    fill(w, big, 4);
    CHECK_EQ(io1(c, ODM_WRITE, fid, w, big, 0), (long)big);
    memset(r, 0, big);
    CHECK_EQ(io1(c, ODM_READ, fid, r, big, 0), (long)big); /* plain memory: staged */
    CHECK(memcmp(r, w, big) == 0);
    odm_ioreq_t q[8];
    memset(q, 0, sizeof q);
    odm_ioreq_t *s[8], *done[8];
    for (int i = 0; i < 8; i++) {
        q[i].op = ODM_READ;
        q[i].fid = fid;
        q[i].buf = r + (size_t)i * 65536;
        q[i].len = 65536;
        q[i].offset = (uint64_t)(7 - i) * 65536;
        s[i] = &q[i];
    }
    unsigned n = 99;
    /* Wait for q[3] only; then for all the rest as completions (at least 7). */
    OK(odm_io(c, s, 8, &s[3], 1, NULL, 0, 0, NULL, -1));
    CHECK_EQ(q[3].state, ODM_REQ_DONE);
    CHECK_EQ(q[3].result, 65536);
    CHECK_EQ(odm_io(c, &s[5], 1, NULL, 0, NULL, 0, 0, NULL, 0), -EBUSY); /* unreported */
    OK(odm_io(c, NULL, 0, NULL, 0, done, 8, 7, &n, -1));
    CHECK_EQ(n, 7);
    for (unsigned i = 0; i < n; i++) CHECK(done[i] != &q[3] && done[i]->result == 65536);
    for (int i = 0; i < 8; i++)
        CHECK(memcmp(r + (size_t)i * 65536, w + (size_t)(7 - i) * 65536, 65536) == 0);
    /* Nothing in flight: returns at once with nothing. */
    OK(odm_io(c, NULL, 0, NULL, 0, done, 8, 1, &n, -1));
    CHECK_EQ(n, 0);
    /* Argument errors refuse the whole call, nothing submitted. */
    odm_ioreq_t bad = q[0];
    bad.op = 9;
    odm_ioreq_t *bs[2] = {&q[0], &bad};
    CHECK_EQ(odm_io(c, bs, 2, NULL, 0, NULL, 0, 0, NULL, 0), -EINVAL);
    CHECK_EQ(q[0].state, ODM_REQ_DONE);
    bad = q[0];
    bad.fid = fid + 1;
    CHECK_EQ(odm_io(c, bs, 2, NULL, 0, NULL, 0, 0, NULL, 0), -EBADF);
    odm_ioreq_t idle;
    memset(&idle, 0, sizeof idle);
    odm_ioreq_t *ws[1] = {&idle};
    CHECK_EQ(odm_io(c, NULL, 0, ws, 1, NULL, 0, 0, NULL, 0), -EINVAL);
    CHECK_EQ(odm_io(c, bs, 1, bs, 1, done, 1, 2, &n, 0), -EINVAL); /* min > max */
    /* Timeout 0 polls: a request stays PENDING or is DONE, never lost. */
    int e = odm_io(c, s, 4, s, 4, NULL, 0, 0, NULL, 0);
    CHECK(e == 0 || e == -ETIMEDOUT);
    OK(odm_io(c, NULL, 0, s, 4, NULL, 0, 0, NULL, -1));
    for (int i = 0; i < 4; i++) CHECK_EQ(q[i].result, 65536);
    /* ...and reported once: nothing left. */
    OK(odm_io(c, NULL, 0, NULL, 0, done, 8, 0, &n, 0));
    CHECK_EQ(n, 0);
    /* A buffer with I/O in flight cannot be freed; a file cannot be closed. */
    q[0].buf = w;
    e = odm_io(c, s, 1, NULL, 0, NULL, 0, 0, NULL, 0);
    OK(e);
    int fr = odm_free(c, w), ur = odm_unidentify(c, fid);
    OK(odm_io(c, NULL, 0, s, 1, NULL, 0, 0, NULL, -1));
    CHECK(fr == -EBUSY || fr == 0);
    CHECK(ur == -EBUSY || ur == 0);
    if (ur == -EBUSY) OK(odm_abort(c, fid));
    if (fr == -EBUSY) OK(odm_free(c, w));
    OK(odm_null(c)); /* a round trip (DAFS NULL; nothing locally) */
    odm_info_t info;
    OK(odm_info(c, &info));
    CHECK(info.ios >= 15);
    if (!strcmp(info.backend, "dafs")) /* staged and direct paths taken; the big I/Os split */
        CHECK(info.staged_ios >= 1 && info.direct_ios >= 1 && info.max_io_bytes < big);
    free(r);
    odm_fini(c);
    return 0;
}

/* Per-thread completions: threads submit tagged reads and writes and reap them in
 * different ways at once; every request a thread gets back must be its own, each
 * exactly once. */
#define NTHREADS 4
#define T_MS 10000 /* a lost completion fails the test instead of hanging it */
#define PER_THREAD 96
struct tharg { odm_ctx_t *c; odm_fid_t fid; int id; int bad; int got; };

static void *th_main(void *arg) {
    struct tharg *a = arg;
    odm_ioreq_t *q = calloc(PER_THREAD, sizeof *q);
    unsigned char *buf = odm_alloc(a->c, (size_t)PER_THREAD * 4096);
    int seen[PER_THREAD] = {0};
    if (!q || !buf) { a->bad = 1000; return NULL; }
    for (int i = 0; i < PER_THREAD; i++) {
        q[i].op = (i % 3) ? ODM_READ : ODM_WRITE;
        q[i].fid = a->fid;
        q[i].buf = buf + (size_t)i * 4096;
        q[i].len = 4096;
        /* each thread writes its own region, so reads can be checked */
        q[i].offset = (uint64_t)(a->id * PER_THREAD + i) * 4096;
        if (q[i].op == ODM_WRITE) memset(q[i].buf, a->id * 16 + 1, 4096);
        q[i].user = (void *)(uintptr_t)(a->id << 16 | i);
    }
    for (int base = 0; base < PER_THREAD; base += 16) {
        odm_ioreq_t *s[16], *out[32];
        for (int j = 0; j < 16; j++) s[j] = &q[base + j];
        unsigned n = 0;
        int e;
        switch ((base / 16 + a->id) % 3) {
        case 0: /* wait for all of them by name */
            e = odm_io(a->c, s, 16, s, 16, NULL, 0, 0, NULL, T_MS);
            if (e) a->bad++;
            for (int j = 0; j < 16; j++) seen[base + j]++;
            break;
        case 1: /* wait for N of them, then the rest */
            e = odm_io(a->c, s, 16, NULL, 0, out, 32, 5, &n, T_MS);
            unsigned total = n;
            for (unsigned k = 0; k < n; k++) {
                uintptr_t u = (uintptr_t)out[k]->user;
                if ((int)(u >> 16) != a->id) a->bad++;
                else seen[u & 0xffff]++;
            }
            while (!e && total < 16) {
                e = odm_io(a->c, NULL, 0, NULL, 0, out, 32, 1, &n, T_MS);
                for (unsigned k = 0; k < n; k++) {
                    uintptr_t u = (uintptr_t)out[k]->user;
                    if ((int)(u >> 16) != a->id) a->bad++;
                    else seen[u & 0xffff]++;
                }
                total += n;
                if (!n) break;
            }
            if (e || total != 16) a->bad++;
            break;
        default: /* poll in a loop */
            e = odm_io(a->c, s, 16, NULL, 0, NULL, 0, 0, NULL, 0);
            total = 0;
            time_t give_up = time(NULL) + T_MS / 1000;
            while (!e && total < 16 && time(NULL) < give_up) {
                n = 0;
                e = odm_io(a->c, NULL, 0, NULL, 0, out, 3, 0, &n, 0);
                for (unsigned k = 0; k < n; k++) {
                    uintptr_t u = (uintptr_t)out[k]->user;
                    if ((int)(u >> 16) != a->id) a->bad++;
                    else seen[u & 0xffff]++;
                }
                total += n;
                if (!n) sched_yield();
            }
            if (e && e != -ETIMEDOUT) a->bad++;
            break;
        }
    }
    for (int i = 0; i < PER_THREAD; i++) {
        if (seen[i] != 1 || q[i].result != 4096) a->bad++;
        a->got += seen[i];
    }
    /* Reads after the writes: every write of this thread landed. */
    for (int i = 0; i < PER_THREAD; i++) {
        q[i].op = ODM_READ;
        memset(q[i].buf, 0, 4096);
    }
    for (int base = 0; base < PER_THREAD; base += 16) {
        odm_ioreq_t *s[16];
        for (int j = 0; j < 16; j++) s[j] = &q[base + j];
        if (odm_io(a->c, s, 16, s, 16, NULL, 0, 0, NULL, T_MS)) a->bad++;
    }
    for (int i = 0; i < PER_THREAD; i += 3) /* the written ones */
        for (int k = 0; k < 4096; k++)
            if (buf[(size_t)i * 4096 + k] != (unsigned char)(a->id * 16 + 1)) { a->bad++; break; }
    odm_free(a->c, buf);
    free(q);
    return NULL;
}

struct xw { odm_ctx_t *c; odm_ioreq_t **s; int rc; };
static void *wait_foreign(void *arg) {
    struct xw *x = arg;
    x->rc = odm_io(x->c, NULL, 0, x->s, 1, NULL, 0, 0, NULL, 1000);
    return NULL;
}

static int t_per_thread_completions(void) {
    odm_ctx_t *c = ctx_new();
    CHECK(c);
    odm_fid_t fid = 0;
    OK(odm_create(c, path("t1"), (uint64_t)NTHREADS * PER_THREAD * 4096, 1, "", 0, &fid));
    pthread_t th[NTHREADS];
    struct tharg a[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        a[i] = (struct tharg){.c = c, .fid = fid, .id = i};
        CHECK_EQ(pthread_create(&th[i], NULL, th_main, &a[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < NTHREADS; i++) {
        if (a[i].bad) FAIL("thread %d: %d wrong completions or results", i, a[i].bad);
        CHECK_EQ(a[i].got, PER_THREAD);
    }
    /* Waiting for another thread's request is refused. */
    odm_ioreq_t r;
    memset(&r, 0, sizeof r);
    static unsigned char b[512];
    r.op = ODM_READ; r.fid = fid; r.buf = b; r.len = 512;
    odm_ioreq_t *s[1] = {&r};
    OK(odm_io(c, s, 1, NULL, 0, NULL, 0, 0, NULL, 0));
    struct xw x = {c, s, 0};
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, wait_foreign, &x), 0);
    pthread_join(t, NULL);
    CHECK_EQ(x.rc, -EPERM);
    OK(odm_io(c, NULL, 0, s, 1, NULL, 0, 0, NULL, -1));
    OK(odm_abort(c, fid));
    odm_fini(c);
    return 0;
}

struct test { const char *name; int (*fn)(void); };
static const struct test tests[] = {
    {"create_commit_visibility", t_create_commit_visibility},
    {"abort_and_crash_discard", t_abort_and_crash_discard},
    {"keys_and_types", t_keys_and_types},
    {"resize", t_resize},
    {"io_semantics", t_io_semantics},
    {"per_thread_completions", t_per_thread_completions},
};

int main(int argc, char **argv) {
    self_exe = argv[0];
    if (argc == 5 && !strcmp(argv[1], "--peer")) return peer_main(argv[2], argv[3], argv[4]);
    export_dir = getenv("ODM_EXPORT_DIR");
    if (!getenv("ODM_TARGET") || !export_dir) {
        fprintf(stderr, "test_odm: set ODM_BACKEND, ODM_TARGET, ODM_EXPORT_DIR\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "odm-%d", (int)getpid());
    char p[512];
    snprintf(p, sizeof p, "%s/%s", export_dir, dir);
    if (mkdir(p, 0755) != 0) {
        perror(p);
        return 2;
    }
    int passed = 0, failed = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (argc > 1 && !strstr(tests[i].name, argv[1])) continue;
        int r = tests[i].fn();
        printf("%s %s %s\n", r ? "FAIL" : "ok  ", getenv("ODM_LABEL") ? getenv("ODM_LABEL") : "",
               tests[i].name);
        fflush(stdout);
        if (r) failed++;
        else passed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
