/*
 * odmblast — the ODM I/O stress test of seed 002 (section 5.1, Figs. 2-4): a closed
 * loop with up to 32 I/Os outstanding; each odm_io call submits 16 I/Os and waits for
 * the 16 of the previous call (--batch B: 2 x B outstanding). I/Os alternate between two files; offsets are
 * sequential or uniformly random (512-byte aligned); the mix test picks read or write
 * at random. Each test moves as many bytes as the two files hold.
 *
 * The files are created (odm_create) and filled, the tests run on them, and they are
 * aborted at the end: never committed, they leave nothing behind.
 *
 *   odmblast --backend dafs|local --target T [--provider tcp|auto] [--dir D]
 *            [--file-bytes N] [--bs 4096,65536,...] [--tests seqread,seqwrite,randread,
 *            randwrite,mix] [--batch 16] [--verify] [--label L]
 *            [--json FILE]
 * Prints a Markdown table; --json writes the same rows as a JSON array.
 * --verify writes a known pattern and checks every byte read (slower; for tests).
 */
#define _GNU_SOURCE
#include <dafs_odm.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NFILES 2
#define SECTOR 512

struct opts {
    odm_config_t cfg;
    const char *dir, *label, *json, *bs, *tests;
    uint64_t file_bytes;
    unsigned outstanding, batch;
    int verify;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The expected content: one 64-bit word per 8 bytes, from the file and the offset. */
static uint64_t word(int file, uint64_t off) {
    return ((uint64_t)(file + 1) << 56) ^ ((off / 8) * 0x9E3779B97F4A7C15ull);
}
static void pattern(uint64_t *p, size_t len, int file, uint64_t off) {
    for (size_t i = 0; i < len / 8; i++) p[i] = word(file, off + i * 8);
}
static int check(const uint64_t *p, size_t len, int file, uint64_t off) {
    for (size_t i = 0; i < len / 8; i++)
        if (p[i] != word(file, off + i * 8)) return -1;
    return 0;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

struct run {
    odm_ctx_t *c;
    odm_fid_t fid[NFILES];
    const struct opts *o;
    odm_ioreq_t *q;
    unsigned char *buf;
    long errors, bad_data;
};

/* Set up request `r` as the i-th I/O of a test. */
static void prepare(struct run *R, odm_ioreq_t *r, uint64_t i, const char *test, size_t bs) {
    uint64_t fb = R->o->file_bytes;
    int file = (int)(i % NFILES);
    uint64_t off;
    if (!strncmp(test, "seq", 3)) {
        off = (i / NFILES) * bs % (fb - fb % bs);
    } else {
        uint64_t sectors = (fb - bs) / SECTOR + 1;
        off = rnd() % sectors * SECTOR;
    }
    int write = strstr(test, "write") != NULL || (!strcmp(test, "mix") && (rnd() & 1));
    r->op = write ? ODM_WRITE : ODM_READ;
    r->fid = R->fid[file];
    r->offset = off;
    r->len = bs;
    r->user = (void *)(uintptr_t)file;
    if (write && R->o->verify) pattern(r->buf, bs, file, off);
}

static void finished(struct run *R, odm_ioreq_t *r) {
    if (r->result != (int64_t)r->len) R->errors++;
    else if (R->o->verify && r->op == ODM_READ &&
             check(r->buf, r->len, (int)(uintptr_t)r->user, r->offset))
        R->bad_data++;
}

/* One test at one block size: returns MB/s (10^6 bytes), or -1 on error. Two groups
 * of `batch` requests: each odm_io call submits one group and waits for the other
 * (the previous call's), so up to 2 x batch I/Os are outstanding. */
static double blast(struct run *R, const char *test, size_t bs, uint64_t *ios_out) {
    unsigned B = R->o->batch;
    uint64_t total = R->o->file_bytes * NFILES / bs;
    for (unsigned k = 0; k < 2 * B; k++) {
        R->q[k].state = ODM_REQ_IDLE;
        R->q[k].buf = R->buf + (size_t)k * bs;
    }
    odm_ioreq_t *grp[2][64];
    for (unsigned k = 0; k < B; k++) grp[0][k] = &R->q[k], grp[1][k] = &R->q[B + k];
    unsigned n_in[2] = {0, 0}, cur = 0;
    uint64_t issued = 0;
    double t0 = now_s();
    while (issued < total || n_in[0] || n_in[1]) {
        unsigned ns = 0, other = 1 - cur, nw = n_in[other];
        for (; ns < B && issued < total; ns++, issued++) prepare(R, grp[cur][ns], issued, test, bs);
        if (odm_io(R->c, grp[cur], ns, grp[other], nw, NULL, 0, 0, NULL, -1)) return -1;
        for (unsigned j = 0; j < nw; j++) finished(R, grp[other][j]);
        n_in[other] = 0;
        n_in[cur] = ns;
        cur = other;
    }
    double dt = now_s() - t0;
    *ios_out = total;
    return (double)total * bs / 1e6 / dt;
}

static int setup_files(struct run *R, size_t max_bs) {
    const struct opts *o = R->o;
    size_t chunk = (size_t)1 << 20;
    unsigned char *b = odm_alloc(R->c, chunk);
    if (!b) return -ENOMEM;
    for (int f = 0; f < NFILES; f++) {
        char p[512];
        snprintf(p, sizeof p, "%s/odmblast-%d-%d.dat", o->dir, (int)getpid(), f + 1);
        int r = odm_create(R->c, p, o->file_bytes, 1, "odmblast", 8, &R->fid[f]);
        if (r) {
            fprintf(stderr, "odmblast: odm_create %s: %s\n", p, odm_strerror(r));
            return r;
        }
        for (uint64_t off = 0; off < o->file_bytes; off += chunk) {
            size_t n = o->file_bytes - off < chunk ? (size_t)(o->file_bytes - off) : chunk;
            pattern((uint64_t *)b, n, f, off);
            odm_ioreq_t q;
            memset(&q, 0, sizeof q);
            q.op = ODM_WRITE, q.fid = R->fid[f], q.buf = b, q.len = n, q.offset = off;
            odm_ioreq_t *s[1] = {&q};
            r = odm_io(R->c, s, 1, s, 1, NULL, 0, 0, NULL, -1);
            if (r || q.result != (int64_t)n) return r ? r : -EIO;
        }
    }
    odm_free(R->c, b);
    (void)max_bs;
    return 0;
}

static void usage(void) {
    fprintf(stderr, "usage: odmblast --backend dafs|local --target T [--provider tcp|auto] "
                    "[--dir D] [--file-bytes N] [--bs LIST] [--tests LIST] "
                    "[--batch N] [--verify] [--label L] [--json FILE]\n");
    exit(2);
}

static const char *const TESTS[] = {"seqread", "seqwrite", "randread", "randwrite", "mix"};

/* Options into *o, block sizes into sizes[] (returns how many; *max_bs the largest). */
static int parse_args(struct opts *o, int argc, char **argv, size_t *sizes, size_t *max_bs) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--verify")) { o->verify = 1; continue; }
        if (!v) usage();
        i++;
        if (!strcmp(a, "--backend")) o->cfg.backend = !strcmp(v, "local") ? ODM_BACKEND_LOCAL : ODM_BACKEND_DAFS;
        else if (!strcmp(a, "--target")) o->cfg.target = v;
        else if (!strcmp(a, "--provider")) o->cfg.provider = !strcmp(v, "tcp") ? ODM_PROVIDER_TCP : ODM_PROVIDER_AUTO;
        else if (!strcmp(a, "--dir")) o->dir = v;
        else if (!strcmp(a, "--file-bytes")) o->file_bytes = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--bs")) o->bs = v;
        else if (!strcmp(a, "--tests")) o->tests = v;
        else if (!strcmp(a, "--batch")) o->batch = (unsigned)atoi(v);
        else if (!strcmp(a, "--label")) o->label = v;
        else if (!strcmp(a, "--json")) o->json = v;
        else usage();
    }
    if (!o->cfg.target || !o->batch || o->batch > 64 || o->file_bytes < (1u << 20) ||
        o->file_bytes % SECTOR)
        usage();
    int n = 0;
    char l[512];
    snprintf(l, sizeof l, "%s", o->bs);
    for (char *s = strtok(l, ","); s && n < 32; s = strtok(NULL, ",")) {
        sizes[n] = strtoull(s, NULL, 0);
        if (!sizes[n] || sizes[n] % SECTOR || sizes[n] > o->file_bytes) usage();
        if (sizes[n] > *max_bs) *max_bs = sizes[n];
        n++;
    }
    snprintf(l, sizeof l, "%s", o->tests);
    for (char *t = strtok(l, ","); t; t = strtok(NULL, ",")) {
        int known = 0;
        for (size_t k = 0; k < sizeof TESTS / sizeof TESTS[0]; k++) known |= !strcmp(t, TESTS[k]);
        if (!known) usage();
    }
    return n;
}

