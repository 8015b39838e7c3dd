/*
 * test_ompio_more.c — the remaining MPI-IO cases: file views with non-contiguous
 * derived datatypes, sizes/sync/delete and error classes, registration cache reuse and
 * invalidation, and a server killed under a running job.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "test_ompio.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int open_rw(const char *name, MPI_File *fh)
{
    int rc = MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_RDWR,
                           MPI_INFO_NULL, fh);
    say("open", rc);
    return rc;
}

/* Vector view: rank r owns bytes [(j*nprocs + r)*B, +B) for j < nblk; written with one
 * collective call, read back by rank 0 through the default (contiguous) view. */
static void case_vector(const char *name, size_t B)
{
    const int nblk = 16;
    size_t total = (size_t)nprocs * nblk * B;
    unsigned char *mine = malloc(nblk * B), *all = malloc(total);
    for (int j = 0; j < nblk; j++) {
        fill(mine + j * B, B, 3, ((uint64_t)j * nprocs + rank) * B);
    }
    MPI_File fh;
    if (open_rw(name, &fh) != MPI_SUCCESS) {
        check("vector: open", 0);
        return;
    }
    MPI_Datatype ft;
    MPI_Type_vector(nblk, (int)B, (int)(B * nprocs), MPI_BYTE, &ft);
    MPI_Type_commit(&ft);
    int rc = MPI_File_set_view(fh, (MPI_Offset)(rank * B), MPI_BYTE, ft, "native", MPI_INFO_NULL);
    rc |= MPI_File_write_all(fh, mine, (int)(nblk * B), MPI_BYTE, MPI_STATUS_IGNORE);
    check("vector: set_view(MPI_Type_vector) + MPI_File_write_all", rc == MPI_SUCCESS);
    MPI_File_sync(fh);
    MPI_Barrier(MPI_COMM_WORLD);
    memset(mine, 0, nblk * B);
    MPI_File_seek(fh, 0, MPI_SEEK_SET);
    rc = MPI_File_read(fh, mine, (int)(nblk * B), MPI_BYTE, MPI_STATUS_IGNORE);
    int ok = rc == MPI_SUCCESS;
    for (int j = 0; j < nblk; j++) {
        ok &= mismatch(mine + j * B, B, 3, ((uint64_t)j * nprocs + rank) * B) < 0;
    }
    check("vector: independent read through the view, byte for byte", ok);
    rc = MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
    if (rank == 0) {
        rc |= MPI_File_read_at(fh, 0, all, (int)total, MPI_BYTE, MPI_STATUS_IGNORE);
    }
    check("vector: whole file through the default view, byte for byte",
          rank != 0 || (rc == MPI_SUCCESS && mismatch(all, total, 3, 0) < 0));
    MPI_Type_free(&ft);
    MPI_File_close(&fh);
    free(mine);
    free(all);
}

/* Subarray view: an N x (N*nprocs) byte matrix, rank r owns columns [r*N, (r+1)*N). */
static void case_subarray(const char *name, int N)
{
    int gsz[2] = {N, N * nprocs}, sub[2] = {N, N}, st[2] = {0, rank * N};
    unsigned char *m = malloc((size_t)N * N);
    for (int i = 0; i < N; i++) {
        fill(m + (size_t)i * N, (size_t)N, 4, (uint64_t)i * N * nprocs + (uint64_t)rank * N);
    }
    MPI_File fh;
    if (open_rw(name, &fh) != MPI_SUCCESS) {
        check("subarray: open", 0);
        return;
    }
    MPI_Datatype ft;
    MPI_Type_create_subarray(2, gsz, sub, st, MPI_ORDER_C, MPI_BYTE, &ft);
    MPI_Type_commit(&ft);
    int rc = MPI_File_set_view(fh, 0, MPI_BYTE, ft, "native", MPI_INFO_NULL);
    rc |= MPI_File_write_all(fh, m, N * N, MPI_BYTE, MPI_STATUS_IGNORE);
    check("subarray: set_view(MPI_Type_create_subarray) + MPI_File_write_all", rc == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    memset(m, 0, (size_t)N * N);
    MPI_File_seek(fh, 0, MPI_SEEK_SET);
    rc = MPI_File_read_all(fh, m, N * N, MPI_BYTE, MPI_STATUS_IGNORE);
    int ok = rc == MPI_SUCCESS;
    for (int i = 0; i < N; i++) {
        ok &= mismatch(m + (size_t)i * N, (size_t)N, 4,
                       (uint64_t)i * N * nprocs + (uint64_t)rank * N) < 0;
    }
    check("subarray: MPI_File_read_all through the view, byte for byte", ok);
    MPI_Type_free(&ft);
    MPI_File_close(&fh);
    free(m);
}

static MPI_Offset size_of(MPI_File fh)
{
    MPI_Offset sz = -1;
    MPI_File_get_size(fh, &sz);
    return sz;
}

static char *with_suffix(const char *name, const char *suffix)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s%s", name, suffix);
    return buf;
}

