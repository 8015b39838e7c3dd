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

int main(int argc, char **argv) {
    odm_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    const char *dir = "", *label = "", *json = NULL, *sizes_arg = NULL;
    int iters = 1000;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--backend")) cfg.backend = !strcmp(v, "local") ? ODM_BACKEND_LOCAL : ODM_BACKEND_DAFS;
        else if (!strcmp(a, "--target")) cfg.target = v;
        else if (!strcmp(a, "--provider")) cfg.provider = !strcmp(v, "tcp") ? ODM_PROVIDER_TCP : ODM_PROVIDER_AUTO;
        else if (!strcmp(a, "--dir")) dir = v;
        else if (!strcmp(a, "--iters")) iters = atoi(v);
        else if (!strcmp(a, "--sizes")) sizes_arg = v;
        else if (!strcmp(a, "--label")) label = v;
        else if (!strcmp(a, "--json")) json = v;
        else usage();
    }
    if (argc % 2 == 0 || !cfg.target || iters < 2) usage();
    cfg.max_outstanding = 1;
    odm_ctx_t *c = NULL;
    int r = odm_init(&cfg, &c);
    if (r) {
        fprintf(stderr, "odmlat: odm_init %s: %s\n", cfg.target, odm_strerror(r));
        return 1;
    }
    odm_info_t info;
    odm_info(c, &info);
    size_t thr = info.inline_threshold_bytes;
    struct point pts[MAXS];
    int n = 0;
    if (sizes_arg) {
        char l[512];
        snprintf(l, sizeof l, "%s", sizes_arg);
        for (char *s = strtok(l, ","); s && n < MAXS; s = strtok(NULL, ","))
            pts[n++].size = strtoull(s, NULL, 0);
    } else {
        size_t base = thr ? thr : 16384;
        size_t mult[] = {0, 0, 0, 0, 2, 4, 8, 16};
        for (int i = 0; i < 8; i++) pts[n++].size = mult[i] ? base * mult[i] : base >> (3 - i);
    }
    size_t maxs = 0;
    for (int i = 0; i < n; i++) {
        if (!pts[i].size) usage();
        if (pts[i].size > maxs) maxs = pts[i].size;
    }
    /* One file holding `span` bytes; offsets increase and wrap. */
    uint64_t span = (uint64_t)maxs * 64;
    char p[512];
    snprintf(p, sizeof p, "%s/odmlat-%d.dat", dir, (int)getpid());
    odm_fid_t fid = 0;
    unsigned char *buf = odm_alloc(c, maxs);
    if (!buf || (r = odm_create(c, p, span, 1, "odmlat", 6, &fid))) {
        fprintf(stderr, "odmlat: setup %s: %s\n", p, odm_strerror(r ? r : -ENOMEM));
        return 1;
    }
    memset(buf, 0x5a, maxs);
    /* Treq: zero-byte round trips. */
    double t0 = now_us();
    for (int i = 0; i < iters; i++)
        if ((r = odm_null(c))) return fprintf(stderr, "odmlat: null: %s\n", odm_strerror(r)), 1;
    double treq = (now_us() - t0) / iters;
    int rc = 0;
    for (int op = 0; op < 2; op++) {
        /* writes first: the reads then read data that exists */
        int which = op == 0 ? ODM_WRITE : ODM_READ;
        for (int k = 0; k < n; k++) {
            odm_info_t before, after;
            odm_info(c, &before);
            odm_ioreq_t q;
            memset(&q, 0, sizeof q);
            q.op = (uint32_t)which, q.fid = fid, q.buf = buf, q.len = pts[k].size;
            odm_ioreq_t *s[1] = {&q};
            uint64_t off = 0;
            t0 = now_us();
            for (int i = 0; i < iters; i++) {
                q.offset = off;
                off = off + pts[k].size + pts[k].size > span ? 0 : off + pts[k].size;
                if (odm_io(c, s, 1, s, 1, NULL, 0, 0, NULL, -1) || q.result != (int64_t)q.len) {
                    fprintf(stderr, "odmlat: I/O of %zu failed: %s\n", q.len,
                            odm_strerror((int)q.result));
                    rc = 1;
                    break;
                }
            }
            pts[k].us[which == ODM_READ ? 0 : 1] = (now_us() - t0) / iters;
            odm_info(c, &after);
            /* direct if most of this size's backend I/Os went direct */
            pts[k].direct = after.direct_ios - before.direct_ios > after.inline_ios - before.inline_ios;
        }
    }
    printf("%s: backend %s, provider %s, inline threshold %zu bytes, %d iterations per point\n\n",
           label, info.backend, info.provider, thr, iters);
    printf("| setup | size bytes | path | read us | write us |\n|---|---:|---|---:|---:|\n");
    for (int k = 0; k < n; k++)
        printf("| %s | %zu | %s | %.1f | %.1f |\n", label, pts[k].size,
               !strcmp(info.backend, "local") ? "local" : pts[k].direct ? "direct" : "inline",
               pts[k].us[0], pts[k].us[1]);
    double ai[2] = {0}, bi[2] = {0}, ad[2] = {0}, bd[2] = {0};
    int oki[2], okd[2];
    for (int op = 0; op < 2; op++) {
        oki[op] = fit(pts, n, 0, op, &ai[op], &bi[op]) == 0;
        okd[op] = fit(pts, n, 1, op, &ad[op], &bd[op]) == 0;
    }
    int local = !strcmp(info.backend, "local");
