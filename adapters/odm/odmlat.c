/*
 * odmlat — the ODM latency test of seed 002 (section 5.2, Fig. 5 and Table 1): one I/O
 * of a fixed size at a time (submit, wait), at increasing offsets, for a number of
 * iterations; the mean time per I/O for each size, reads and writes. A linear fit
 * latency = a + size / R, separately for the sizes that travel inline and those moved
 * directly (which path each size took is read from the client's counters, odm_info),
 * splits the time as the seed does:
 *   Treq    a zero-byte request/response: measured directly (odm_null = DAFS NULL)
 *   Tdisk   a_inline - Treq: the fixed cost of the server's I/O (the seed's zero-byte
 *           disk I/O; here a page-cache pread/pwrite plus the server's dispatch)
 *   Trdma   a_direct - a_inline: the fixed extra of a direct transfer (placement into
 *           registered memory; over TCP the data still travels in the stream)
 *   Rinline, Rdirect  1 / slope (MB/s, 10^6 bytes)
 * The local backend has no request or transfer: its fit (one line) is the file system's
 * own cost, printed as Tdisk.
 *
 *   odmlat --backend dafs|local --target T [--provider tcp|auto] [--dir D] [--iters N]
 *          [--sizes LIST] [--label L] [--json FILE]
 * Default sizes: around the inline threshold (1/8 .. 1x and 2x .. 16x of it).
 */
#define _GNU_SOURCE
#include <dafs_odm.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAXS 32

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

struct point { size_t size; double us[2]; int direct; };

/* Least squares y = a + b x over the points with direct == want, for op. */
static int fit(const struct point *p, int n, int want, int op, double *a, double *b) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (p[i].direct != want) continue;
        double x = (double)p[i].size, y = p[i].us[op];
        sx += x, sy += y, sxx += x * x, sxy += x * y, k++;
    }
    if (k < 2 || sxx * k - sx * sx == 0) return -1;
    *b = (k * sxy - sx * sy) / (k * sxx - sx * sx);
    *a = (sy - *b * sx) / k;
    return 0;
}

static void usage(void) {
    fprintf(stderr, "usage: odmlat --backend dafs|local --target T [--provider tcp|auto] "
                    "[--dir D] [--iters N] [--sizes LIST] [--label L] [--json FILE]\n");
    exit(2);
}

/* One run: its options, context, file and results. */
struct lat {
    odm_config_t cfg;
    const char *dir, *label, *json, *sizes_arg;
    int iters, local;
    odm_ctx_t *c;
    odm_info_t info;
    odm_fid_t fid;
    unsigned char *buf;
    uint64_t span;
    struct point pts[MAXS];
    int n;
    double treq;
    double a[2][2], b[2][2]; /* [inline=0/direct=1][read=0/write=1] fit */
    int ok[2][2];
};

static void parse_args(struct lat *L, int argc, char **argv) {
    L->dir = L->label = "";
    L->iters = 1000;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--backend")) L->cfg.backend = !strcmp(v, "local") ? ODM_BACKEND_LOCAL : ODM_BACKEND_DAFS;
        else if (!strcmp(a, "--target")) L->cfg.target = v;
        else if (!strcmp(a, "--provider")) L->cfg.provider = !strcmp(v, "tcp") ? ODM_PROVIDER_TCP : ODM_PROVIDER_AUTO;
        else if (!strcmp(a, "--dir")) L->dir = v;
        else if (!strcmp(a, "--iters")) L->iters = atoi(v);
        else if (!strcmp(a, "--sizes")) L->sizes_arg = v;
        else if (!strcmp(a, "--label")) L->label = v;
        else if (!strcmp(a, "--json")) L->json = v;
        else usage();
    }
    if (argc % 2 == 0 || !L->cfg.target || L->iters < 2) usage();
}

