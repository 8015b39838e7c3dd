/*
 * C tests of libdafs (include/dafs.h) against a real dafsd.
 *
 * Environment:
 *   DAFS_TARGET         host:port of a dafsd (required)
 *   DAFS_SHM_TARGET     dafs+shm:///path.sock of the same dafsd (shm tests skipped if unset)
 *   DAFS_VICTIM_TARGET  host:port of a second, disposable dafsd, and
 *   DAFS_VICTIM_PID     its pid: the connection-loss test kills it (skipped if unset)
 *
 * Usage: test_capi [NAME-SUBSTRING]   Prints one line per test and "N passed, N failed".
 * Every function declared in dafs.h is called somewhere in this file (a unit test of
 * the dafs-capi crate checks that).
 */
#define _GNU_SOURCE
#include <dafs.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* The ABI: struct layouts the Rust side mirrors (also asserted there). */
_Static_assert(sizeof(dafs_options_t) == 72, "dafs_options_t layout");
_Static_assert(sizeof(dafs_attr_t) == 88, "dafs_attr_t layout");
_Static_assert(sizeof(dafs_completion_t) == 24, "dafs_completion_t layout");
_Static_assert(sizeof(dafs_stats_t) == 208, "dafs_stats_t layout");
_Static_assert(sizeof(dafs_file_seg_t) == 16, "dafs_file_seg_t layout");
_Static_assert(sizeof(dafs_mem_seg_t) == 24, "dafs_mem_seg_t layout");
_Static_assert(sizeof(dafs_batch_io_t) == 48, "dafs_batch_io_t layout");
_Static_assert(sizeof(dafs_lock_info_t) == 32, "dafs_lock_info_t layout");
_Static_assert(sizeof(dafs_region_t) == 8 && sizeof(dafs_cg_t) == 4, "id types");

static const char *tcp_target, *shm_target;
static char dir[64]; /* this run's scratch directory inside the export */

#define FAIL(...)                                                                   \
    do {                                                                            \
        fprintf(stderr, "    %s:%d: ", __FILE__, __LINE__);                         \
        fprintf(stderr, __VA_ARGS__);                                               \
        fprintf(stderr, "\n");                                                      \
        return 1;                                                                   \
    } while (0)