#define RATE(ok, b) ((ok) && (b) > 0 ? 1.0 / (b) : 0.0) /* bytes/us = MB/s */
    printf("\n| setup | component | read | write | seed 002 read | seed 002 write |\n"
           "|---|---|---:|---:|---:|---:|\n");
    printf("| %s | Treq (us) | %.1f | %.1f | 90 | 90 |\n", label, local ? 0.0 : treq, local ? 0.0 : treq);
    printf("| %s | Tdisk (us) | %.1f | %.1f | 519 | 535 |\n", label,
           oki[0] ? ai[0] - (local ? 0 : treq) : 0, oki[1] ? ai[1] - (local ? 0 : treq) : 0);
    printf("| %s | Trdma (us) | %.1f | %.1f | 372 | 446 |\n", label,
           oki[0] && okd[0] ? ad[0] - ai[0] : 0, oki[1] && okd[1] ? ad[1] - ai[1] : 0);
    printf("| %s | Rinline (MB/s) | %.1f | %.1f | 47.4 | 44.4 |\n", label, RATE(oki[0], bi[0]),
           RATE(oki[1], bi[1]));
    printf("| %s | Rdirect (MB/s) | %.1f | %.1f | 48.8 | 43.5 |\n", label, RATE(okd[0], bd[0]),
           RATE(okd[1], bd[1]));
    if (json) {
        FILE *f = fopen(json, "w");
        if (f) {
            fprintf(f, "{\"setup\": \"%s\", \"backend\": \"%s\", \"provider\": \"%s\", "
                       "\"inline_threshold_bytes\": %zu, \"iters\": %d, \"points\": [",
                    label, info.backend, info.provider, thr, iters);
            for (int k = 0; k < n; k++)
                fprintf(f, "%s{\"size_bytes\": %zu, \"path\": \"%s\", \"read_us\": %.2f, \"write_us\": %.2f}",
                        k ? ", " : "", pts[k].size, local ? "local" : pts[k].direct ? "direct" : "inline",
                        pts[k].us[0], pts[k].us[1]);
            fprintf(f, "], \"treq_us\": %.2f, \"fit\": {\"inline\": {\"read\": [%.3f, %.3f], \"write\": [%.3f, %.3f]}, "
                       "\"direct\": {\"read\": [%.3f, %.3f], \"write\": [%.3f, %.3f]}}}\n",
                    local ? 0.0 : treq, ai[0], RATE(oki[0], bi[0]), ai[1], RATE(oki[1], bi[1]),
                    ad[0], RATE(okd[0], bd[0]), ad[1], RATE(okd[1], bd[1]));
            fclose(f);
        }
    }
    odm_abort(c, fid);
    odm_free(c, buf);
    odm_fini(c);
    return rc;
}
