/* Helpers of the MPI-IO benchmark (seed 004); see bench_util.h. */
#define _GNU_SOURCE
#include "bench_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static uint64_t mix64(uint64_t x)
{
    /* splitmix64 finaliser: cheap, and every input bit changes about half the output bits. */
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint8_t pattern_byte(uint64_t seed, uint64_t off)
{
    return (uint8_t)(mix64(seed ^ (off / 8)) >> (8 * (off % 8)));
}

void pattern_fill(uint64_t seed, uint64_t off, uint8_t *buf, size_t len)
{
    size_t i = 0;
    /* Byte by byte up to a word boundary, then whole words (the common case in bulk). */
    while (i < len && (off + i) % 8 != 0) {
        buf[i] = pattern_byte(seed, off + i);
        i++;
    }
    while (i + 8 <= len) {
        uint64_t w = mix64(seed ^ ((off + i) / 8));
        memcpy(buf + i, &w, 8); /* little-endian: byte k of the word is w >> 8k */
        i += 8;
    }
    for (; i < len; i++) buf[i] = pattern_byte(seed, off + i);
}

long pattern_check(uint64_t seed, uint64_t off, const uint8_t *buf, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (buf[i] != pattern_byte(seed, off + i)) return (long)i;
    }
    return -1;
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

void compute_for(double secs)
{
    /* A dependent arithmetic chain keeps the core busy; the clock (vDSO, no system call) is
     * read every 64 steps so the overshoot stays far below a microsecond. */
    static volatile uint64_t sink;
    uint64_t acc = sink;
    double end = now_s() + secs;
    do {
        for (int i = 0; i < 64; i++) acc = acc * 6364136223846793005ULL + 1442695040888963407ULL;
    } while (now_s() < end);
    sink = acc;
}

uint64_t parse_size(const char *s)
{
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s) return 0;
    uint64_t mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1ULL << 10; end++; break;
    case 'm': case 'M': mult = 1ULL << 20; end++; break;
    case 'g': case 'G': mult = 1ULL << 30; end++; break;
    default: break;
    }
    if (*end != '\0') return 0;
    return (uint64_t)v * mult;
}

int parse_size_list(const char *s, uint64_t *out, int max)
{
    char *copy = strdup(s), *save = NULL;
    int n = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        uint64_t v = parse_size(tok);
        if (v == 0 || n == max) { free(copy); return -1; }
        out[n++] = v;
    }
    free(copy);
    return n;
}

int parse_fraction_list(const char *s, double *out, int max)
{
    char *copy = strdup(s), *save = NULL;
    int n = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end = NULL;
        double v = strtod(tok, &end);
        if (end == tok || *end != '\0' || v < 0.0 || v >= 1.0 || n == max) { free(copy); return -1; }
        out[n++] = v;
    }
    free(copy);
    return n;
}

void die_mpi(const char *what, int rc)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0, cls = 0;
    MPI_Error_string(rc, msg, &len);
    MPI_Error_class(rc, &cls);
    fprintf(stderr, "mpiio_bench: %s failed: %s (error class %d)\n", what, msg, cls);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mpiio_bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    MPI_Abort(MPI_COMM_WORLD, 2);
}
