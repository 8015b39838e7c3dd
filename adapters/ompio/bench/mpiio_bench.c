/* MPI-IO benchmark of seed 004 ("MPI-IO on DAFS"): plain MPI-IO calls only, so one binary
 * runs on every backend (Open MPI's ufs on local files, the fs_dafs component on `dafs:`
 * names, libnfs under a preload on `nfs://` names).
 *
 *   mpiio_bench [options] TEST FILE
 *
 * TEST is one of
 *   prepare    fill FILE (--size bytes) with the verification pattern
 *   latency    Fig. 6: --block (4) byte reads, sequential and random (0.5 MiB apart), and
 *              sequential writes (append) to --wfile
 *   bandwidth  Fig. 7: sequential read and write bandwidth for each of --blocks
 *   overlap    Fig. 8: MPI_File_iread_at, compute, MPI_Wait for each CPU fraction of
 *              --fractions at --block (64k) bytes
 *   memreg     Figs. 4/5: read latency for each of --blocks with --reuse percent of the
 *              reads into the same buffer (the others into a freshly mapped one)
 *   delete     MPI_File_delete of FILE and --wfile (rank 0; a missing file is no error)
 *
 * Every process works on its own 1/np of the file. Results are JSON records, one per line on
 * stdout (rank 0). Every read is checked against the pattern with --verify (then the timings
 * include the check); without it one block per measurement is checked outside the timing.
 * All I/O is blocking or has one request in flight: queue depth 1 on every backend. */
#define _GNU_SOURCE
#include "bench_util.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define DATA_SEED 0x5eed0004ULL
#define WRITE_SEED 0x77417465ULL
#define RANDOM_STRIDE_BYTES (512u * 1024u) /* the seed's random-read distance */
#define MAX_LIST 32

struct opts {
    const char *test, *file, *wfile, *label;
    uint64_t size_bytes, block_bytes;
    uint64_t blocks[MAX_LIST];
    int nblocks;
    double fractions[MAX_LIST];
    int nfractions;
    double secs;
    int reuse_pct;
    int verify;
};

struct ctx {
    const struct opts *o;
    int rank, np;
    uint64_t base, region_bytes; /* this rank's part of the file */
};

/* One measurement, summed over the ranks by finish(). */
struct meas {
    uint64_t ops, bytes;
    double elapsed_s, cpu_s, op_time_s; /* op_time_s: only the MPI calls (memreg) */
};

static void usage(void)
{
    fprintf(stderr,
            "usage: mpiio_bench [--size B] [--block B] [--blocks LIST] [--fractions LIST]\n"
            "                   [--secs S] [--reuse PCT] [--wfile NAME] [--label S] [--verify]\n"
            "                   prepare|latency|bandwidth|overlap|memreg|delete FILE\n");
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
    static const struct option longs[] = {
        {"size", 1, 0, 's'},   {"block", 1, 0, 'b'}, {"blocks", 1, 0, 'B'},
        {"fractions", 1, 0, 'f'}, {"secs", 1, 0, 't'}, {"reuse", 1, 0, 'r'},
        {"wfile", 1, 0, 'w'},  {"label", 1, 0, 'l'}, {"verify", 0, 0, 'v'},
        {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->size_bytes = 64ULL << 20;
    o->secs = 1.0;
    o->reuse_pct = 100;
    o->label = "";
    o->nblocks = parse_size_list("1,4,16,64,256,1k,4k,16k,64k,256k,1m", o->blocks, MAX_LIST);
    o->nfractions = parse_fraction_list("0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9", o->fractions, MAX_LIST);
    int c;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 's': o->size_bytes = parse_size(optarg); break;
        case 'b': o->block_bytes = parse_size(optarg); if (!o->block_bytes) die("bad --block %s", optarg); break;
        case 'B': o->nblocks = parse_size_list(optarg, o->blocks, MAX_LIST); break;
        case 'f': o->nfractions = parse_fraction_list(optarg, o->fractions, MAX_LIST); break;
        case 't': o->secs = atof(optarg); break;
        case 'r': o->reuse_pct = atoi(optarg); break;
        case 'w': o->wfile = optarg; break;
        case 'l': o->label = optarg; break;
        case 'v': o->verify = 1; break;
        default: usage(); die("bad option");
        }
    }
    if (argc - optind != 2) { usage(); die("need TEST and FILE"); }
    o->test = argv[optind];
    o->file = argv[optind + 1];
    if (o->size_bytes == 0) die("bad --size");
    if (o->nblocks <= 0) die("bad --blocks");
    if (o->nfractions <= 0) die("bad --fractions (each in [0, 1))");
    if (o->secs <= 0) die("bad --secs");
    if (o->reuse_pct < 0 || o->reuse_pct > 100) die("bad --reuse (0..100)");
}

