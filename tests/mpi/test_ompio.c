/*
 * test_ompio.c — MPI-IO checks run by scripts/test-mpi.sh under mpirun against a real
 * dafsd (through fs_dafs/fbtl_dafs with Open MPI, through libdafs_preload.so with MPICH).
 *
 *   test_ompio CASE FILE [ARGS]    run one case on FILE (an MPI file name), as every rank
 *   test_ompio expect SEED NBYTES  print the bytes the cases write (for cmp against the
 *                                  server's export directory)
 *
 * Every case prints "ok CASE: what" / "FAIL CASE: what" lines from rank 0 (failures from
 * any rank) and exits non-zero if anything failed on any rank.
 * Data: byte at file offset o of a file written with SEED is pattern(SEED, o).
 */
#include <errno.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pthread.h>

#include "test_ompio.h"

int rank, nprocs, failures;

unsigned char pattern(unsigned seed, uint64_t o)
{
    return (unsigned char)((o * 131u) ^ (o >> 9) ^ (seed * 29u));
}

void fill(unsigned char *b, size_t n, unsigned seed, uint64_t off)
{
    for (size_t i = 0; i < n; i++) {
        b[i] = pattern(seed, off + i);
    }
}

/* Index of the first byte differing from the pattern, or -1. */
long mismatch(const unsigned char *b, size_t n, unsigned seed, uint64_t off)
{
    for (size_t i = 0; i < n; i++) {
        if (b[i] != pattern(seed, off + i)) {
            return (long)i;
        }
    }
    return -1;
}

/* Report a check: collective over MPI_COMM_WORLD (all ranks must call it). */
void check(const char *name, int ok)
{
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!ok) {
        printf("FAIL %s (rank %d)\n", name, rank);
    }
    if (rank == 0 && all) {
        printf("ok   %s\n", name);
    }
    if (!all) {
        failures++;
    }
    fflush(stdout);
}

int err_class(int rc)
{
    int cls = rc;
    if (rc != MPI_SUCCESS) {
        MPI_Error_class(rc, &cls);
    }
    return cls;
}

void say(const char *what, int rc)
{
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        printf("    rank %d: %s: error class %d: %s\n", rank, what, err_class(rc), msg);
    }
}

int count_of(MPI_Status *st)
{
    int n = -1;
    MPI_Get_count(st, MPI_BYTE, &n);
    return n;
}