#define CHECK(c)                                                                    \
    do {                                                                            \
        if (!(c)) FAIL("check failed: %s", #c);                                     \
    } while (0)
#define CHECK_EQ(a, b)                                                              \
    do {                                                                            \
        long long _a = (long long)(a), _b = (long long)(b);                         \
        if (_a != _b)                                                               \
            FAIL("%s = %lld (%s), expected %s = %lld", #a, _a,                     \
                 _a < 0 ? dafs_strerror((int)_a) : "", #b, _b);                     \
    } while (0)
#define OK(expr) CHECK_EQ((expr), 0)

static char *path(const char *name) {
    static char buf[8][256];
    static int i;
    char *p = buf[i++ % 8];
    snprintf(p, 256, "%s/%s", dir, name);
    return p;
}

static dafs_client_t *connect_tcp(void) {
    dafs_options_t o = {0};
    o.provider = DAFS_PROVIDER_TCP;
    dafs_client_t *c = NULL;
    int r = dafs_connect(tcp_target, &o, &c);
    if (r != 0) fprintf(stderr, "    connect %s: %s\n", tcp_target, dafs_strerror(r));
    return c;
}

static void fill(unsigned char *p, size_t n, unsigned seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        p[i] = (unsigned char)x;
    }
}

/* ---------------------------------------------------------------------------------- */

static int t_version_and_strerror(void) {
    CHECK(strcmp(dafs_version(), DAFS_VERSION) == 0);
    CHECK(strcmp(dafs_strerror(-ENOENT), "No such file or directory") == 0);
    CHECK(dafs_strerror(ENOENT) == dafs_strerror(-ENOENT));
    CHECK(strcmp(dafs_strerror(0), "Success") == 0);
    CHECK(strcmp(dafs_strerror(123456), "unknown error") == 0);
    CHECK(DAFS_API_VERSION >= 1);
    return 0;
}

static int t_connect_errors(void) {
    dafs_client_t *c = (dafs_client_t *)1;
    CHECK_EQ(dafs_connect(NULL, NULL, &c), -EINVAL);
    CHECK(c == NULL);
    CHECK_EQ(dafs_connect(tcp_target, NULL, NULL), -EINVAL);
    c = (dafs_client_t *)1;
    int r = dafs_connect("127.0.0.1:1", NULL, &c);
    CHECK(r < 0);
    CHECK(c == NULL);
    dafs_options_t o = {0};
    o.provider = 7;
    CHECK_EQ(dafs_connect(tcp_target, &o, &c), -EINVAL);
    o.provider = DAFS_PROVIDER_TCP;
    o.reserved[2] = 1;
    CHECK_EQ(dafs_connect(tcp_target, &o, &c), -EINVAL);
    o.reserved[2] = 0;
    o.secret_file = "/nonexistent/dafs-secret";
    CHECK_EQ(dafs_connect(tcp_target, &o, &c), -ENOENT);
    /* A secret the server does not ask for: the client refuses the server. */
    char sf[] = "/tmp/dafs-capi-secret-XXXXXX";
    int fd = mkstemp(sf);
    CHECK(fd >= 0);
    CHECK(write(fd, "short\n", 6) == 6);
    close(fd);
    o.secret_file = sf;
    CHECK_EQ(dafs_connect(tcp_target, &o, &c), -EINVAL); /* shorter than 8 bytes */
    fd = open(sf, O_WRONLY | O_TRUNC);
    CHECK(fd >= 0);
    CHECK(write(fd, "a-long-enough-secret\n", 21) == 21);
    close(fd);
    CHECK_EQ(dafs_connect(tcp_target, &o, &c), -EACCES);
    unlink(sf);
    o.secret_file = NULL;
    o.export_name = "no-such-export";
    CHECK(dafs_connect(tcp_target, &o, &c) < 0);
    CHECK(c == NULL);
    CHECK_EQ(dafs_disconnect(NULL), 0);
    return 0;
}

static int t_connect_tcp_and_queries(void) {
    dafs_options_t o = {0};
    o.provider = DAFS_PROVIDER_TCP;
    o.client_id = "test_capi";
    o.slots = 8;
    o.connect_timeout_ms = 2000;
    dafs_client_t *c = NULL;
    OK(dafs_connect(tcp_target, &o, &c));
    CHECK(c != NULL);
    CHECK(strcmp(dafs_provider(c), "tcp") == 0);
    CHECK(dafs_inline_threshold(c) > 0);
    CHECK(dafs_max_io_size(c) >= dafs_inline_threshold(c));
    CHECK(dafs_slots(c) >= 1 && dafs_slots(c) <= 8);
    OK(dafs_null(c));
    dafs_stats_t s;
    OK(dafs_stats(c, &s));
    CHECK(s.requests >= 1 && s.msgs_sent >= 1 && s.msgs_received >= 1);
    CHECK_EQ(dafs_stats(c, NULL), -EINVAL);
    CHECK(strcmp(dafs_provider(NULL), "") == 0);
    CHECK_EQ(dafs_inline_threshold(NULL), 0);
    CHECK_EQ(dafs_max_io_size(NULL), 0);
    CHECK_EQ(dafs_slots(NULL), 0);
    OK(dafs_disconnect(c));
    return 0;
}

static int t_connect_shm(void) {
    if (!shm_target) {
        fprintf(stderr, "    (DAFS_SHM_TARGET unset: only the auto check)\n");
    }
    /* host:port with the default provider switches to shared memory on this host when
     * the server offers it. */
    dafs_client_t *c = NULL;
    OK(dafs_connect(tcp_target, NULL, &c));
    const char *p = dafs_provider(c);
    CHECK(strcmp(p, shm_target ? "shm" : p) == 0);
    OK(dafs_null(c));
    OK(dafs_disconnect(c));
    if (shm_target) {
        OK(dafs_connect(shm_target, NULL, &c));
        CHECK(strcmp(dafs_provider(c), "shm") == 0);
        OK(dafs_null(c));
        OK(dafs_disconnect(c));
    }
    return 0;
}

static int blocking_roundtrip(dafs_client_t *c, const char *name) {
    dafs_file_t *f = NULL;
    OK(dafs_open(c, path(name), DAFS_O_RDWR | DAFS_O_CREAT | DAFS_O_TRUNC, 0644, &f));
    CHECK(f != NULL);
    size_t big = 3 * dafs_max_io_size(c) + 12345; /* split into pipelined chunks */
    unsigned char *w = malloc(big), *r = malloc(big);
    CHECK(w && r);
    fill(w, big, 1);
    /* small (inline) and large (direct) */
    CHECK_EQ(dafs_pwrite(c, f, w, 100, 0), 100);
    CHECK_EQ(dafs_pread(c, f, r, 100, 0), 100);
    CHECK(memcmp(w, r, 100) == 0);
    CHECK_EQ(dafs_pwrite(c, f, w, big, 0), (long long)big);
    memset(r, 0, big);
    CHECK_EQ(dafs_pread(c, f, r, big, 0), (long long)big);
    CHECK(memcmp(w, r, big) == 0);
    /* short read at EOF, 0 past it, 0-length calls */
    CHECK_EQ(dafs_pread(c, f, r, 1000, big - 10), 10);
    CHECK_EQ(dafs_pread(c, f, r, 1000, big + 10), 0);
    CHECK_EQ(dafs_pread(c, f, NULL, 0, 0), 0);
    CHECK_EQ(dafs_pwrite(c, f, NULL, 0, 0), 0);
    CHECK_EQ(dafs_pread(c, f, NULL, 10, 0), -EINVAL);
    dafs_attr_t a;
    OK(dafs_fstat(c, f, &a));
    CHECK_EQ(a.size, big);
    CHECK_EQ(a.type, DAFS_TYPE_REG);
    CHECK_EQ(a.mode & 0777, 0644);
    CHECK_EQ(dafs_fstat(c, f, NULL), -EINVAL);
    /* ftruncate: cut, then extend with zeros, by the open file */
    OK(dafs_ftruncate(c, f, 50));
    OK(dafs_fstat(c, f, &a));
    CHECK_EQ(a.size, 50);
    OK(dafs_ftruncate(c, f, 200));
    CHECK_EQ(dafs_pread(c, f, r, 200, 0), 200);
    CHECK(memcmp(w, r, 50) == 0 && r[50] == 0 && r[199] == 0);
    CHECK_EQ(dafs_ftruncate(c, f, (uint64_t)INT64_MAX + 1), -EINVAL);
    CHECK_EQ(dafs_pwrite(c, f, w, big, 0), (long long)big);
    OK(dafs_fsync(c, f));
    dafs_stats_t s;
    OK(dafs_stats(c, &s));
    CHECK(s.direct_reads > 0 && s.direct_writes > 0 && s.inline_reads > 0 && s.inline_writes > 0);
    CHECK(s.off_direct_path >= 2); /* big unregistered buffers: registered per call */
    OK(dafs_close(c, f));
    free(w);
    free(r);
    return 0;
}

static int t_blocking_io_tcp(void) {
    dafs_client_t *c = connect_tcp();
    CHECK(c);
    if (blocking_roundtrip(c, "blocking-tcp")) return 1;
    OK(dafs_disconnect(c));
    return 0;
}

static int t_blocking_io_shm(void) {
    dafs_client_t *c = NULL;
    OK(dafs_connect(shm_target ? shm_target : tcp_target, NULL, &c));
    if (blocking_roundtrip(c, "blocking-shm")) return 1;
    OK(dafs_disconnect(c));
    return 0;
}

static int t_open_flags(void) {
    dafs_client_t *c = connect_tcp();
    CHECK(c);
    dafs_file_t *f = (dafs_file_t *)1;
    CHECK_EQ(dafs_open(c, path("missing"), DAFS_O_RDONLY, 0, &f), -ENOENT);
    CHECK(f == NULL);
    CHECK_EQ(dafs_open(c, path("x"), DAFS_O_ACCMODE, 0, &f), -EINVAL);
    CHECK_EQ(dafs_open(c, path("x"), DAFS_O_RDWR | 0x100000, 0, &f), -EINVAL);
    CHECK_EQ(dafs_open(c, NULL, DAFS_O_RDONLY, 0, &f), -EINVAL);
    CHECK_EQ(dafs_open(c, path("x"), DAFS_O_RDONLY, 0, NULL), -EINVAL);
    OK(dafs_open(c, path("flags"), DAFS_O_WRONLY | DAFS_O_CREAT | DAFS_O_EXCL, 0600, &f));
    CHECK_EQ(dafs_pwrite(c, f, "abcdef", 6, 0), 6);
    char b[8];
    CHECK(dafs_pread(c, f, b, 6, 0) < 0); /* opened write-only */
    OK(dafs_close(c, f));
    CHECK_EQ(dafs_open(c, path("flags"), DAFS_O_RDWR | DAFS_O_CREAT | DAFS_O_EXCL, 0600, &f), -EEXIST);
    OK(dafs_open(c, path("flags"), DAFS_O_RDONLY, 0, &f));
    CHECK_EQ(dafs_pread(c, f, b, 8, 0), 6);
    CHECK(memcmp(b, "abcdef", 6) == 0);
    CHECK(dafs_pwrite(c, f, "zz", 2, 0) < 0); /* opened read-only */
    OK(dafs_close(c, f));
    /* O_* values work too (same numbers on Linux) */
    OK(dafs_open(c, path("flags"), O_RDWR | O_TRUNC, 0, &f));
    dafs_attr_t a;
    OK(dafs_fstat(c, f, &a));
    CHECK_EQ(a.size, 0);
    OK(dafs_close(c, f));
    OK(dafs_disconnect(c));
    return 0;
}

static int registered_async(dafs_client_t *c, const char *name) {
    const size_t chunk = 1 << 20, n = 4;
    if (chunk > dafs_max_io_size(c)) FAIL("max_io_size %zu too small", dafs_max_io_size(c));
    unsigned char *mem = NULL;
    dafs_region_t reg;
    OK(dafs_alloc_registered(c, 2 * n * chunk, (void **)&mem, &reg));
    CHECK(mem != NULL);
    CHECK(((uintptr_t)mem & 4095) == 0);
    for (size_t i = 0; i < 2 * n * chunk; i += 4096) CHECK(mem[i] == 0); /* zeroed */
    fill(mem, n * chunk, 7);
    dafs_cg_t cg;
    OK(dafs_cg_create(c, &cg));
    CHECK(cg != 0);
    dafs_file_t *f;
    OK(dafs_open(c, path(name), DAFS_O_RDWR | DAFS_O_CREAT | DAFS_O_TRUNC, 0644, &f));
    dafs_stats_t before, after;
    OK(dafs_stats(c, &before));
    for (size_t i = 0; i < n; i++)
        OK(dafs_pwrite_nb(c, f, cg, reg, i * chunk, chunk, i * chunk, 100 + i));
    dafs_completion_t cq[8];
    int got = 0, seen = 0;
    while (got < (int)n) {
        int k = dafs_cg_wait(c, cg, 1, 8, -1, cq);
        CHECK(k >= 1);
        for (int j = 0; j < k; j++) {
            CHECK_EQ(cq[j].result, chunk);
            CHECK(cq[j].user_data >= 100 && cq[j].user_data < 100 + n);
            seen |= 1 << (cq[j].user_data - 100);
        }
        got += k;
    }
    CHECK_EQ(seen, (1 << n) - 1);
    CHECK_EQ(dafs_cg_outstanding(c, cg), 0);
    /* read back into the second half, plus a read crossing EOF */
    for (size_t i = 0; i < n; i++)
        OK(dafs_pread_nb(c, f, cg, reg, (n + i) * chunk, chunk, i * chunk, 200 + i));
    got = 0;
    while (got < (int)n) {
        int k = dafs_cg_wait(c, cg, (unsigned)(n - got), 8, 10000, cq);
        CHECK(k >= 1);
        for (int j = 0; j < k; j++) CHECK_EQ(cq[j].result, chunk);
        got += k;
    }
    CHECK(memcmp(mem, mem + n * chunk, n * chunk) == 0);
    OK(dafs_pread_nb(c, f, cg, reg, 0, chunk, n * chunk - 100, 300));
    CHECK_EQ(dafs_cg_wait(c, cg, 1, 1, -1, cq), 1);
    CHECK_EQ(cq[0].result, 100);
    CHECK_EQ(cq[0].user_data, 300);
    CHECK(cq[0].flags & DAFS_CQE_EOF);
    OK(dafs_stats(c, &after));
    CHECK(after.direct_writes - before.direct_writes == n);
    CHECK(after.direct_reads - before.direct_reads == n + 1);
    CHECK_EQ(after.off_direct_path, before.off_direct_path); /* all registered */
    /* out of range / too large / bad ids */
    CHECK_EQ(dafs_pread_nb(c, f, cg, reg, 2 * n * chunk - 10, 11, 0, 0), -EINVAL);
    CHECK_EQ(dafs_pread_nb(c, f, cg, reg + 999, 0, 10, 0, 0), -EINVAL);
    CHECK_EQ(dafs_pread_nb(c, f, cg + 999, reg, 0, 10, 0, 0), -EINVAL);
    CHECK_EQ(dafs_pread_nb(c, f, 0, reg, 0, 10, 0, 0), -EINVAL);
    OK(dafs_close(c, f));
    OK(dafs_cg_destroy(c, cg));
    OK(dafs_unregister(c, reg));
    CHECK_EQ(dafs_unregister(c, reg), -EINVAL);
    return 0;
}

static int t_registered_async_tcp(void) {
    dafs_client_t *c = connect_tcp();
    CHECK(c);
    if (registered_async(c, "async-tcp")) return 1;
    OK(dafs_disconnect(c));
    return 0;
}

static int t_registered_async_shm(void) {
    dafs_client_t *c = NULL;
    OK(dafs_connect(shm_target ? shm_target : tcp_target, NULL, &c));
    if (registered_async(c, "async-shm")) return 1;
    dafs_stats_t s;
    OK(dafs_stats(c, &s));
    if (shm_target) CHECK_EQ(s.vm_registrations, 0); /* alloc_registered memory is shared */
    OK(dafs_disconnect(c));
    return 0;
}

static int user_memory(dafs_client_t *c, const char *name) {
    const size_t len = 2 << 20;
    unsigned char *buf = NULL;
    CHECK(posix_memalign((void **)&buf, 4096, 2 * len) == 0);
    fill(buf, len, 3);
    memset(buf + len, 0, len);
    dafs_region_t reg;
    CHECK_EQ(dafs_register(c, NULL, len, &reg), -EINVAL);
    CHECK_EQ(dafs_register(c, buf, 0, &reg), -EINVAL);
    OK(dafs_register(c, buf, 2 * len, &reg));
    dafs_cg_t cg;
    OK(dafs_cg_create(c, &cg));
    dafs_file_t *f;
    OK(dafs_open(c, path(name), DAFS_O_RDWR | DAFS_O_CREAT | DAFS_O_TRUNC, 0644, &f));
    size_t half = len / 2;
    OK(dafs_pwrite_nb(c, f, cg, reg, 0, half, 0, 1));
    OK(dafs_pwrite_nb(c, f, cg, reg, half, half, half, 2));
    dafs_completion_t cq[4];
    int got = 0;
    while (got < 2) {
        int k = dafs_cg_wait(c, cg, 2 - got, 4, -1, cq + got);
        CHECK(k >= 1);
        got += k;
    }
    CHECK_EQ(cq[0].result, half);
    CHECK_EQ(cq[1].result, half);
    OK(dafs_pread_nb(c, f, cg, reg, len, len, 0, 3));
    CHECK_EQ(dafs_cg_wait(c, cg, 1, 4, -1, cq), 1);
    CHECK_EQ(cq[0].result, len);
    CHECK(memcmp(buf, buf + len, len) == 0);
    OK(dafs_close(c, f));
    OK(dafs_cg_destroy(c, cg));
    OK(dafs_unregister(c, reg));
    free(buf); /* the caller's again after unregister */
    return 0;
}

static int t_register_user_memory_tcp(void) {
    dafs_client_t *c = connect_tcp();
    CHECK(c);
    if (user_memory(c, "user-tcp")) return 1;
    OK(dafs_disconnect(c));
    return 0;
}

static int t_register_user_memory_shm(void) {
    dafs_client_t *c = NULL;
    OK(dafs_connect(shm_target ? shm_target : tcp_target, NULL, &c));
    if (user_memory(c, "user-shm")) return 1;
    OK(dafs_disconnect(c));
    return 0;
}

static int t_busy_region_and_group(void) {
    dafs_client_t *c = connect_tcp();
    CHECK(c);
    void *mem;
    dafs_region_t reg;
    OK(dafs_alloc_registered(c, 1 << 20, &mem, &reg));
    dafs_cg_t cg;
    OK(dafs_cg_create(c, &cg));
    dafs_file_t *f;
    OK(dafs_open(c, path("busy"), DAFS_O_RDWR | DAFS_O_CREAT, 0644, &f));
    OK(dafs_pwrite_nb(c, f, cg, reg, 0, 1 << 20, 0, 9));
    CHECK_EQ(dafs_unregister(c, reg), -EBUSY);
    CHECK_EQ(dafs_cg_destroy(c, cg), -EBUSY);
    dafs_completion_t cq;
    /* wait for the completion to arrive without reaping it: outstanding drops to 0 */
    for (int i = 0; i < 10000 && dafs_cg_outstanding(c, cg) > 0; i++) {
        CHECK_EQ(dafs_cg_wait(c, cg, 0, 0, 0, &cq), 0);
        (void)dafs_null(c); /* progress */
    }
    CHECK_EQ(dafs_cg_outstanding(c, cg), 0);
    CHECK_EQ(dafs_cg_destroy(c, cg), -EBUSY); /* unreaped completion */
    CHECK_EQ(dafs_cg_poll(c, cg, &cq, 1), 1);
    CHECK_EQ(cq.user_data, 9);
    CHECK_EQ(cq.result, 1 << 20);
    CHECK_EQ(dafs_cg_poll(c, cg, &cq, 1), 0);
    OK(dafs_unregister(c, reg));
    OK(dafs_cg_destroy(c, cg));
    CHECK_EQ(dafs_cg_destroy(c, cg), -EINVAL);
    OK(dafs_close(c, f));
    OK(dafs_disconnect(c));
    return 0;
}

static int t_cg_argument_errors(void) {
    dafs_client_t *c = connect_tcp();
    CHECK(c);
    dafs_completion_t cq[2];
    dafs_cg_t cg;
    CHECK_EQ(dafs_cg_create(c, NULL), -EINVAL);
    OK(dafs_cg_create(c, &cg));
    CHECK_EQ(dafs_cg_poll(c, 0, cq, 2), -EINVAL);
    CHECK_EQ(dafs_cg_wait(c, 0, 1, 2, 0, cq), -EINVAL);
    CHECK_EQ(dafs_cg_poll(c, cg + 1000, cq, 2), -EINVAL);
    CHECK_EQ(dafs_cg_outstanding(c, 0), -EINVAL);
    CHECK_EQ(dafs_cg_destroy(c, 0), -EINVAL);
    CHECK_EQ(dafs_cg_wait(c, cg, 3, 2, 0, cq), -EINVAL);
    CHECK_EQ(dafs_cg_poll(c, cg, NULL, 2), -EINVAL);
    CHECK_EQ(dafs_cg_poll(c, cg, cq, 0), 0);
    /* nothing in flight: waiting for one returns 0 at once, with or without timeout */
    CHECK_EQ(dafs_cg_wait(c, cg, 1, 2, -1, cq), 0);
    CHECK_EQ(dafs_cg_wait(c, cg, 1, 2, 50, cq), 0);
    OK(dafs_cg_destroy(c, cg));
    OK(dafs_disconnect(c));
    return 0;
}

/* At most 1024 completion groups at once: one more is -EMFILE until one is destroyed. */
static int t_cg_limit(void) {
    enum { GROUPS_MAX = 1024 };
    dafs_client_t *c = connect_tcp();
    CHECK(c);
    static dafs_cg_t cgs[GROUPS_MAX];
    for (int i = 0; i < GROUPS_MAX; i++) OK(dafs_cg_create(c, &cgs[i]));
    dafs_cg_t extra;
    CHECK_EQ(dafs_cg_create(c, &extra), -EMFILE);
    OK(dafs_cg_destroy(c, cgs[0]));
    OK(dafs_cg_create(c, &cgs[0]));
    CHECK_EQ(dafs_cg_create(c, &extra), -EMFILE);
    for (int i = 0; i < GROUPS_MAX; i++) OK(dafs_cg_destroy(c, cgs[i]));
    OK(dafs_disconnect(c));
    return 0;
}

static int t_nb_plain_buffers(void) {
    dafs_client_t *c = NULL;
    OK(dafs_connect(shm_target ? shm_target : tcp_target, NULL, &c));
    dafs_cg_t cg;
    OK(dafs_cg_create(c, &cg));
    dafs_file_t *f;
    OK(dafs_open(c, path("nbbuf"), DAFS_O_RDWR | DAFS_O_CREAT | DAFS_O_TRUNC, 0644, &f));
    size_t small = 1000, big = dafs_max_io_size(c);
    unsigned char *w = malloc(big), *r1 = malloc(small), *r2 = malloc(big), *ref = malloc(big);
    CHECK(w && r1 && r2 && ref);
    fill(ref, big, 11);
    memcpy(w, ref, big);
    OK(dafs_pwrite_nb_buf(c, f, cg, w, big, 0, 1));
    memset(w, 0xAA, big); /* copied at submit: reuse at once */
    dafs_completion_t cq[4];
    CHECK_EQ(dafs_cg_wait(c, cg, 1, 4, -1, cq), 1);
    CHECK_EQ(cq[0].result, big);
    memset(r1, 0, small);
    memset(r2, 0, big);
    OK(dafs_pread_nb_buf(c, f, cg, r1, small, 5, 2));
    OK(dafs_pread_nb_buf(c, f, cg, r2, big, 0, 3));
    int got = 0;
    while (got < 2) {
        int k = dafs_cg_wait(c, cg, 1, 4, -1, cq);
        CHECK(k >= 1);
        for (int j = 0; j < k; j++) {
            if (cq[j].user_data == 2) CHECK_EQ(cq[j].result, small);
            else CHECK_EQ(cq[j].result, big);
        }
        got += k;
    }
    CHECK(memcmp(r1, ref + 5, small) == 0);
    CHECK(memcmp(r2, ref, big) == 0);
    /* read across EOF: short, EOF flag */
    OK(dafs_pread_nb_buf(c, f, cg, r1, small, big - 10, 4));
    CHECK_EQ(dafs_cg_wait(c, cg, 1, 1, -1, cq), 1);
    CHECK_EQ(cq[0].result, 10);
    CHECK(cq[0].flags & DAFS_CQE_EOF);
    CHECK(memcmp(r1, ref + big - 10, 10) == 0);
    CHECK_EQ(dafs_pread_nb_buf(c, f, cg, r2, big + 1, 0, 5), -EINVAL);
    CHECK_EQ(dafs_pwrite_nb_buf(c, f, cg, NULL, 10, 0, 5), -EINVAL);
    OK(dafs_close(c, f));
    OK(dafs_cg_destroy(c, cg));
    OK(dafs_disconnect(c));
    free(w); free(r1); free(r2); free(ref);
    return 0;
}

static int t_eagain_when_slots_run_out(void) {
    dafs_options_t o = {0};
    o.provider = DAFS_PROVIDER_TCP;
    o.slots = 2;
    dafs_client_t *c = NULL;
    OK(dafs_connect(tcp_target, &o, &c));
    CHECK(dafs_slots(c) <= 2);
    void *mem;
    dafs_region_t reg;
    OK(dafs_alloc_registered(c, 8 << 20, &mem, &reg));
    dafs_cg_t cg;
    OK(dafs_cg_create(c, &cg));
    dafs_file_t *f;
    OK(dafs_open(c, path("eagain"), DAFS_O_RDWR | DAFS_O_CREAT, 0644, &f));
    size_t chunk = dafs_max_io_size(c) < (1u << 20) ? dafs_max_io_size(c) : (1u << 20);
    int submitted = 0, r = 0;
    for (int i = 0; i < 1000; i++) {
        r = dafs_pwrite_nb(c, f, cg, reg, (size_t)(i % 8) * chunk, chunk, (uint64_t)(i % 8) * chunk, (uint64_t)i);
        if (r != 0) break;
        submitted++;
    }
    CHECK_EQ(r, -EAGAIN);
    dafs_stats_t s;
    OK(dafs_stats(c, &s));
    CHECK(s.slot_waits >= 1);
    dafs_completion_t cq[16];
    int got = 0;
    while (got < submitted) {
        int k = dafs_cg_wait(c, cg, 1, 16, -1, cq);
        CHECK(k >= 1);
        for (int j = 0; j < k; j++) CHECK_EQ(cq[j].result, chunk);
        got += k;
    }
    OK(dafs_pwrite_nb(c, f, cg, reg, 0, 10, 0, 0)); /* slots free again */
    CHECK_EQ(dafs_cg_wait(c, cg, 1, 1, -1, cq), 1);
    OK(dafs_close(c, f));
    OK(dafs_disconnect(c)); /* region and group released with the client */
    return 0;
}

static int t_bad_file_handles(void) {
    dafs_client_t *a = connect_tcp(), *b = connect_tcp();
    CHECK(a && b);
    dafs_file_t *f;
    OK(dafs_open(a, path("handles"), DAFS_O_RDWR | DAFS_O_CREAT, 0644, &f));
    char x = 0;
    CHECK_EQ(dafs_pread(b, f, &x, 1, 0), -EBADF); /* another client's file */
    CHECK_EQ(dafs_close(b, f), -EBADF);
    CHECK_EQ(dafs_fsync(a, NULL), -EBADF);
    OK(dafs_close(a, f));
    CHECK_EQ(dafs_close(a, f), -EBADF); /* double close: refused, not a crash */
    CHECK_EQ(dafs_pwrite(a, f, &x, 1, 0), -EBADF);
    dafs_cg_t cg;
    OK(dafs_cg_create(a, &cg));
    CHECK_EQ(dafs_pwrite_nb_buf(a, f, cg, &x, 1, 0, 0), -EBADF);
    /* a file left open is freed by dafs_disconnect */
    OK(dafs_open(a, path("handles"), DAFS_O_RDONLY, 0, &f));
    OK(dafs_disconnect(a));
    OK(dafs_disconnect(b));
    return 0;
}

struct listing { int n, saw_sub, saw_file; dafs_client_t *c; int reentrant_ok; };

static int count_entry(void *arg, const char *name, uint64_t fileid, uint32_t type) {
    struct listing *l = arg;
    l->n++;
    if (strcmp(name, "sub") == 0 && type == DAFS_TYPE_DIR) l->saw_sub = 1;
    if (strcmp(name, "f2") == 0 && type == DAFS_TYPE_REG && fileid != 0) {
        l->saw_file = 1;
        /* re-entrant: the callback may use the same client */
        dafs_attr_t a;
        char p[300];
        snprintf(p, sizeof p, "%s/meta/f2", dir);
        l->reentrant_ok = dafs_stat(l->c, p, &a) == 0 && a.size == 3;
    }
    return 0;
}

static int stop_early(void *arg, const char *name, uint64_t fileid, uint32_t type) {
    (void)name; (void)fileid; (void)type;
    ++*(int *)arg;
    return 42;
}

static int t_metadata(void) {
    dafs_client_t *c = connect_tcp();
    CHECK(c);
    dafs_attr_t a;
    OK(dafs_mkdir(c, path("meta"), 0755));
    CHECK_EQ(dafs_mkdir(c, path("meta"), 0755), -EEXIST);
    OK(dafs_stat(c, path("meta"), &a));
    CHECK_EQ(a.type, DAFS_TYPE_DIR);
    OK(dafs_mkdir(c, path("meta/sub"), 0700));
    dafs_file_t *f;
    OK(dafs_open(c, path("meta/f1"), DAFS_O_RDWR | DAFS_O_CREAT, 0640, &f));
    CHECK_EQ(dafs_pwrite(c, f, "abc", 3, 0), 3);
    OK(dafs_close(c, f));
    OK(dafs_rename(c, path("meta/f1"), path("meta/f2")));
    CHECK_EQ(dafs_stat(c, path("meta/f1"), &a), -ENOENT);
    OK(dafs_lstat(c, path("meta/f2"), &a));
    CHECK_EQ(a.size, 3);
    CHECK_EQ(a.mode, 0640);
    CHECK(a.mtime_ns > 0 && a.nlink == 1);
    struct listing l = {0};
    l.c = c;
    CHECK_EQ(dafs_readdir(c, path("meta"), count_entry, &l), 2);
    CHECK(l.n == 2 && l.saw_sub && l.saw_file && l.reentrant_ok);
    int calls = 0;
    CHECK_EQ(dafs_readdir(c, path("meta"), stop_early, &calls), 42);
    CHECK_EQ(calls, 1);
    CHECK_EQ(dafs_readdir(c, path("meta/f2"), count_entry, &l), -ENOTDIR);
    CHECK_EQ(dafs_readdir(c, path("nope"), count_entry, &l), -ENOENT);
    CHECK_EQ(dafs_readdir(c, path("meta"), NULL, &l), -EINVAL);
    OK(dafs_truncate(c, path("meta/f2"), 1 << 20));
    OK(dafs_stat(c, path("meta/f2"), &a));
    CHECK_EQ(a.size, 1 << 20);
    OK(dafs_truncate(c, path("meta/f2"), 1));
    OK(dafs_stat(c, path("meta/f2"), &a));
    CHECK_EQ(a.size, 1);
    CHECK_EQ(dafs_rmdir(c, path("meta")), -ENOTEMPTY);
    CHECK_EQ(dafs_unlink(c, path("meta/sub")), -EISDIR);
    OK(dafs_unlink(c, path("meta/f2")));
    CHECK_EQ(dafs_unlink(c, path("meta/f2")), -ENOENT);
    OK(dafs_rmdir(c, path("meta/sub")));
    OK(dafs_rmdir(c, path("meta")));
    CHECK_EQ(dafs_stat(c, path("meta"), &a), -ENOENT);
    CHECK_EQ(dafs_stat(c, NULL, &a), -EINVAL);
    CHECK_EQ(dafs_stat(c, path("x"), NULL), -EINVAL);
    CHECK_EQ(dafs_mkdir(c, "\xff\xfe", 0755), -EINVAL); /* not UTF-8 */
    OK(dafs_disconnect(c));
    return 0;
}

struct hammer { dafs_client_t *c; int ok, busy, other; };

static void *hammer_thread(void *arg) {
    struct hammer *h = arg;
    for (int i = 0; i < 300; i++) {
        int r = dafs_null(h->c);
        if (r == 0) h->ok++;
        else if (r == -EBUSY) h->busy++;
        else h->other++;
    }
    return NULL;
}

static int t_concurrent_misuse_is_refused(void) {
    /* Two threads on one client is a caller bug: every call must either work or be
     * refused with -EBUSY, never corrupt the session. */
    dafs_client_t *c = connect_tcp();
    CHECK(c);
    struct hammer h[2] = {{c, 0, 0, 0}, {c, 0, 0, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&t[i], NULL, hammer_thread, &h[i]) == 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    CHECK_EQ(h[0].other + h[1].other, 0);
    CHECK_EQ(h[0].ok + h[0].busy + h[1].ok + h[1].busy, 600);
    CHECK(h[0].ok + h[1].ok > 0);
    fprintf(stderr, "    (%d calls ran, %d refused with -EBUSY)\n", h[0].ok + h[1].ok, h[0].busy + h[1].busy);
    OK(dafs_null(c)); /* still healthy */
    OK(dafs_disconnect(c));
    return 0;
}

static int t_connection_loss(void) {
    const char *vt = getenv("DAFS_VICTIM_TARGET"), *vp = getenv("DAFS_VICTIM_PID");
    if (!vt || !vp) {
        fprintf(stderr, "    (DAFS_VICTIM_TARGET/DAFS_VICTIM_PID unset: skipped)\n");
        return 0;
    }
    signal(SIGPIPE, SIG_IGN);
    dafs_options_t o = {0};
    o.provider = DAFS_PROVIDER_TCP;
    dafs_client_t *c = NULL;
    OK(dafs_connect(vt, &o, &c));
    dafs_file_t *f;
    OK(dafs_open(c, "victim", DAFS_O_RDWR | DAFS_O_CREAT, 0644, &f));
    void *mem;
    dafs_region_t reg;
    OK(dafs_alloc_registered(c, 1 << 20, &mem, &reg));
    dafs_cg_t cg;
    OK(dafs_cg_create(c, &cg));
    CHECK(kill((pid_t)atoi(vp), SIGKILL) == 0);
    usleep(200 * 1000);
    /* The loss shows up either at submit or as failed completions: -ENOTCONN, or the
     * OS's code for the call that saw it. */
#define LOST(e) ((e) == -ENOTCONN || (e) == -ECONNRESET || (e) == -EPIPE)
    int r = dafs_pwrite_nb(c, f, cg, reg, 0, 1 << 20, 0, 1);
    if (r == 0) {
        dafs_completion_t cq;
        int k = dafs_cg_wait(c, cg, 1, 1, 5000, &cq);
        if (k == 1) CHECK(LOST(cq.result));
        else CHECK(LOST(k));
    } else {
        CHECK(LOST(r));
    }
    CHECK_EQ(dafs_null(c), -ENOTCONN);
    CHECK_EQ(dafs_pwrite(c, f, "x", 1, 0), -ENOTCONN);
    OK(dafs_unregister(c, reg)); /* the memory is ours again */
    OK(dafs_disconnect(c));
    return 0;
}

/* One command on dafsd's admin socket (what `dafs admin` sends); 0 if the answer says ok. */
static int admin_cmd(const char *sock_path, const char *line) {
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s < 0) return -1;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sock_path);
    char buf[4096];
    int n = 0, r = -1;
    if (connect(s, (struct sockaddr *)&a, sizeof a) == 0 && write(s, line, strlen(line)) == (ssize_t)strlen(line) && write(s, "\n", 1) == 1) {
        ssize_t k;
        while (n < (int)sizeof buf - 1 && (k = read(s, buf + n, sizeof buf - 1 - n)) > 0) n += (int)k;
        buf[n] = 0;
        r = strstr(buf, "\"ok\": true") ? 0 : -1;
    }
    close(s);
    return r;
}

