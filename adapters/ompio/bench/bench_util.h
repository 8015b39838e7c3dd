/* Helpers of the MPI-IO benchmark (seed 004): data pattern, clocks, CPU time, JSON records.
 * Plain C and MPI only: the benchmark must run unchanged on every MPI-IO backend. */
#ifndef DAFS_MPIIO_BENCH_UTIL_H
#define DAFS_MPIIO_BENCH_UTIL_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

/* Byte at file offset `off` of a file filled with seed `seed`. Every 8-byte word is a hash of
 * its index, so a block read from the wrong offset (even a multiple of 256 or 4096 away) does
 * not match. */
uint8_t pattern_byte(uint64_t seed, uint64_t off);

/* Fills buf with the pattern of [off, off + len). */
void pattern_fill(uint64_t seed, uint64_t off, uint8_t *buf, size_t len);

/* Returns the index of the first byte of buf that differs from the pattern of
 * [off, off + len), or -1 when all match. */
long pattern_check(uint64_t seed, uint64_t off, const uint8_t *buf, size_t len);

/* Monotonic clock in seconds. */
double now_s(void);

/* User + system CPU seconds of this process so far (getrusage). */
double cpu_s(void);

/* Busy computation for `secs` seconds: no system calls, no MPI calls, so any I/O progress
 * during it comes from below MPI (the DAFS library, a server, kernel threads). */
void compute_for(double secs);

/* Parses "4", "4k", "1m", "2g" into bytes; returns 0 on a malformed or zero value. */
uint64_t parse_size(const char *s);

/* Parses a comma-separated list of sizes into out (at most max entries); returns the count,
 * or -1 on a malformed entry. */
int parse_size_list(const char *s, uint64_t *out, int max);

/* Parses a comma-separated list of fractions in [0, 1) into out; returns the count or -1. */
int parse_fraction_list(const char *s, double *out, int max);

/* Aborts the MPI job with a message naming the call and its MPI error string. */
void die_mpi(const char *what, int rc);

/* Aborts the MPI job with a message. */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