/* Independent and collective I/O, contiguous: rank r owns block r of `blk` bytes. */
static void case_rw(const char *name, size_t blk)
{
    unsigned char *w = malloc(blk), *r = malloc(blk);
    MPI_File fh;
    MPI_Status st;
    MPI_Offset off = (MPI_Offset)rank * (MPI_Offset)blk;
    int rc = MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_RDWR,
                           MPI_INFO_NULL, &fh);
    say("open", rc);
    check("rw: MPI_File_open (create)", rc == MPI_SUCCESS);
    if (rc != MPI_SUCCESS) {
        return;
    }
    /* Independent: first half of my block. */
    fill(w, blk, 1, (uint64_t)off);
    rc = MPI_File_write_at(fh, off, w, (int)(blk / 2), MPI_BYTE, &st);
    check("rw: MPI_File_write_at (independent)", rc == MPI_SUCCESS && count_of(&st) == (int)(blk / 2));
    /* Collective: second half. */
    rc = MPI_File_write_at_all(fh, off + (MPI_Offset)(blk / 2), w + blk / 2,
                               (int)(blk - blk / 2), MPI_BYTE, &st);
    say("write_at_all", rc);
    check("rw: MPI_File_write_at_all (collective)", rc == MPI_SUCCESS);
    rc = MPI_File_sync(fh);
    check("rw: MPI_File_sync", rc == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    /* Read the next rank's block (data written by another process). */
    int peer = (rank + 1) % nprocs;
    MPI_Offset poff = (MPI_Offset)peer * (MPI_Offset)blk;
    memset(r, 0, blk);
    rc = MPI_File_read_at(fh, poff, r, (int)blk, MPI_BYTE, &st);
    check("rw: MPI_File_read_at of another rank's block, byte for byte",
          rc == MPI_SUCCESS && count_of(&st) == (int)blk && mismatch(r, blk, 1, (uint64_t)poff) < 0);
    memset(r, 0, blk);
    rc = MPI_File_read_at_all(fh, poff, r, (int)blk, MPI_BYTE, &st);
    check("rw: MPI_File_read_at_all (collective), byte for byte",
          rc == MPI_SUCCESS && mismatch(r, blk, 1, (uint64_t)poff) < 0);
    /* Individual file pointer: seek + read. */
    memset(r, 0, blk);
    MPI_File_seek(fh, off, MPI_SEEK_SET);
    rc = MPI_File_read(fh, r, (int)blk, MPI_BYTE, &st);
    MPI_Offset pos = -1;
    MPI_File_get_position(fh, &pos);
    check("rw: MPI_File_seek + MPI_File_read moves the file pointer",
          rc == MPI_SUCCESS && mismatch(r, blk, 1, (uint64_t)off) < 0 && pos == off + (MPI_Offset)blk);
    /* Read past the end: short count. */
    MPI_Offset end = (MPI_Offset)nprocs * (MPI_Offset)blk;
    rc = MPI_File_read_at(fh, end - 10, r, 100, MPI_BYTE, &st);
    check("rw: read across end of file gives a short count", rc == MPI_SUCCESS && count_of(&st) == 10);
    rc = MPI_File_close(&fh);
    check("rw: MPI_File_close", rc == MPI_SUCCESS);
    free(w);
    free(r);
}

/* Non-blocking: iwrite_at + MPI_Wait, iread_at + MPI_Test polling, several in flight. */
static void case_nb(const char *name, size_t blk)
{
    enum { K = 4 };
    unsigned char *w = malloc(blk * K), *r = calloc(K, blk);
    MPI_File fh;
    MPI_Request req[K];
    MPI_Status st[K];
    int rc = MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_RDWR,
                           MPI_INFO_NULL, &fh);
    check("nb: open", rc == MPI_SUCCESS);
    if (rc != MPI_SUCCESS) {
        return;
    }
    MPI_Offset base = (MPI_Offset)rank * (MPI_Offset)(blk * K);
    fill(w, blk * K, 2, (uint64_t)base);
    int ok = 1;
    for (int i = 0; i < K; i++) {
        rc = MPI_File_iwrite_at(fh, base + (MPI_Offset)(i * blk), w + i * blk, (int)blk,
                                MPI_BYTE, &req[i]);
        ok &= rc == MPI_SUCCESS;
    }
    rc = MPI_Waitall(K, req, st);
    ok &= rc == MPI_SUCCESS;
    for (int i = 0; i < K; i++) {
        ok &= count_of(&st[i]) == (int)blk;
    }
    check("nb: 4 x MPI_File_iwrite_at + MPI_Waitall", ok);
    MPI_File_sync(fh);
    MPI_Barrier(MPI_COMM_WORLD);
    ok = 1;
    for (int i = 0; i < K; i++) {
        rc = MPI_File_iread_at(fh, base + (MPI_Offset)(i * blk), r + i * blk, (int)blk,
                               MPI_BYTE, &req[i]);
        ok &= rc == MPI_SUCCESS;
    }
    /* Poll with MPI_Test: completions must arrive without a blocking wait. */
    int polls = 0, done = 0;
    while (!done && polls < 10000000) {
        MPI_Testall(K, req, &done, st);
        polls++;
    }
    check("nb: 4 x MPI_File_iread_at complete through MPI_Testall polling", ok && done);
    check("nb: data read back byte for byte", mismatch(r, blk * K, 2, (uint64_t)base) < 0);
    /* Overlap: the request is outstanding while the process computes. */
    memset(r, 0, blk);
    rc = MPI_File_iread_at(fh, base, r, (int)blk, MPI_BYTE, &req[0]);
    volatile double x = 0;
    for (int i = 0; i < 100000; i++) {
        x += i * 0.5;
    }
    rc |= MPI_Wait(&req[0], &st[0]);
    check("nb: MPI_File_iread_at + compute + MPI_Wait", rc == MPI_SUCCESS &&
          count_of(&st[0]) == (int)blk && mismatch(r, blk, 2, (uint64_t)base) < 0);
    MPI_File_close(&fh);
    free(w);
    free(r);
}