/* A lost session (here: the client is fenced) is reported by every call until
 * dafs_reestablish, which re-opens the open files in place. */
static int t_session_recovery(void) {
    const char *sock = getenv("DAFS_ADMIN_SOCKET");
    if (!sock) {
        fprintf(stderr, "    (DAFS_ADMIN_SOCKET unset: skipped)\n");
        return 0;
    }
    char id[64], cmd[128];
    snprintf(id, sizeof id, "capi-recover-%d", (int)getpid());
    dafs_options_t o = {0};
    o.client_id = id;
    dafs_client_t *c = NULL;
    OK(dafs_connect(tcp_target, &o, &c));
    OK(dafs_session_lost(c));
    char path[256];
    snprintf(path, sizeof path, "%s/recover", dir);
    dafs_file_t *f;
    OK(dafs_open(c, path, DAFS_O_RDWR | DAFS_O_CREAT | DAFS_O_TRUNC, 0644, &f));
    CHECK_EQ(dafs_pwrite(c, f, "hello, world", 12, 0), 12);
    snprintf(cmd, sizeof cmd, "fence %s", id);
    CHECK_EQ(admin_cmd(sock, cmd), 0);
    CHECK_EQ(dafs_null(c), -EPERM);
    CHECK_EQ(dafs_session_lost(c), -EPERM);
    char b[8] = {0};
    CHECK_EQ(dafs_pread(c, f, b, 5, 7), -EPERM);
    CHECK_EQ(dafs_reestablish(c), -EPERM); /* still fenced */
    snprintf(cmd, sizeof cmd, "unfence %s", id);
    CHECK_EQ(admin_cmd(sock, cmd), 0);
    OK(dafs_reestablish(c));
    OK(dafs_session_lost(c));
    CHECK_EQ(dafs_pread(c, f, b, 5, 7), 5); /* the same handle, re-opened by path */
    CHECK(memcmp(b, "world", 5) == 0);
    dafs_stats_t s;
    OK(dafs_stats(c, &s));
    CHECK(s.reconnects >= 1);
    CHECK_EQ(dafs_session_lost(NULL), -EINVAL);
    CHECK_EQ(dafs_reestablish(NULL), -EINVAL);
    OK(dafs_close(c, f));
    OK(dafs_disconnect(c));
    return 0;
}