/* Every test at every block size: a table row (and a JSON object) each. */
static int run_tests(struct run *R, const odm_info_t *info, const size_t *sizes, int nsizes) {
    const struct opts *o = R->o;
    FILE *js = o->json ? fopen(o->json, "w") : NULL;
    if (js) fprintf(js, "[\n");
    printf("| setup | test | block bytes | MB/s | I/Os |\n|---|---|---:|---:|---:|\n");
    char tl[256];
    snprintf(tl, sizeof tl, "%s", o->tests);
    int rows = 0, rc = 0;
    for (char *t = strtok(tl, ","); t; t = strtok(NULL, ",")) {
        for (int k = 0; k < nsizes; k++) {
            uint64_t ios = 0;
            double mbs = blast(R, t, sizes[k], &ios);
            if (mbs < 0) rc = 1;
            printf("| %s | %s | %zu | %.1f | %llu |\n", o->label, t, sizes[k], mbs,
                   (unsigned long long)ios);
            fflush(stdout);
            if (js)
                fprintf(js, "%s  {\"setup\": \"%s\", \"backend\": \"%s\", \"provider\": \"%s\", "
                        "\"test\": \"%s\", \"block_bytes\": %zu, \"mb_per_s\": %.2f, \"ios\": %llu, "
                        "\"file_bytes\": %llu, \"outstanding\": %u}",
                        rows++ ? ",\n" : "", o->label, info->backend, info->provider, t, sizes[k],
                        mbs, (unsigned long long)ios, (unsigned long long)o->file_bytes,
                        o->outstanding);
        }
    }
    if (js) {
        fprintf(js, "\n]\n");
        fclose(js);
    }
    return rc;
}