/* MPI_THREAD_MULTIPLE: threads of one rank do blocking and non-blocking I/O on one file
 * at once (the component serializes its single client; nothing may fail or mix up). */
enum { THREADS = 4, ROUNDS = 8 };
struct thread_arg {
    MPI_File fh;
    size_t blk;
    int t, ok;
};

static void *thread_io(void *p)
{
    struct thread_arg *a = p;
    unsigned char *w = malloc(a->blk), *r = malloc(a->blk);
    MPI_Offset off = ((MPI_Offset)rank * THREADS + a->t) * (MPI_Offset)a->blk;
    a->ok = 1;
    for (int i = 0; i < ROUNDS; i++) {
        fill(w, a->blk, (unsigned)(10 + i), (uint64_t)off);
        MPI_Status st;
        MPI_Request req;
        a->ok &= MPI_File_write_at(a->fh, off, w, (int)a->blk, MPI_BYTE, &st) == MPI_SUCCESS;
        memset(r, 0, a->blk);
        a->ok &= MPI_File_iread_at(a->fh, off, r, (int)a->blk, MPI_BYTE, &req) == MPI_SUCCESS;
        a->ok &= MPI_Wait(&req, &st) == MPI_SUCCESS;
        a->ok &= mismatch(r, a->blk, (unsigned)(10 + i), (uint64_t)off) < 0;
    }
    free(w);
    free(r);
    return NULL;
}

static void case_threads(const char *name, size_t blk, int provided)
{
    check("threads: MPI_THREAD_MULTIPLE provided", provided == MPI_THREAD_MULTIPLE);
    MPI_File fh;
    int rc = MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    check("threads: open", rc == MPI_SUCCESS);
    if (rc != MPI_SUCCESS || provided != MPI_THREAD_MULTIPLE) {
        return;
    }
    pthread_t th[THREADS];
    struct thread_arg args[THREADS];
    for (int t = 0; t < THREADS; t++) {
        args[t] = (struct thread_arg){.fh = fh, .blk = blk, .t = t, .ok = 0};
        pthread_create(&th[t], NULL, thread_io, &args[t]);
    }
    int ok = 1;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        ok &= args[t].ok;
    }
    check("threads: 4 threads x 8 rounds of write_at + iread_at/MPI_Wait, byte for byte", ok);
    MPI_File_close(&fh);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "expect") == 0) {
        unsigned seed = (unsigned)atoi(argv[2]);
        size_t n = (size_t)atoll(argv[3]);
        for (size_t o = 0; o < n; o++) {
            putchar(pattern(seed, o));
        }
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: %s CASE FILE [ARGS] | %s expect SEED NBYTES\n", argv[0], argv[0]);
        return 2;
    }
    int provided = MPI_THREAD_SINGLE;
    if (strcmp(argv[1], "threads") == 0) {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    const char *c = argv[1], *f = argv[2];
    size_t blk = argc > 3 ? (size_t)atoll(argv[3]) : 1 << 20;
    if (strcmp(c, "rw") == 0) {
        case_rw(f, blk);
    } else if (strcmp(c, "nb") == 0) {
        case_nb(f, blk);
    } else if (strcmp(c, "threads") == 0) {
        case_threads(f, blk, provided);
    } else if (!run_more_cases(c, f, blk)) {
        if (rank == 0) {
            fprintf(stderr, "unknown case %s\n", c);
        }
        failures++;
    }
    int any = 0;
    MPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    return any == 0 ? 0 : 1;
}