/* Wait for exactly `n` completions of `cg` (and no more arrive) into cq[0..n). */
static int wait_exactly(dafs_client_t *c, dafs_cg_t cg, int n, dafs_completion_t *cq, int cap) {
    int got = 0;
    while (got < n) {
        int k = dafs_cg_wait(c, cg, 1, (unsigned)(cap - got), 10000, cq + got);
        CHECK(k >= 1);
        got += k;
    }
    CHECK_EQ(got, n);
    CHECK_EQ(dafs_cg_outstanding(c, cg), 0);
    CHECK_EQ(dafs_cg_poll(c, cg, cq + got, (unsigned)(cap - got)), 0);
    return 0;
}

static int batch_io(dafs_client_t *c, const char *name) {
    const size_t flen = 1 << 20;
    unsigned char *ref = malloc(flen), *back = malloc(flen);
    CHECK(ref && back);
    fill(ref, flen, 21);
    CHECK(dafs_batch_max(c) >= 4);
    CHECK_EQ(dafs_batch_max(NULL), 0);
    dafs_file_t *f;
    OK(dafs_open(c, path(name), DAFS_O_RDWR | DAFS_O_CREAT | DAFS_O_TRUNC, 0644, &f));
    CHECK_EQ(dafs_pwrite(c, f, ref, flen, 0), flen);
    unsigned char *mem;
    dafs_region_t reg;
    OK(dafs_alloc_registered(c, 1 << 20, (void **)&mem, &reg));
    dafs_cg_t cg;
    OK(dafs_cg_create(c, &cg));
    dafs_completion_t cq[16];

    /* gather: two file ranges into one region range; scatter: one file range into two
     * region pieces (and a small one, below the inline threshold) */
    dafs_file_seg_t g_fs[2] = {{0, 4096}, {300000, 5000}};
    dafs_mem_seg_t g_ms[1] = {{reg, 1000, 9096}};
    dafs_file_seg_t s_fs[1] = {{70001, 12000}};
    dafs_mem_seg_t s_ms[2] = {{reg, 65536, 4000}, {reg, 200000, 8000}};
    dafs_file_seg_t t_fs[1] = {{123, 10}};
    dafs_mem_seg_t t_ms[1] = {{reg, 500000, 10}};
    dafs_batch_io_t rd[3] = {
        {0, g_fs, 2, g_ms, 1, 11},
        {0, s_fs, 1, s_ms, 2, 12},
        {0, t_fs, 1, t_ms, 1, 13},
    };
    OK(dafs_batch_submit(c, f, cg, rd, 3, DAFS_BATCH_PER_IO, 99));
    if (wait_exactly(c, cg, 3, cq, 16)) return 1;
    for (int i = 0; i < 3; i++) {
        long long want = cq[i].user_data == 11 ? 9096 : cq[i].user_data == 12 ? 12000 : cq[i].user_data == 13 ? 10 : -1;
        CHECK_EQ(cq[i].result, want);
    }
    CHECK(memcmp(mem + 1000, ref, 4096) == 0);
    CHECK(memcmp(mem + 1000 + 4096, ref + 300000, 5000) == 0);
    CHECK(memcmp(mem + 65536, ref + 70001, 4000) == 0);
    CHECK(memcmp(mem + 200000, ref + 70001 + 4000, 8000) == 0);
    CHECK(memcmp(mem + 500000, ref + 123, 10) == 0);

    /* batched write (a gather from the region to two file ranges, and a plain one),
     * PER_BATCH: one completion with the total; check by reading back */
    fill(mem, 40000, 22);
    dafs_file_seg_t w_fs[2] = {{8192, 10000}, {500000, 6000}};
    dafs_mem_seg_t w_ms[1] = {{reg, 0, 16000}};
    dafs_file_seg_t w2_fs[1] = {{900000, 20000}};
    dafs_mem_seg_t w2_ms[2] = {{reg, 16000, 15000}, {reg, 35000, 5000}};
    dafs_batch_io_t wr[2] = {{1, w_fs, 2, w_ms, 1, 21}, {1, w2_fs, 1, w2_ms, 2, 22}};
    OK(dafs_batch_submit(c, f, cg, wr, 2, DAFS_BATCH_PER_BATCH, 77));
    CHECK_EQ(dafs_unregister(c, reg), -EBUSY); /* pinned while in flight */
    if (wait_exactly(c, cg, 1, cq, 16)) return 1;
    CHECK_EQ(cq[0].user_data, 77);
    CHECK_EQ(cq[0].result, 36000);
    memcpy(ref + 8192, mem, 10000);
    memcpy(ref + 500000, mem + 10000, 6000);
    memcpy(ref + 900000, mem + 16000, 15000);
    memcpy(ref + 915000, mem + 35000, 5000);
    CHECK_EQ(dafs_pread(c, f, back, flen, 0), flen);
    CHECK(memcmp(back, ref, flen) == 0);

    /* ERRORS_ONLY without errors: just the batch's completion */
    OK(dafs_batch_submit(c, f, cg, rd, 3, DAFS_BATCH_ERRORS_ONLY, 55));
    if (wait_exactly(c, cg, 1, cq, 16)) return 1;
    CHECK_EQ(cq[0].user_data, 55);
    CHECK(cq[0].result >= 0); /* success; the server reports no byte counts here */

    /* argument errors */
    CHECK_EQ(dafs_batch_submit(c, f, cg, rd, 3, 3, 0), -EINVAL);
    CHECK_EQ(dafs_batch_submit(c, f, cg, rd, 3, -1, 0), -EINVAL);
    CHECK_EQ(dafs_batch_submit(c, f, cg, rd, 0, DAFS_BATCH_PER_IO, 0), -EINVAL);
    CHECK_EQ(dafs_batch_submit(c, f, cg, NULL, 2, DAFS_BATCH_PER_IO, 0), -EINVAL);
    CHECK_EQ(dafs_batch_submit(c, f, 0, rd, 3, DAFS_BATCH_PER_IO, 0), -EINVAL);
    CHECK_EQ(dafs_batch_submit(c, NULL, cg, rd, 3, DAFS_BATCH_PER_IO, 0), -EBADF);
    dafs_mem_seg_t bad_ms[1] = {{reg, 0, 9095}}; /* one byte short of the file segments */
    dafs_batch_io_t bad[1] = {{0, g_fs, 2, bad_ms, 1, 1}};
    CHECK_EQ(dafs_batch_submit(c, f, cg, bad, 1, DAFS_BATCH_PER_IO, 0), -EINVAL);
    bad[0].mem_segs = NULL; /* NULL with a non-zero count */
    CHECK_EQ(dafs_batch_submit(c, f, cg, bad, 1, DAFS_BATCH_PER_IO, 0), -EINVAL);
    bad[0].mem_segs = g_ms;
    bad[0].n_mem_segs = 0; /* no memory segment */
    CHECK_EQ(dafs_batch_submit(c, f, cg, bad, 1, DAFS_BATCH_PER_IO, 0), -EINVAL);
    dafs_mem_seg_t out_ms[1] = {{reg, (1 << 20) - 100, 9096}}; /* outside the region */
    bad[0].mem_segs = out_ms;
    bad[0].n_mem_segs = 1;
    CHECK_EQ(dafs_batch_submit(c, f, cg, bad, 1, DAFS_BATCH_PER_IO, 0), -EINVAL);
    size_t too_many = (size_t)dafs_batch_max(c) + 1;
    dafs_batch_io_t *many = calloc(too_many, sizeof *many);
    CHECK(many);
    for (size_t i = 0; i < too_many; i++) many[i] = rd[2];
    CHECK_EQ(dafs_batch_submit(c, f, cg, many, too_many, DAFS_BATCH_PER_IO, 0), -E2BIG);
    OK(dafs_batch_submit(c, f, cg, many, too_many - 1, DAFS_BATCH_PER_BATCH, 5)); /* the max is fine */
    if (wait_exactly(c, cg, 1, cq, 16)) return 1;
    CHECK_EQ(cq[0].result, (long long)(10 * (too_many - 1)));
    free(many);
    CHECK_EQ(dafs_cg_outstanding(c, cg), 0);
    OK(dafs_close(c, f));

    /* one failing I/O: a write on a file opened read-only fails alone (-EBADF) */
    OK(dafs_open(c, path(name), DAFS_O_RDONLY, 0, &f));
    dafs_batch_io_t mix[4] = {rd[0], rd[1], wr[0], rd[2]};
    OK(dafs_batch_submit(c, f, cg, mix, 4, DAFS_BATCH_PER_IO, 1));
    if (wait_exactly(c, cg, 4, cq, 16)) return 1;
    int failed = 0;
    for (int i = 0; i < 4; i++) {
        if (cq[i].user_data == 21) { CHECK_EQ(cq[i].result, -EBADF); failed++; }
        else CHECK(cq[i].result > 0);
    }
    CHECK_EQ(failed, 1);
    OK(dafs_batch_submit(c, f, cg, mix, 4, DAFS_BATCH_PER_BATCH, 2));
    if (wait_exactly(c, cg, 1, cq, 16)) return 1;
    CHECK_EQ(cq[0].user_data, 2);
    CHECK_EQ(cq[0].result, -EBADF);
    OK(dafs_batch_submit(c, f, cg, mix, 4, DAFS_BATCH_ERRORS_ONLY, 3));
    if (wait_exactly(c, cg, 2, cq, 16)) return 1;
    CHECK_EQ(cq[0].user_data, 21); /* the failed I/O first, then the batch */
    CHECK_EQ(cq[0].result, -EBADF);
    CHECK_EQ(cq[1].user_data, 3);
    CHECK_EQ(cq[1].result, -EBADF);
    OK(dafs_close(c, f));
    OK(dafs_cg_destroy(c, cg));
    OK(dafs_unregister(c, reg));
    free(ref);
    free(back);
    return 0;
}