static MPI_File open_file(const char *name, int amode)
{
    MPI_File fh;
    int rc = MPI_File_open(MPI_COMM_WORLD, name, amode, MPI_INFO_NULL, &fh);
    if (rc != MPI_SUCCESS) die_mpi(name, rc);
    return fh;
}

static void close_file(MPI_File *fh)
{
    int rc = MPI_File_close(fh);
    if (rc != MPI_SUCCESS) die_mpi("MPI_File_close", rc);
}

static void read_at(MPI_File fh, uint64_t off, void *buf, uint64_t len)
{
    MPI_Status st;
    int got = 0;
    int rc = MPI_File_read_at(fh, (MPI_Offset)off, buf, (int)len, MPI_BYTE, &st);
    if (rc != MPI_SUCCESS) die_mpi("MPI_File_read_at", rc);
    MPI_Get_count(&st, MPI_BYTE, &got);
    if ((uint64_t)got != len) die("short read at %llu: %d of %llu bytes (file too small? run prepare)",
                                  (unsigned long long)off, got, (unsigned long long)len);
}

static void write_at(MPI_File fh, uint64_t off, const void *buf, uint64_t len)
{
    MPI_Status st;
    int rc = MPI_File_write_at(fh, (MPI_Offset)off, buf, (int)len, MPI_BYTE, &st);
    if (rc != MPI_SUCCESS) die_mpi("MPI_File_write_at", rc);
}

static void check_read(const struct ctx *c, uint64_t off, const uint8_t *buf, uint64_t len)
{
    long bad = pattern_check(DATA_SEED, off, buf, len);
    if (bad >= 0)
        die("rank %d: wrong data at file offset %llu (read of %llu bytes at %llu): %02x, expected %02x",
            c->rank, (unsigned long long)(off + bad), (unsigned long long)len, (unsigned long long)off,
            buf[bad], pattern_byte(DATA_SEED, off + bad));
}

/* With --verify a loop runs at least this many operations, time or not, so that it covers the
 * rank's region (up to 1024 blocks) whatever the machine's load: a verification that depends
 * on the speed of the machine would not be a test. */
static uint64_t min_ops(const struct ctx *c, uint64_t bs)
{
    uint64_t blocks = c->region_bytes / bs;
    if (!c->o->verify) return 1;
    return blocks < 1024 ? blocks : 1024;
}

/* Offset of the i-th access of a pattern inside this rank's region. */
static uint64_t nth_offset(const struct ctx *c, uint64_t i, uint64_t bs, int random)
{
    uint64_t span = c->region_bytes - c->region_bytes % bs; /* whole blocks only */
    if (!random) return c->base + (i * bs) % span;
    uint64_t span_r = c->region_bytes - bs + 1;
    return c->base + (i * RANDOM_STRIDE_BYTES) % span_r;
}

/* Sums a measurement over the ranks and prints it (rank 0) as a JSON record; `extra` is
 * appended inside the object (starts with a comma, or is empty). */