/* The sizes: given, or 1/8..1x and 2x..16x of the inline threshold. Returns the largest. */
static size_t pick_sizes(struct lat *L) {
    if (L->sizes_arg) {
        char l[512];
        snprintf(l, sizeof l, "%s", L->sizes_arg);
        for (char *s = strtok(l, ","); s && L->n < MAXS; s = strtok(NULL, ","))
            L->pts[L->n++].size = strtoull(s, NULL, 0);
    } else {
        size_t base = L->info.inline_threshold_bytes ? L->info.inline_threshold_bytes : 16384;
        size_t mult[] = {0, 0, 0, 0, 2, 4, 8, 16};
        for (int i = 0; i < 8; i++) L->pts[L->n++].size = mult[i] ? base * mult[i] : base >> (3 - i);
    }
    size_t maxs = 0;
    for (int i = 0; i < L->n; i++) {
        if (!L->pts[i].size) usage();
        if (L->pts[i].size > maxs) maxs = L->pts[i].size;
    }
    return maxs;
}

/* Mean microseconds of `iters` single I/Os of point k, at increasing offsets. */
static int measure(struct lat *L, int k, int op) {
    struct point *pt = &L->pts[k];
    odm_info_t before, after;
    odm_info(L->c, &before);
    odm_ioreq_t q;
    memset(&q, 0, sizeof q);
    q.op = (uint32_t)op, q.fid = L->fid, q.buf = L->buf, q.len = pt->size;
    odm_ioreq_t *s[1] = {&q};
    uint64_t off = 0;
    double t0 = now_us();
    for (int i = 0; i < L->iters; i++) {
        q.offset = off;
        off = off + 2 * pt->size > L->span ? 0 : off + pt->size;
        int e = odm_io(L->c, s, 1, s, 1, NULL, 0, 0, NULL, -1);
        if (e || q.result != (int64_t)q.len) {
            fprintf(stderr, "odmlat: I/O of %zu failed: %s\n", q.len,
                    odm_strerror(e ? e : (int)q.result));
            return -1;
        }
    }
    pt->us[op == ODM_READ ? 0 : 1] = (now_us() - t0) / L->iters;
    odm_info(L->c, &after);
    /* direct if most of this size's backend I/Os went direct (the client's counters) */
    pt->direct = after.direct_ios - before.direct_ios > after.inline_ios - before.inline_ios;
    return 0;
}

#define RATE(ok, b) ((ok) && (b) > 0 ? 1.0 / (b) : 0.0) /* 1/slope: bytes/us = MB/s */

static void print_tables(const struct lat *L) {
    const char *lb = L->label;
    printf("%s: backend %s, provider %s, inline threshold %llu bytes, %d iterations per point\n\n",
           lb, L->info.backend, L->info.provider,
           (unsigned long long)L->info.inline_threshold_bytes, L->iters);
    printf("| setup | size bytes | path | read us | write us |\n|---|---:|---|---:|---:|\n");
    for (int k = 0; k < L->n; k++)
        printf("| %s | %zu | %s | %.1f | %.1f |\n", lb, L->pts[k].size,
               L->local ? "local" : L->pts[k].direct ? "direct" : "inline", L->pts[k].us[0],
               L->pts[k].us[1]);
    double tdisk[2], trdma[2];
    for (int op = 0; op < 2; op++) {
        tdisk[op] = L->ok[0][op] ? L->a[0][op] - L->treq : 0;
        trdma[op] = L->ok[0][op] && L->ok[1][op] ? L->a[1][op] - L->a[0][op] : 0;
    }
    printf("\n| setup | component | read | write | seed 002 read | seed 002 write |\n"
           "|---|---|---:|---:|---:|---:|\n");
    printf("| %s | Treq (us) | %.1f | %.1f | 90 | 90 |\n", lb, L->treq, L->treq);
    printf("| %s | Tdisk (us) | %.1f | %.1f | 519 | 535 |\n", lb, tdisk[0], tdisk[1]);
    printf("| %s | Trdma (us) | %.1f | %.1f | 372 | 446 |\n", lb, trdma[0], trdma[1]);
    printf("| %s | Rinline (MB/s) | %.1f | %.1f | 47.4 | 44.4 |\n", lb,
           RATE(L->ok[0][0], L->b[0][0]), RATE(L->ok[0][1], L->b[0][1]));
    printf("| %s | Rdirect (MB/s) | %.1f | %.1f | 48.8 | 43.5 |\n", lb,
           RATE(L->ok[1][0], L->b[1][0]), RATE(L->ok[1][1], L->b[1][1]));
}