static int t_batch_tcp(void) {
    dafs_client_t *c = connect_tcp();
    CHECK(c);
    if (batch_io(c, "batch-tcp")) return 1;
    OK(dafs_disconnect(c));
    return 0;
}

static int t_batch_shm(void) {
    dafs_client_t *c = NULL;
    OK(dafs_connect(shm_target ? shm_target : tcp_target, NULL, &c));
    if (batch_io(c, "batch-shm")) return 1;
    OK(dafs_disconnect(c));
    return 0;
}

static int t_append_two_clients(void) {
    dafs_client_t *a = connect_tcp(), *b = NULL;
    CHECK(a);
    OK(dafs_connect(shm_target ? shm_target : tcp_target, NULL, &b));
    dafs_file_t *fa, *fb, *plain;
    OK(dafs_open(a, path("log"), DAFS_O_WRONLY | DAFS_O_CREAT | DAFS_O_TRUNC | DAFS_O_APPEND, 0644, &fa));
    OK(dafs_open(b, path("log"), DAFS_O_WRONLY | DAFS_O_APPEND, 0, &fb));
    enum { N = 12 };
    size_t lens[N], total = 0, big = dafs_inline_threshold(a) + 3000;
    uint64_t offs[N];
    unsigned char *rec = malloc(big + 4096);
    CHECK(rec);
    for (int i = 0; i < N; i++) {
        lens[i] = i == 5 ? big : 100 + 37 * (size_t)i; /* one above the inline threshold */
        fill(rec, lens[i], 100 + (unsigned)i);
        dafs_client_t *c = i % 2 ? b : a;
        dafs_file_t *f = i % 2 ? fb : fa;
        offs[i] = ~0ull;
        CHECK_EQ(dafs_append(c, f, rec, lens[i], &offs[i]), lens[i]);
        CHECK_EQ(offs[i], total); /* contiguous: each record right after the last */
        total += lens[i];
    }
    uint64_t o = 12345;
    CHECK_EQ(dafs_append(a, fa, rec, 0, &o), 0);
    CHECK_EQ(o, 12345);
    CHECK_EQ(dafs_append(a, fa, NULL, 10, &o), -EINVAL);
    CHECK_EQ(dafs_append(a, fa, "xyz", 3, NULL), 3); /* offset_out is optional */
    total += 3;
    CHECK_EQ(dafs_append(b, fa, "xyz", 3, &o), -EBADF); /* another client's file */
    OK(dafs_open(a, path("log"), DAFS_O_RDWR, 0, &plain));
    CHECK_EQ(dafs_append(a, plain, "xyz", 3, &o), -EINVAL); /* not opened for append */
    dafs_attr_t at;
    OK(dafs_fstat(a, plain, &at));
    CHECK_EQ(at.size, total);
    unsigned char *all = malloc(total), *want = malloc(big + 4096);
    CHECK(all && want);
    CHECK_EQ(dafs_pread(a, plain, all, total, 0), total);
    for (int i = 0; i < N; i++) {
        fill(want, lens[i], 100 + (unsigned)i);
        if (memcmp(all + offs[i], want, lens[i]) != 0) FAIL("record %d differs at offset %llu", i, (unsigned long long)offs[i]);
    }
    CHECK(memcmp(all + total - 3, "xyz", 3) == 0);
    OK(dafs_close(a, plain));
    OK(dafs_close(a, fa));
    OK(dafs_close(b, fb));
    OK(dafs_disconnect(a));
    OK(dafs_disconnect(b));
    free(rec); free(all); free(want);
    return 0;
}