static void finish(const struct ctx *c, const char *test, const char *op, const char *pattern,
                   uint64_t bs, const struct meas *m, const char *extra)
{
    double in[4] = {(double)m->ops, (double)m->bytes, m->cpu_s, m->op_time_s}, sum[4];
    double el = m->elapsed_s, el_max = 0;
    MPI_Reduce(in, sum, 4, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&el, &el_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (c->rank != 0) return;
    double per_op_s = sum[3] > 0 ? sum[3] / sum[0] : el_max * c->np / sum[0];
    printf("{\"label\":\"%s\",\"test\":\"%s\",\"op\":\"%s\",\"pattern\":\"%s\",\"block_bytes\":%llu,"
           "\"np\":%d,\"ops\":%.0f,\"bytes\":%.0f,\"secs\":%.6f,\"mean_us\":%.4f,\"mb_s\":%.4f,"
           "\"cpu_s\":%.6f,\"cpu_s_per_gb\":%.6f,\"verified\":\"%s\"%s}\n",
           c->o->label, test, op, pattern, (unsigned long long)bs, c->np, sum[0], sum[1], el_max,
           per_op_s * 1e6, sum[1] / el_max / 1e6, sum[2], sum[1] > 0 ? sum[2] / (sum[1] / 1e9) : 0.0,
           c->o->verify ? "every read" : "one block per measurement", extra);
    fflush(stdout);
}

/* ------------------------------------------------------------------ prepare */
static void t_prepare(const struct ctx *c)
{
    const uint64_t chunk = 1ULL << 20;
    uint8_t *buf = malloc(chunk);
    MPI_File fh = open_file(c->o->file, MPI_MODE_CREATE | MPI_MODE_RDWR);
    int rc = MPI_File_set_size(fh, (MPI_Offset)c->o->size_bytes);
    if (rc != MPI_SUCCESS) die_mpi("MPI_File_set_size", rc);
    for (uint64_t done = 0; done < c->region_bytes; done += chunk) {
        uint64_t len = c->region_bytes - done < chunk ? c->region_bytes - done : chunk;
        pattern_fill(DATA_SEED, c->base + done, buf, len);
        write_at(fh, c->base + done, buf, len);
    }
    rc = MPI_File_sync(fh);
    if (rc != MPI_SUCCESS) die_mpi("MPI_File_sync", rc);
    /* Read back one block of every rank's region so a broken backend fails here already. */
    read_at(fh, c->base, buf, c->region_bytes < 4096 ? c->region_bytes : 4096);
    check_read(c, c->base, buf, c->region_bytes < 4096 ? c->region_bytes : 4096);
    close_file(&fh);
    free(buf);
    if (c->rank == 0)
        printf("{\"label\":\"%s\",\"test\":\"prepare\",\"bytes\":%llu,\"np\":%d}\n", c->o->label,
               (unsigned long long)c->o->size_bytes, c->np);
}

static void t_delete(const struct ctx *c)
{
    if (c->rank == 0) {
        const char *names[2] = {c->o->file, c->o->wfile};
        for (int i = 0; i < 2; i++) {
            int rc = MPI_File_delete(names[i], MPI_INFO_NULL), cls = 0;
            MPI_Error_class(rc, &cls);
            if (rc != MPI_SUCCESS && cls != MPI_ERR_NO_SUCH_FILE) die_mpi(names[i], rc);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* ------------------------------------------------------------------ blocking reads */
static struct meas read_loop(const struct ctx *c, MPI_File fh, uint8_t *buf, uint64_t bs, int random)
{
    struct meas m = {0};
    MPI_Barrier(MPI_COMM_WORLD);
    double c0 = cpu_s(), t0 = now_s(), end = t0 + c->o->secs, t = t0;
    uint64_t least = min_ops(c, bs);
    for (uint64_t i = 0; t < end || i < least; i++) {
        uint64_t off = nth_offset(c, i, bs, random);
        read_at(fh, off, buf, bs);
        if (c->o->verify) check_read(c, off, buf, bs);
        m.ops++;
        t = now_s();
    }
    m.elapsed_s = t - t0;
    m.cpu_s = cpu_s() - c0;
    m.bytes = m.ops * bs;
    /* Untimed: the last block read must hold the right data. */
    uint64_t last = nth_offset(c, m.ops - 1, bs, random);
    read_at(fh, last, buf, bs);
    check_read(c, last, buf, bs);
    return m;
}

/* ------------------------------------------------------------------ blocking writes */
/* The write buffer is one block of the write pattern whose first (up to) 8 bytes are replaced
 * by the block's file offset before each write: the same buffer every time (as an application
 * reusing its buffer would), yet every block on disk says where it belongs. */
static void stamp(uint8_t *buf, uint64_t bs, uint64_t off)
{
    for (uint64_t k = 0; k < bs && k < 8; k++) buf[k] = (uint8_t)(off >> (8 * k));
}

static void check_written(const struct ctx *c, MPI_File fh, uint64_t bs, uint64_t written_bytes)
{
    uint64_t span = c->region_bytes - c->region_bytes % bs;
    uint64_t len = written_bytes < span ? written_bytes : span;
    if (!c->o->verify && len > bs) len = bs;
    uint8_t *got = malloc(bs), *want = malloc(bs);
    pattern_fill(WRITE_SEED, 0, want, bs);
    for (uint64_t done = 0; done < len; done += bs) {
        uint64_t off = c->base + done;
        read_at(fh, off, got, bs);
        stamp(want, bs, off);
        if (memcmp(got, want, bs) != 0)
            die("rank %d: written block at %llu (%llu bytes) reads back wrong", c->rank,
                (unsigned long long)off, (unsigned long long)bs);
    }
    free(got);
    free(want);
}

static struct meas write_loop(const struct ctx *c, MPI_File fh, uint64_t bs)
{
    struct meas m = {0};
    uint8_t *buf = malloc(bs);
    pattern_fill(WRITE_SEED, 0, buf, bs);
    MPI_Barrier(MPI_COMM_WORLD);
    double c0 = cpu_s(), t0 = now_s(), end = t0 + c->o->secs, t = t0;
    uint64_t least = min_ops(c, bs);
    for (uint64_t i = 0; t < end || i < least; i++) {
        uint64_t off = nth_offset(c, i, bs, 0);
        stamp(buf, bs, off);
        write_at(fh, off, buf, bs);
        m.ops++;
        t = now_s();
    }
    m.elapsed_s = t - t0;
    m.cpu_s = cpu_s() - c0;
    m.bytes = m.ops * bs;
    free(buf);
    check_written(c, fh, bs, m.bytes);
    return m;
}

static MPI_File open_wfile(const struct ctx *c)
{
    MPI_File fh = open_file(c->o->wfile, MPI_MODE_CREATE | MPI_MODE_RDWR);
    /* Start empty: the first pass over the region appends, as in the seed's write test. */
    int rc = MPI_File_set_size(fh, 0);
    if (rc != MPI_SUCCESS) die_mpi("MPI_File_set_size", rc);
    return fh;
}

static void t_latency(const struct ctx *c)
{
    uint64_t bs = c->o->block_bytes ? c->o->block_bytes : 4;
    uint8_t *buf = malloc(bs);
    MPI_File fh = open_file(c->o->file, MPI_MODE_RDONLY);
    struct meas m = read_loop(c, fh, buf, bs, 0);
    finish(c, "latency", "read", "seq", bs, &m, "");
    m = read_loop(c, fh, buf, bs, 1);
    finish(c, "latency", "read", "random", bs, &m, "");
    close_file(&fh);
    free(buf);
    fh = open_wfile(c);
    m = write_loop(c, fh, bs);
    finish(c, "latency", "write", "seq", bs, &m, "");
    close_file(&fh);
}

static void t_bandwidth(const struct ctx *c)
{
    MPI_File rfh = open_file(c->o->file, MPI_MODE_RDONLY);
    MPI_File wfh = open_wfile(c);
    for (int k = 0; k < c->o->nblocks; k++) {
        uint64_t bs = c->o->blocks[k];
        if (bs > c->region_bytes) die("block %llu larger than a rank's region", (unsigned long long)bs);
        uint8_t *buf = malloc(bs);
        struct meas m = read_loop(c, rfh, buf, bs, 0);
        finish(c, "bandwidth", "read", "seq", bs, &m, "");
        m = write_loop(c, wfh, bs);
        finish(c, "bandwidth", "write", "seq", bs, &m, "");
        free(buf);
    }
    close_file(&rfh);
    close_file(&wfh);
}

/* ------------------------------------------------------------------ overlap (Fig. 8) */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median time of the blocking reads of one measurement (--secs, sequential blocks). */
static double median_read_s(const struct ctx *c, MPI_File fh, uint8_t *buf, uint64_t bs)
{
    enum { MAX_SAMPLES = 1 << 16 };
    double *t = malloc(MAX_SAMPLES * sizeof *t);
    size_t n = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double end = now_s() + c->o->secs;
    for (uint64_t i = 0; n < MAX_SAMPLES && (n == 0 || now_s() < end); i++) {
        uint64_t off = nth_offset(c, i, bs, 0);
        double s = now_s();
        read_at(fh, off, buf, bs);
        t[n++] = now_s() - s;
        if (c->o->verify) check_read(c, off, buf, bs);
    }
    qsort(t, n, sizeof *t, cmp_double);
    double med = t[n / 2];
    free(t);
    return med;
}

static void t_overlap(const struct ctx *c)
{
    uint64_t bs = c->o->block_bytes ? c->o->block_bytes : 64 * 1024;
    uint8_t *buf = malloc(bs);
    MPI_File fh = open_file(c->o->file, MPI_MODE_RDONLY);
    /* T_IO: the blocking read time of one block, measured now on this backend: the median of
     * the reads of one measurement, so one descheduled read does not set every T below. */
    double t_io = median_read_s(c, fh, buf, bs);
    MPI_Allreduce(MPI_IN_PLACE, &t_io, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    for (int k = 0; k < c->o->nfractions; k++) {
        double f = c->o->fractions[k];
        double t_cpu = f / (1.0 - f) * t_io; /* CPU fraction f = T / (T + T_IO) */
        struct meas m = {0};
        MPI_Barrier(MPI_COMM_WORLD);
        double c0 = cpu_s(), t0 = now_s(), end = t0 + c->o->secs, t = t0;
        for (uint64_t i = 0; t < end; i++) {
            uint64_t off = nth_offset(c, i, bs, 0);
            MPI_Request req;
            MPI_Status st;
            int rc = MPI_File_iread_at(fh, (MPI_Offset)off, buf, (int)bs, MPI_BYTE, &req);
            if (rc != MPI_SUCCESS) die_mpi("MPI_File_iread_at", rc);
            compute_for(t_cpu);
            rc = MPI_Wait(&req, &st);
            if (rc != MPI_SUCCESS) die_mpi("MPI_Wait", rc);
            if (c->o->verify) check_read(c, off, buf, bs);
            m.ops++;
            t = now_s();
        }
        m.elapsed_s = t - t0;
        m.cpu_s = cpu_s() - c0;
        m.bytes = m.ops * bs;
        uint64_t last = nth_offset(c, m.ops - 1, bs, 0);
        check_read(c, last, buf, bs);
        double iter_s = m.elapsed_s / (double)m.ops;
        MPI_Allreduce(MPI_IN_PLACE, &iter_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        /* Time saved against running them one after the other, as a share of the I/O time
         * (io_hidden) and of the most that could be saved, min(T, T_IO) (overlap). */
        double saved = t_cpu + t_io - iter_s;
        double shorter = t_cpu < t_io ? t_cpu : t_io;
        char extra[256];
        snprintf(extra, sizeof extra,
                 ",\"cpu_fraction\":%.3f,\"compute_us\":%.3f,\"io_us\":%.3f,\"iter_us\":%.3f,"
                 "\"ideal_iter_us\":%.3f,\"io_hidden\":%.4f,\"overlap\":%.4f",
                 f, t_cpu * 1e6, t_io * 1e6, iter_s * 1e6, (t_cpu > t_io ? t_cpu : t_io) * 1e6,
                 saved / t_io, shorter > 0 ? saved / shorter : 0.0);
        finish(c, "overlap", "iread", "seq", bs, &m, extra);
    }
    close_file(&fh);
    free(buf);
}

/* ------------------------------------------------------------------ memory registration */
static void t_memreg(const struct ctx *c)
{
    MPI_File fh = open_file(c->o->file, MPI_MODE_RDONLY);
    for (int k = 0; k < c->o->nblocks; k++) {
        uint64_t bs = c->o->blocks[k];
        size_t map_len = (size_t)((bs + 4095) & ~4095ULL);
        uint8_t *mine = malloc(bs);
        struct meas m = {0};
        MPI_Barrier(MPI_COMM_WORLD);
        double c0 = cpu_s(), t0 = now_s(), end = t0 + c->o->secs, t = t0;
        for (uint64_t i = 0; t < end; i++) {
            uint64_t off = nth_offset(c, i, bs, 0);
            /* A fresh mapping for the reads that do not reuse the buffer: unmapping it
             * afterwards is what must invalidate a registration cache. */
            int fresh = (int)(i % 100) >= c->o->reuse_pct;
            uint8_t *buf = mine;
            if (fresh) {
                buf = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (buf == MAP_FAILED) die("mmap of %zu bytes failed", map_len);
            }
            double s = now_s();
            read_at(fh, off, buf, bs);
            m.op_time_s += now_s() - s;
            /* Untimed; always a little, so a stale registration of a reused address shows. */
            check_read(c, off, buf, c->o->verify || bs < 64 ? bs : 64);
            if (fresh) munmap(buf, map_len);
            m.ops++;
            t = now_s();
        }
        m.elapsed_s = t - t0;
        m.cpu_s = cpu_s() - c0;
        m.bytes = m.ops * bs;
        char extra[64];
        snprintf(extra, sizeof extra, ",\"reuse_pct\":%d", c->o->reuse_pct);
        finish(c, "memreg", "read", "seq", bs, &m, extra);
        free(mine);
    }
    close_file(&fh);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    struct opts o;
    struct ctx c = {.o = &o};
    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c.np);
    parse_opts(argc, argv, &o);
    char wdefault[4096];
    if (!o.wfile) {
        snprintf(wdefault, sizeof wdefault, "%s.w", o.file);
        o.wfile = wdefault;
    }
    c.region_bytes = o.size_bytes / (uint64_t)c.np;
    c.base = c.region_bytes * (uint64_t)c.rank;
    if (c.region_bytes < 2 * RANDOM_STRIDE_BYTES && strcmp(o.test, "prepare") != 0 &&
        strcmp(o.test, "delete") != 0)
        die("--size must give every rank at least 1 MiB");
    if (!strcmp(o.test, "prepare")) t_prepare(&c);
    else if (!strcmp(o.test, "delete")) t_delete(&c);
    else if (!strcmp(o.test, "latency")) t_latency(&c);
    else if (!strcmp(o.test, "bandwidth")) t_bandwidth(&c);
    else if (!strcmp(o.test, "overlap")) t_overlap(&c);
    else if (!strcmp(o.test, "memreg")) t_memreg(&c);
    else { usage(); die("unknown test %s", o.test); }
    MPI_Finalize();
    return 0;
}
