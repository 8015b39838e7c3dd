/*
 * dafs_copy — copy a local file into a DAFS export and back, with registered buffers
 * and asynchronous I/O, then check the bytes.
 *
 *   cc -O2 dafs_copy.c $(pkg-config --cflags --libs dafs) -o dafs_copy
 *   ./dafs_copy [-t] TARGET LOCAL_IN REMOTE_PATH LOCAL_OUT
 *
 * TARGET is host:port or dafs+shm:///path.sock; -t forces TCP. Exit status 0 when
 * LOCAL_OUT is byte-for-byte identical to LOCAL_IN.
 *
 * The pattern: allocate DEPTH registered buffers once (dafs_alloc_registered), keep up
 * to DEPTH non-blocking I/Os in flight on one completion group, and reuse a buffer
 * only after its completion has been reaped (until then the server may still be
 * reading from or writing into it).
 */
#define _POSIX_C_SOURCE 200809L
#include <dafs.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEPTH 8

static dafs_client_t *client;

static void die(const char *what, long long err) {
    fprintf(stderr, "dafs_copy: %s: %s\n", what, err < 0 ? dafs_strerror((int)err) : strerror((int)err));
    dafs_disconnect(client);
    exit(1);
}

int main(int argc, char **argv) {
    int argi = 1;
    dafs_options_t opts = {0};
    if (argc > 1 && strcmp(argv[1], "-t") == 0) {
        opts.provider = DAFS_PROVIDER_TCP;
        argi++;
    }
    if (argc - argi != 4) {
        fprintf(stderr, "usage: dafs_copy [-t] TARGET LOCAL_IN REMOTE_PATH LOCAL_OUT\n");
        return 2;
    }
    const char *target = argv[argi], *in = argv[argi + 1], *remote = argv[argi + 2], *out = argv[argi + 3];

    int r = dafs_connect(target, &opts, &client);
    if (r < 0) die(target, r);

    /* One chunk per buffer: at most the largest single I/O, at most 1 MiB. */
    size_t chunk = dafs_max_io_size(client);
    if (chunk > (1u << 20)) chunk = 1u << 20;
    unsigned depth = dafs_slots(client) < DEPTH ? dafs_slots(client) : DEPTH;
    unsigned char *mem;
    dafs_region_t region;
    if ((r = dafs_alloc_registered(client, depth * chunk, (void **)&mem, &region)) < 0) die("alloc_registered", r);
    dafs_cg_t cg;
    if ((r = dafs_cg_create(client, &cg)) < 0) die("cg_create", r);

    /* ---- upload: local -> dafs ------------------------------------------------ */
    int fd = open(in, O_RDONLY);
    if (fd < 0) die(in, errno);
    dafs_file_t *f;
    if ((r = dafs_open(client, remote, DAFS_O_WRONLY | DAFS_O_CREAT | DAFS_O_TRUNC, 0644, &f)) < 0) die(remote, r);
    size_t len[DEPTH];          /* bytes in flight in buffer i */
    unsigned free_list[DEPTH], nfree = 0, inflight = 0;
    for (unsigned i = 0; i < depth; i++) free_list[nfree++] = i;
    uint64_t off = 0;
    int eof = 0;
    dafs_completion_t cq[DEPTH];
    while (!eof || inflight > 0) {
        while (!eof && nfree > 0) {
            unsigned b = free_list[--nfree];
            ssize_t n = read(fd, mem + b * chunk, chunk); /* buffer b is idle: ours */
            if (n < 0) die("read", errno);
            if (n == 0) {
                free_list[nfree++] = b;
                eof = 1;
                break;
            }
            len[b] = (size_t)n;
            if ((r = dafs_pwrite_nb(client, f, cg, region, b * chunk, (size_t)n, off, b)) < 0) die("pwrite_nb", r);
            off += (uint64_t)n;
            inflight++;
        }
        if (inflight == 0) break;
        int k = dafs_cg_wait(client, cg, 1, DEPTH, -1, cq);
        if (k < 0) die("cg_wait", k);
        for (int j = 0; j < k; j++) {
            unsigned b = (unsigned)cq[j].user_data;
            if (cq[j].result < 0) die("write", cq[j].result);
            if ((size_t)cq[j].result != len[b]) die("short write", -EIO);
            free_list[nfree++] = b; /* reaped: the buffer is ours again */
            inflight--;
        }
    }
    close(fd);
    uint64_t size = off;
    if ((r = dafs_fsync(client, f)) < 0) die("fsync", r);
    if ((r = dafs_close(client, f)) < 0) die("close", r);
    dafs_attr_t a;
    if ((r = dafs_stat(client, remote, &a)) < 0) die("stat", r);
    if (a.size != size) die("remote size differs", -EIO);

    /* ---- download: dafs -> local ---------------------------------------------- */
    if ((r = dafs_open(client, remote, DAFS_O_RDONLY, 0, &f)) < 0) die(remote, r);
    int outfd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (outfd < 0) die(out, errno);
    uint64_t at[DEPTH];
    off = 0;
    while (off < size || inflight > 0) {
        while (off < size && nfree > 0) {
            unsigned b = free_list[--nfree];
            size_t n = size - off < chunk ? (size_t)(size - off) : chunk;
            len[b] = n;
            at[b] = off;
            if ((r = dafs_pread_nb(client, f, cg, region, b * chunk, n, off, b)) < 0) die("pread_nb", r);
            off += n;
            inflight++;
        }
        int k = dafs_cg_wait(client, cg, 1, DEPTH, -1, cq);
        if (k < 0) die("cg_wait", k);
        for (int j = 0; j < k; j++) {
            unsigned b = (unsigned)cq[j].user_data;
            if (cq[j].result < 0) die("read", cq[j].result);
            if ((size_t)cq[j].result != len[b]) die("short read", -EIO);
            if (pwrite(outfd, mem + b * chunk, len[b], (off_t)at[b]) != (ssize_t)len[b]) die("pwrite", errno);
            free_list[nfree++] = b;
            inflight--;
        }
    }
    if (close(outfd) < 0) die("close", errno);
    if ((r = dafs_close(client, f)) < 0) die("close", r);

    /* ---- compare ----------------------------------------------------------------- */
    FILE *x = fopen(in, "rb"), *y = fopen(out, "rb");
    if (!x || !y) die("reopen", errno);
    static unsigned char bx[1 << 16], by[1 << 16];
    uint64_t same = 0;
    for (;;) {
        size_t nx = fread(bx, 1, sizeof bx, x), ny = fread(by, 1, sizeof by, y);
        if (nx != ny || memcmp(bx, by, nx) != 0) {
            fprintf(stderr, "dafs_copy: MISMATCH near byte %llu\n", (unsigned long long)same);
            return 1;
        }
        same += nx;
        if (nx == 0) break;
    }
    fclose(x);
    fclose(y);

    dafs_stats_t s;
    dafs_stats(client, &s);
    printf("dafs_copy: %llu bytes in and out over %s, identical (direct reads %llu, direct writes %llu, "
           "off direct path %llu, inline threshold %zu)\n",
           (unsigned long long)size, dafs_provider(client), (unsigned long long)s.direct_reads,
           (unsigned long long)s.direct_writes, (unsigned long long)s.off_direct_path,
           dafs_inline_threshold(client));
    dafs_cg_destroy(client, cg);
    dafs_unregister(client, region);
    dafs_disconnect(client);
    return 0;
}