/* Write `len` bytes of `data` to a new file `name` in the scratch directory. */
static int put_file(dafs_client_t *c, const char *name, const char *data, size_t len) {
    dafs_file_t *f;
    OK(dafs_open(c, path(name), DAFS_O_WRONLY | DAFS_O_CREAT | DAFS_O_EXCL, 0644, &f));
    CHECK_EQ(dafs_pwrite(c, f, data, len, 0), len);
    OK(dafs_close(c, f));
    return 0;
}

/* dafs_rename2: NOREPLACE and EXCHANGE, told apart by the files' sizes. */
static int t_rename2(void) {
    dafs_client_t *c = connect_tcp();
    CHECK(c);
    dafs_attr_t a;
    OK(dafs_mkdir(c, path("ren"), 0755));
    OK(put_file(c, "ren/one", "1", 1));
    OK(put_file(c, "ren/two", "22", 2));
    OK(dafs_mkdir(c, path("ren/d"), 0755));
    CHECK_EQ(dafs_rename2(c, path("ren/one"), path("ren/two"), DAFS_RENAME_NOREPLACE), -EEXIST);
    OK(dafs_stat(c, path("ren/two"), &a));
    CHECK_EQ(a.size, 2);
    OK(dafs_rename2(c, path("ren/one"), path("ren/three"), DAFS_RENAME_NOREPLACE));
    CHECK_EQ(dafs_stat(c, path("ren/one"), &a), -ENOENT);
    OK(dafs_rename2(c, path("ren/three"), path("ren/two"), DAFS_RENAME_EXCHANGE));
    OK(dafs_stat(c, path("ren/three"), &a));
    CHECK_EQ(a.size, 2);
    OK(dafs_stat(c, path("ren/two"), &a));
    CHECK_EQ(a.size, 1);
    OK(dafs_rename2(c, path("ren/two"), path("ren/d"), DAFS_RENAME_EXCHANGE));
    OK(dafs_stat(c, path("ren/two"), &a));
    CHECK_EQ(a.type, DAFS_TYPE_DIR);
    OK(dafs_stat(c, path("ren/d"), &a));
    CHECK_EQ(a.type, DAFS_TYPE_REG);
    CHECK_EQ(dafs_rename2(c, path("ren/d"), path("ren/none"), DAFS_RENAME_EXCHANGE), -ENOENT);
    CHECK_EQ(dafs_rename2(c, path("ren/d"), path("ren/x"),
                          DAFS_RENAME_NOREPLACE | DAFS_RENAME_EXCHANGE), -EINVAL);
    CHECK_EQ(dafs_rename2(c, path("ren/d"), path("ren/x"), 4), -EINVAL);
    CHECK_EQ(dafs_stat(c, path("ren/x"), &a), -ENOENT);
    OK(dafs_rename2(c, path("ren/d"), path("ren/three"), 0)); /* 0 replaces */
    OK(dafs_stat(c, path("ren/three"), &a));
    CHECK_EQ(a.size, 1);
    OK(dafs_unlink(c, path("ren/three")));
    OK(dafs_rmdir(c, path("ren/two")));
    OK(dafs_rmdir(c, path("ren")));
    OK(dafs_disconnect(c));
    return 0;
}