int main(int argc, char **argv) {
    struct opts o = {.dir = "", .label = "", .bs = "4096,16384,65536,262144,1048576",
                     .tests = "seqread,seqwrite,randread,randwrite,mix",
                     .file_bytes = 256u << 20, .batch = 16};
    size_t sizes[32], max_bs = 0;
    int nsizes = parse_args(&o, argc, argv, sizes, &max_bs);
    o.outstanding = 2 * o.batch; /* the seed's loop: submit one batch, wait for the other */
    o.cfg.max_outstanding = o.outstanding;
    struct run R = {.o = &o};
    int r = odm_init(&o.cfg, &R.c);
    if (r) {
        fprintf(stderr, "odmblast: odm_init %s: %s\n", o.cfg.target, odm_strerror(r));
        return 1;
    }
    odm_info_t info;
    odm_info(R.c, &info);
    fprintf(stderr, "odmblast: backend %s, provider %s, inline threshold %llu, largest I/O %llu\n",
            info.backend, info.provider, (unsigned long long)info.inline_threshold_bytes,
            (unsigned long long)info.max_io_bytes);
    R.q = calloc(o.outstanding, sizeof *R.q);
    R.buf = odm_alloc(R.c, o.outstanding * max_bs);
    uint64_t warm_ios = 0;
    /* Warm-up (untimed): one sequential read pass at the largest block size, so that the
     * first test does not pay for first-touch costs the others do not. */
    if (!R.q || !R.buf || setup_files(&R, max_bs) || blast(&R, "seqread", max_bs, &warm_ios) < 0) {
        fprintf(stderr, "odmblast: setup failed\n");
        odm_fini(R.c);
        return 1;
    }
    int rc = run_tests(&R, &info, sizes, nsizes);
    for (int f = 0; f < NFILES; f++) odm_abort(R.c, R.fid[f]);
    odm_fini(R.c);
    if (R.errors || R.bad_data) {
        fprintf(stderr, "odmblast: %ld failed I/Os, %ld reads with wrong data\n", R.errors,
                R.bad_data);
        return 1;
    }
    if (o.verify) fprintf(stderr, "odmblast: verified every read\n");
    return rc;
}
