/*
 * C tests of libdafs (see test_capi.c): Registered memory and asynchronous I/O: regions, user memory, completion groups
 * (arguments, limit, busy), non-blocking I/O on plain buffers, EAGAIN when slots
 * run out, and batch I/O.
 */
#include "capi_test.h"

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

int t_registered_async_tcp(void) {
    dafs_client_t *c = connect_tcp();
    CHECK(c);
    if (registered_async(c, "async-tcp")) return 1;
    OK(dafs_disconnect(c));
    return 0;
}

int t_registered_async_shm(void) {
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

int t_register_user_memory_tcp(void) {
    dafs_client_t *c = connect_tcp();
    CHECK(c);
    if (user_memory(c, "user-tcp")) return 1;
    OK(dafs_disconnect(c));
    return 0;
}

int t_register_user_memory_shm(void) {
    dafs_client_t *c = NULL;
    OK(dafs_connect(shm_target ? shm_target : tcp_target, NULL, &c));
    if (user_memory(c, "user-shm")) return 1;
    OK(dafs_disconnect(c));
    return 0;
}

int t_busy_region_and_group(void) {
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

int t_cg_argument_errors(void) {
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
int t_cg_limit(void) {
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

int t_nb_plain_buffers(void) {
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

int t_eagain_when_slots_run_out(void) {
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

int t_batch_tcp(void) {
    dafs_client_t *c = connect_tcp();
    CHECK(c);
    if (batch_io(c, "batch-tcp")) return 1;
    OK(dafs_disconnect(c));
    return 0;
}

int t_batch_shm(void) {
    dafs_client_t *c = NULL;
    OK(dafs_connect(shm_target ? shm_target : tcp_target, NULL, &c));
    if (batch_io(c, "batch-shm")) return 1;
    OK(dafs_disconnect(c));
    return 0;
}