/* ---------------------------------------------------------------------------------- */

struct test { const char *name; int (*fn)(void); };
/* Byte-range locks between two sessions: conflicts, upgrade/downgrade in place, test,
 * unlock, the waiting variant, and release when the session ends. */
static int t_locks_two_sessions(void) {
    dafs_client_t *a = connect_tcp(), *b = connect_tcp();
    CHECK(a && b);
    dafs_file_t *fa = NULL, *fb = NULL;
    OK(dafs_open(a, path("locks"), DAFS_O_RDWR | DAFS_O_CREAT, 0644, &fa));
    OK(dafs_open(b, path("locks"), DAFS_O_RDWR, 0, &fb));
    dafs_lock_info_t li;
    memset(&li, 0xff, sizeof li);
    /* shared + shared coexist; shared blocks exclusive */
    OK(dafs_lock(a, fa, 100, 10, 0));
    OK(dafs_lock(b, fb, 105, 10, 0));
    CHECK_EQ(dafs_lock(b, fb, 100, 1, 1), -EAGAIN);
    CHECK_EQ(dafs_test_lock(b, fb, 100, 1, 1, &li), 1);
    CHECK_EQ(li.offset, 100);
    CHECK_EQ(li.len, 10);
    CHECK_EQ(li.exclusive, 0);
    CHECK(li.owner != 0);
    CHECK_EQ(dafs_test_lock(b, fb, 100, 1, 0, NULL), 0); /* shared would be fine */
    /* a session's own locks never conflict: upgrade over b's shared part fails, own part works */
    CHECK_EQ(dafs_lock(a, fa, 100, 10, 1), -EAGAIN);
    OK(dafs_unlock(b, fb, 105, 10));
    OK(dafs_lock(a, fa, 100, 10, 1)); /* upgrade in place */
    CHECK_EQ(dafs_lock(b, fb, 109, 1, 0), -EAGAIN);
    CHECK_EQ(dafs_test_lock(b, fb, 0, 0, 0, &li), 1);
    CHECK_EQ(li.exclusive, 1);
    OK(dafs_lock(a, fa, 100, 10, 0)); /* downgrade in place */
    OK(dafs_lock(b, fb, 109, 1, 0));
    /* unlock splits: a keeps [100,105) */
    OK(dafs_unlock(b, fb, 0, 0));
    OK(dafs_unlock(a, fa, 105, 5));
    OK(dafs_lock(b, fb, 105, 5, 1));
    CHECK_EQ(dafs_lock(b, fb, 104, 1, 1), -EAGAIN);
    /* waiting: times out while held, succeeds once released */
    CHECK_EQ(dafs_lock_wait(b, fb, 100, 1, 1, 30), -ETIMEDOUT);
    OK(dafs_unlock(a, fa, 0, 0));
    OK(dafs_lock_wait(b, fb, 100, 1, 1, 1000));
    /* the session's end releases its locks */
    OK(dafs_lock(a, fa, 200, 1, 1));
    CHECK_EQ(dafs_lock(b, fb, 200, 1, 0), -EAGAIN);
    OK(dafs_disconnect(a));
    OK(dafs_lock(b, fb, 200, 1, 1));
    /* argument errors */
    CHECK_EQ(dafs_lock(b, NULL, 0, 1, 0), -EBADF);
    CHECK_EQ(dafs_lock(NULL, fb, 0, 1, 0), -EINVAL);
    CHECK_EQ(dafs_unlock(b, NULL, 0, 1), -EBADF);
    CHECK_EQ(dafs_lock(b, fb, UINT64_MAX, 5, 0), -EINVAL); /* range overflows */
    OK(dafs_close(b, fb));
    OK(dafs_disconnect(b));
    return 0;
}

