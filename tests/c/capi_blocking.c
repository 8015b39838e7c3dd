/*
 * C tests of libdafs (see test_capi.c): Blocking I/O: round trips over tcp and shm, open flags, bad file handles, appends
 * from two clients.
 */
#include "capi_test.h"

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

int t_blocking_io_tcp(void) {
    dafs_client_t *c = connect_tcp();
    CHECK(c);
    if (blocking_roundtrip(c, "blocking-tcp")) return 1;
    OK(dafs_disconnect(c));
    return 0;
}

int t_blocking_io_shm(void) {
    dafs_client_t *c = NULL;
    OK(dafs_connect(shm_target ? shm_target : tcp_target, NULL, &c));
    if (blocking_roundtrip(c, "blocking-shm")) return 1;
    OK(dafs_disconnect(c));
    return 0;
}

int t_open_flags(void) {
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

int t_bad_file_handles(void) {
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

int t_append_two_clients(void) {
    dafs_client_t *a = connect_tcp(), *b = NULL;
    CHECK(a);
    OK(dafs_connect(shm_target ? shm_target : tcp_target, NULL, &b));
    dafs_file_t *fa, *fb, *plain;
    OK(dafs_open(a, path("log"), DAFS_O_WRONLY | DAFS_O_CREAT | DAFS_O_TRUNC | DAFS_O_APPEND, 0644, &fa));
    OK(dafs_open(b, path("log"), DAFS_O_WRONLY | DAFS_O_APPEND, 0, &fb));
    enum { N = 12 };
    /* Appends come from plain memory: their inline bound is the unregistered one. */
    size_t ua = dafs_inline_threshold_unregistered(a), ub = dafs_inline_threshold_unregistered(b);
    size_t lens[N], total = 0, big = (ua > ub ? ua : ub) + 3000;
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