/* set_size / get_size / preallocate / sync / delete, and MPI error classes. */
static void case_sizes(const char *name)
{
    MPI_File fh;
    unsigned char b[1000];
    fill(b, sizeof b, 5, 0);
    if (open_rw(name, &fh) != MPI_SUCCESS) {
        check("sizes: open", 0);
        return;
    }
    if (rank == 0) {
        MPI_File_write_at(fh, 0, b, (int)sizeof b, MPI_BYTE, MPI_STATUS_IGNORE);
    }
    int rc = MPI_File_sync(fh);
    MPI_Barrier(MPI_COMM_WORLD);
    check("sizes: MPI_File_sync", rc == MPI_SUCCESS);
    check("sizes: MPI_File_get_size after a write", size_of(fh) == 1000);
    rc = MPI_File_set_size(fh, 300);
    check("sizes: MPI_File_set_size shrinks (every rank sees 300)", rc == MPI_SUCCESS && size_of(fh) == 300);
    rc = MPI_File_set_size(fh, 5000);
    check("sizes: MPI_File_set_size extends (every rank sees 5000)", rc == MPI_SUCCESS && size_of(fh) == 5000);
    rc = MPI_File_preallocate(fh, 8192);
    check("sizes: MPI_File_preallocate", rc == MPI_SUCCESS && size_of(fh) == 8192);
    unsigned char r[1000];
    rc = MPI_File_read_at(fh, 0, r, 1000, MPI_BYTE, MPI_STATUS_IGNORE);
    int zero = 1;
    for (int i = 300; i < 1000; i++) {
        zero &= r[i] == 0;
    }
    check("sizes: data kept below the cut, zeros after the extension",
          rc == MPI_SUCCESS && mismatch(r, 300, 5, 0) < 0 && zero);
    rc = MPI_File_close(&fh);
    check("sizes: close", rc == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        rc = MPI_File_delete(name, MPI_INFO_NULL);
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    check("sizes: MPI_File_delete", rc == MPI_SUCCESS);
    rc = MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    check("errors: open of a deleted file -> MPI_ERR_NO_SUCH_FILE", err_class(rc) == MPI_ERR_NO_SUCH_FILE);
    rc = MPI_File_delete(with_suffix(name, ".nope"), MPI_INFO_NULL);
    check("errors: delete of a missing file -> MPI_ERR_NO_SUCH_FILE", err_class(rc) == MPI_ERR_NO_SUCH_FILE);
    /* Exclusive creation of an existing file. */
    open_rw(with_suffix(name, ".x"), &fh);
    MPI_File_close(&fh);
    rc = MPI_File_open(MPI_COMM_WORLD, with_suffix(name, ".x"),
                       MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    check("errors: MPI_MODE_EXCL on an existing file -> MPI_ERR_FILE_EXISTS", err_class(rc) == MPI_ERR_FILE_EXISTS);
    /* A file in a directory that does not exist. */
    rc = MPI_File_open(MPI_COMM_WORLD, with_suffix(name, ".nodir/f"),
                       MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    check("errors: create under a missing directory -> MPI_ERR_NO_SUCH_FILE", err_class(rc) == MPI_ERR_NO_SUCH_FILE);
    /* Delete on close. */
    rc = MPI_File_open(MPI_COMM_WORLD, with_suffix(name, ".tmp"),
                       MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh);
    rc |= MPI_File_close(&fh);
    MPI_Barrier(MPI_COMM_WORLD);
    int gone = MPI_File_open(MPI_COMM_WORLD, with_suffix(name, ".tmp"), MPI_MODE_RDONLY,
                             MPI_INFO_NULL, &fh);
    check("errors: MPI_MODE_DELETE_ON_CLOSE removes the file", rc == MPI_SUCCESS &&
          err_class(gone) == MPI_ERR_NO_SUCH_FILE);
}

/* Registration cache: reuse (hits), a released buffer (invalidation), eviction. The
 * script checks the counters line; this checks the data. */
static void case_regcache(const char *name, size_t blk)
{
    MPI_File fh;
    if (open_rw(name, &fh) != MPI_SUCCESS) {
        check("regcache: open", 0);
        return;
    }
    unsigned char *w = malloc(blk);
    MPI_Offset off = (MPI_Offset)rank * (MPI_Offset)blk;
    fill(w, blk, 6, (uint64_t)off);
    int rc = MPI_File_write_at(fh, off, w, (int)blk, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_sync(fh);
    MPI_Barrier(MPI_COMM_WORLD);
    int ok = rc == MPI_SUCCESS;
    for (int i = 0; i < 5; i++) { /* the same buffer again and again: hits */
        memset(w, 0, blk);
        ok &= MPI_File_read_at(fh, off, w, (int)blk, MPI_BYTE, MPI_STATUS_IGNORE) == MPI_SUCCESS;
        ok &= mismatch(w, blk, 6, (uint64_t)off) < 0;
    }
    check("regcache: 5 reads into the same buffer, byte for byte", ok);
    /* Unmap the buffer, map a new one (usually at the same address), read another
     * block into it: it must hold that block, and the old registration must be gone. */
    size_t len = blk;
    unsigned char *a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ok = MPI_File_read_at(fh, off, a, (int)blk, MPI_BYTE, MPI_STATUS_IGNORE) == MPI_SUCCESS;
    munmap(a, len);
    unsigned char *b = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    MPI_Offset poff = (MPI_Offset)((rank + 1) % nprocs) * (MPI_Offset)blk;
    ok &= MPI_File_read_at(fh, poff, b, (int)blk, MPI_BYTE, MPI_STATUS_IGNORE) == MPI_SUCCESS;
    check("regcache: munmap + mmap again: the new buffer gets the new data",
          ok && mismatch(b, blk, 6, (uint64_t)poff) < 0);
    munmap(b, len);
    /* free() of a malloc'd buffer, then a new one. */
    free(w);
    w = malloc(blk);
    ok = MPI_File_read_at(fh, poff, w, (int)blk, MPI_BYTE, MPI_STATUS_IGNORE) == MPI_SUCCESS;
    check("regcache: free + malloc again: byte for byte", ok && mismatch(w, blk, 6, (uint64_t)poff) < 0);
    /* Two buffers in turn: with fbtl_dafs_regcache_size=1 each use evicts the other. */
    unsigned char *c = malloc(blk);
    ok = 1;
    for (int i = 0; i < 3; i++) {
        ok &= MPI_File_read_at(fh, off, c, (int)blk, MPI_BYTE, MPI_STATUS_IGNORE) == MPI_SUCCESS;
        ok &= MPI_File_read_at(fh, poff, w, (int)blk, MPI_BYTE, MPI_STATUS_IGNORE) == MPI_SUCCESS;
        ok &= mismatch(c, blk, 6, (uint64_t)off) < 0 && mismatch(w, blk, 6, (uint64_t)poff) < 0;
    }
    check("regcache: two buffers in turn, byte for byte", ok);
    free(c);
    free(w);
    MPI_File_close(&fh);
}

static int wait_for_file(const char *path, double limit_s)
{
    double t0 = now_s();
    while (access(path, F_OK) != 0) {
        if (now_s() - t0 > limit_s) {
            return 0;
        }
        usleep(20000);
    }
    return 1;
}

/* The server is killed under the job (the script does it between READY and GO): every
 * I/O must end with an MPI error within the deadline, not hang. */
static void case_dead(const char *name, size_t blk)
{
    const char *ready = getenv("DAFS_TEST_READY"), *go = getenv("DAFS_TEST_GO");
    const char *lim = getenv("DAFS_TEST_LIMIT_S");
    double limit_s = lim != NULL ? atof(lim) : 30;
    MPI_File fh;
    unsigned char *w = malloc(blk);
    fill(w, blk, 7, 0);
    int rc = open_rw(name, &fh);
    rc |= MPI_File_write_at(fh, (MPI_Offset)rank * (MPI_Offset)blk, w, (int)blk, MPI_BYTE, MPI_STATUS_IGNORE);
    check("dead: open + write while the server is up", rc == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0 && ready != NULL) {
        FILE *f = fopen(ready, "w");
        if (f != NULL) {
            fclose(f);
        }
    }
    check("dead: the script killed the server", go != NULL && wait_for_file(go, 60));
    double t0 = now_s();
    MPI_Request req;
    MPI_Status st;
    rc = MPI_File_iwrite_at(fh, 0, w, (int)blk, MPI_BYTE, &req);
    if (rc == MPI_SUCCESS) {
        rc = MPI_Wait(&req, &st);
        if (rc == MPI_SUCCESS) {
            rc = st.MPI_ERROR;
        }
    }
    say("iwrite_at + wait", rc);
    check("dead: MPI_File_iwrite_at + MPI_Wait -> MPI_ERR_IO", err_class(rc) == MPI_ERR_IO);
    rc = MPI_File_read_at(fh, 0, w, (int)blk, MPI_BYTE, &st);
    /* Open MPI 4.1's OMPIO drops the fbtl's error of independent blocking I/O: the
     * call "succeeds" with a count of 0, and the error comes with the next sync. */
    check("dead: MPI_File_read_at is not reported complete", rc != MPI_SUCCESS || count_of(&st) < (int)blk);
    rc = MPI_File_sync(fh);
    say("sync", rc);
    check("dead: MPI_File_sync -> MPI_ERR_IO", err_class(rc) == MPI_ERR_IO);
    rc = MPI_File_write_at_all(fh, (MPI_Offset)rank * (MPI_Offset)blk, w, (int)blk, MPI_BYTE, MPI_STATUS_IGNORE);
    say("write_at_all", rc);
    /* Collective I/O on a contiguous view goes through OMPIO's "individual" path, which
     * drops the error too; then the next sync reports it. */
    int rc2 = rc == MPI_SUCCESS ? MPI_File_sync(fh) : rc;
    check("dead: MPI_File_write_at_all -> an MPI error (from the call or the next sync)",
          rc2 != MPI_SUCCESS);
    double dt = now_s() - t0;
    if (rank == 0) {
        printf("    errors reported %.1f s after the kill\n", dt);
    }
    check("dead: every error within the time limit", dt < limit_s);
    MPI_File_close(&fh);
    free(w);
}

/* Shared file pointers (Open MPI's sharedfp components over our fs/fbtl): ordered
 * writes land in rank order, shared writes each once. */
static void case_shared(const char *name)
{
    MPI_File fh;
    char line[32], all[16 * 64];
    snprintf(line, sizeof line, "rank%04d-ab\n", rank);
    int rc = open_rw(name, &fh);
    rc |= MPI_File_write_ordered(fh, line, 12, MPI_BYTE, MPI_STATUS_IGNORE);
    check("shared: MPI_File_write_ordered", rc == MPI_SUCCESS);
    rc = MPI_File_write_shared(fh, line, 12, MPI_BYTE, MPI_STATUS_IGNORE);
    check("shared: MPI_File_write_shared", rc == MPI_SUCCESS);
    MPI_File_sync(fh);
    MPI_Barrier(MPI_COMM_WORLD);
    int ok = 1;
    if (rank == 0 && nprocs <= 64) {
        memset(all, 0, sizeof all);
        ok = MPI_File_read_at(fh, 0, all, 24 * nprocs, MPI_BYTE, MPI_STATUS_IGNORE) == MPI_SUCCESS;
        int seen[64] = {0};
        for (int r = 0; r < nprocs; r++) {
            char want[32];
            snprintf(want, sizeof want, "rank%04d-ab\n", r);
            ok &= memcmp(all + 12 * r, want, 12) == 0; /* ordered part */
            int who = atoi(all + 12 * (nprocs + r) + 4); /* shared part: any order */
            ok &= who >= 0 && who < nprocs && memcmp(all + 12 * (nprocs + r), "rank", 4) == 0;
            if (ok) {
                seen[who]++;
            }
        }
        for (int r = 0; r < nprocs; r++) {
            ok &= seen[r] == 1;
        }
    }
    check("shared: ordered lines in rank order, shared lines once each", ok);
    MPI_File_close(&fh);
}

/* No server listening: opening fails with MPI_ERR_IO on every rank, promptly. */
static void case_noserver(const char *name)
{
    MPI_File fh;
    double t0 = now_s();
    int rc = MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    say("open", rc);
    check("noserver: MPI_File_open -> MPI_ERR_IO", err_class(rc) == MPI_ERR_IO);
    check("noserver: within the connect timeout", now_s() - t0 < 10);
}

int run_more_cases(const char *c, const char *file, size_t blk)
{
    if (strcmp(c, "vector") == 0) {
        case_vector(file, blk);
    } else if (strcmp(c, "subarray") == 0) {
        case_subarray(file, (int)blk);
    } else if (strcmp(c, "sizes") == 0) {
        case_sizes(file);
    } else if (strcmp(c, "regcache") == 0) {
        case_regcache(file, blk);
    } else if (strcmp(c, "shared") == 0) {
        case_shared(file);
    } else if (strcmp(c, "noserver") == 0) {
        case_noserver(file);
    } else if (strcmp(c, "dead") == 0) {
        case_dead(file, blk);
    } else {
        return 0;
    }
    return 1;
}