static const struct test tests[] = {
    {"version_and_strerror", t_version_and_strerror},
    {"connect_errors", t_connect_errors},
    {"connect_tcp_and_queries", t_connect_tcp_and_queries},
    {"connect_shm", t_connect_shm},
    {"blocking_io_tcp", t_blocking_io_tcp},
    {"blocking_io_shm", t_blocking_io_shm},
    {"open_flags", t_open_flags},
    {"registered_async_tcp", t_registered_async_tcp},
    {"registered_async_shm", t_registered_async_shm},
    {"register_user_memory_tcp", t_register_user_memory_tcp},
    {"register_user_memory_shm", t_register_user_memory_shm},
    {"busy_region_and_group", t_busy_region_and_group},
    {"cg_argument_errors", t_cg_argument_errors},
    {"cg_limit", t_cg_limit},
    {"nb_plain_buffers", t_nb_plain_buffers},
    {"eagain_when_slots_run_out", t_eagain_when_slots_run_out},
    {"bad_file_handles", t_bad_file_handles},
    {"metadata", t_metadata},
    {"rename2", t_rename2},
    {"concurrent_misuse_is_refused", t_concurrent_misuse_is_refused},
    {"batch_tcp", t_batch_tcp},
    {"batch_shm", t_batch_shm},
    {"append_two_clients", t_append_two_clients},
    {"connection_loss", t_connection_loss},
    {"session_recovery", t_session_recovery},
    {"locks_two_sessions", t_locks_two_sessions},
};

int main(int argc, char **argv) {
    tcp_target = getenv("DAFS_TARGET");
    shm_target = getenv("DAFS_SHM_TARGET");
    if (!tcp_target) {
        fprintf(stderr, "test_capi: set DAFS_TARGET=host:port of a running dafsd\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "capi-%d", (int)getpid());
    dafs_client_t *c = connect_tcp();
    if (!c || dafs_mkdir(c, dir, 0755) != 0) {
        fprintf(stderr, "test_capi: cannot set up %s on %s\n", dir, tcp_target);
        return 2;
    }
    dafs_disconnect(c);
    int passed = 0, failed = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (argc > 1 && !strstr(tests[i].name, argv[1])) continue;
        int r = tests[i].fn();
        printf("%s %s\n", r ? "FAIL" : "ok  ", tests[i].name);
        fflush(stdout);
        if (r) failed++;
        else passed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