static void write_json(const struct lat *L) {
    FILE *f = fopen(L->json, "w");
    if (!f) {
        perror(L->json);
        return;
    }
    fprintf(f, "{\"setup\": \"%s\", \"backend\": \"%s\", \"provider\": \"%s\", "
               "\"inline_threshold_bytes\": %llu, \"iters\": %d, \"points\": [",
            L->label, L->info.backend, L->info.provider,
            (unsigned long long)L->info.inline_threshold_bytes, L->iters);
    for (int k = 0; k < L->n; k++)
        fprintf(f, "%s{\"size_bytes\": %zu, \"path\": \"%s\", \"read_us\": %.2f, \"write_us\": %.2f}",
                k ? ", " : "", L->pts[k].size,
                L->local ? "local" : L->pts[k].direct ? "direct" : "inline", L->pts[k].us[0],
                L->pts[k].us[1]);
    fprintf(f, "], \"treq_us\": %.2f, \"fit\": {", L->treq);
    for (int d = 0; d < 2; d++)
        fprintf(f, "%s\"%s\": {\"read\": [%.3f, %.3f], \"write\": [%.3f, %.3f]}", d ? ", " : "",
                d ? "direct" : "inline", L->a[d][0], RATE(L->ok[d][0], L->b[d][0]), L->a[d][1],
                RATE(L->ok[d][1], L->b[d][1]));
    fprintf(f, "}}\n");
    fclose(f);
}

int main(int argc, char **argv) {
    static struct lat L;
    parse_args(&L, argc, argv);
    L.cfg.max_outstanding = 1;
    int r = odm_init(&L.cfg, &L.c);
    if (r) {
        fprintf(stderr, "odmlat: odm_init %s: %s\n", L.cfg.target, odm_strerror(r));
        return 1;
    }
    odm_info(L.c, &L.info);
    L.local = !strcmp(L.info.backend, "local");
    size_t maxs = pick_sizes(&L);
    /* One file holding `span` bytes; offsets increase and wrap. Never committed. */
    L.span = (uint64_t)maxs * 64;
    char p[512];
    snprintf(p, sizeof p, "%s/odmlat-%d.dat", L.dir, (int)getpid());
    L.buf = odm_alloc(L.c, maxs);
    if (!L.buf || (r = odm_create(L.c, p, L.span, 1, "odmlat", 6, &L.fid))) {
        fprintf(stderr, "odmlat: setup %s: %s\n", p, odm_strerror(r ? r : -ENOMEM));
        return 1;
    }
    memset(L.buf, 0x5a, maxs);
    /* Treq: zero-byte request/response round trips (none for the local backend). */
    double t0 = now_us();
    for (int i = 0; i < L.iters && !L.local; i++)
        if ((r = odm_null(L.c))) return fprintf(stderr, "odmlat: null: %s\n", odm_strerror(r)), 1;
    L.treq = L.local ? 0 : (now_us() - t0) / L.iters;
    int rc = 0;
    /* writes first: the reads then read data that exists */
    for (int k = 0; k < L.n && !rc; k++) rc = measure(&L, k, ODM_WRITE);
    for (int k = 0; k < L.n && !rc; k++) rc = measure(&L, k, ODM_READ);
    for (int d = 0; d < 2; d++)
        for (int op = 0; op < 2; op++)
            L.ok[d][op] = fit(L.pts, L.n, d, op, &L.a[d][op], &L.b[d][op]) == 0;
    print_tables(&L);
    if (L.json) write_json(&L);
    odm_abort(L.c, L.fid);
    odm_free(L.c, L.buf);
    odm_fini(L.c);
    return rc ? 1 : 0;
}
