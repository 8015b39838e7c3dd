/*
 * fio external ioengine for DAFS, built on the C API (include/dafs.h).
 *
 *   ioengine=external:/path/to/libdafs_fio.so
 *   dafs_target=127.0.0.1:7420          (host:port, or dafs+shm:///path/dafsd.sock)
 *   dafs_provider=auto|tcp              (auto: shared memory when on the server's host)
 *   dafs_buffers=alloc|register         (how fio's I/O buffers are registered, below)
 *   dafs_secret_file=PATH  dafs_export=NAME  dafs_slots=N   (optional)
 *
 * File names (filename=, directory=) are paths inside the export.
 * `fio --enghelp=/path/to/libdafs_fio.so` lists these options.
 *
 * Memory: fio's whole I/O buffer area (td->orig_buffer, all io_u buffers) is
 * registered ONCE, through the engine's iomem_alloc hook:
 *   alloc     dafs_alloc_registered (default): over shared memory the buffers live in
 *             a segment the server maps, so direct placement is a single copy;
 *   register  page-aligned malloc + dafs_register (the path for memory an application
 *             already has; over shm the server reaches it with process_vm_readv/writev).
 * Every read and write above the inline threshold is then a direct transfer into or
 * out of registered memory (dafs_pread_nb/dafs_pwrite_nb on a region offset); nothing
 * falls off the direct path (the engine logs dafs_stats_t.off_direct_path at the end).
 * (fio's mem=/iomem= options conflict with the hook and are refused by fio.)
 *
 * I/O: iodepth=1 is synchronous (submit, wait for the completion, FIO_Q_COMPLETED).
 * iodepth>1 is asynchronous: ->queue stages io_us, ->commit submits them on the job's
 * completion group, ->getevents waits with dafs_cg_wait, ->event hands them back.
 * At most min(iodepth, dafs_slots()) are in flight; more queue attempts get FIO_Q_BUSY.
 *
 * Files: ->setup stats every file (short-lived session) so fio knows existing sizes.
 * A read-only job whose file is missing or too small lays it out first (writes fill
 * data up to offset+size), like fio does for local files. unlink=1 removes it over DAFS.
 *
 * Threads/processes: one DAFS session per fio job (connected in ->init, in the job's
 * own process or thread), as a dafs_client_t is single-threaded.
 *
 * Build against the configured source tree of the same fio version that runs it:
 *   cc -shared -fPIC -O2 -D_GNU_SOURCE -D_LARGEFILE_SOURCE -D_FILE_OFFSET_BITS=64 \
 *      -DFIO_INC_DEBUG -I fio-3.33 -include fio-3.33/config-host.h -I include \
 *      adapters/fio/dafs_engine.c libdafs.a -Wl,--exclude-libs,ALL -o libdafs_fio.so
 * (scripts/test-c.sh does exactly this.)
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fio.h"
#include "optgroup.h"

#include <dafs.h>

struct dafs_fio_options {
    void *pad; /* fio: ->off1 of an option must not be 0 */
    char *target;
    char *provider;
    char *buffers;
    char *secret_file;
    char *export_name;
    unsigned int slots;
};

static struct fio_option options[] = {
    {
        .name = "dafs_target",
        .lname = "DAFS target",
        .type = FIO_OPT_STR_STORE,
        .off1 = offsetof(struct dafs_fio_options, target),
        .help = "dafsd to connect to: host:port or dafs+shm:///path/dafsd.sock",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "dafs_provider",
        .lname = "DAFS provider",
        .type = FIO_OPT_STR_STORE,
        .off1 = offsetof(struct dafs_fio_options, provider),
        .def = "auto",
        .help = "auto (shared memory on the server's host, else tcp) or tcp",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "dafs_buffers",
        .lname = "DAFS buffer registration",
        .type = FIO_OPT_STR_STORE,
        .off1 = offsetof(struct dafs_fio_options, buffers),
        .def = "alloc",
        .help = "alloc (dafs_alloc_registered) or register (malloc + dafs_register)",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "dafs_secret_file",
        .lname = "DAFS secret file",
        .type = FIO_OPT_STR_STORE,
        .off1 = offsetof(struct dafs_fio_options, secret_file),
        .help = "file with the shared secret (HMAC authentication)",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "dafs_export",
        .lname = "DAFS export name",
        .type = FIO_OPT_STR_STORE,
        .off1 = offsetof(struct dafs_fio_options, export_name),
        .help = "export name (default: the server's default export)",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "dafs_slots",
        .lname = "DAFS slots",
        .type = FIO_OPT_INT,
        .off1 = offsetof(struct dafs_fio_options, slots),
        .def = "0",
        .help = "request slots to ask for (0: max(iodepth, 32))",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = NULL,
    },
};

struct dafs_fio_data {
    dafs_client_t *c;
    dafs_cg_t cg;
    /* fio's I/O buffer area, registered once */
    char *mem;
    size_t mem_len;
    dafs_region_t region;
    int have_region;
    int mem_malloced;
    int sync;              /* iodepth == 1 */
    unsigned depth;        /* iodepth: size of the arrays below */
    unsigned qmax;         /* most io_us in flight + staged: min(iodepth, slots) */
    unsigned inflight;     /* submitted, not yet reaped */
    struct io_u **pending; /* staged by ->queue, submitted by ->commit */
    unsigned npending;
    struct io_u **failed;  /* failed at submit: returned by the next ->getevents */
    unsigned nfailed;
    struct io_u **events;  /* ->getevents results, read by ->event */
    dafs_completion_t *cqes;
};

static int connect_opts(struct thread_data *td, dafs_client_t **out) {
    struct dafs_fio_options *eo = td->eo;
    dafs_options_t o;
    memset(&o, 0, sizeof o);
    if (!eo->target || !*eo->target) {
        log_err("dafs: dafs_target= is required (host:port or dafs+shm:///path.sock)\n");
        return -EINVAL;
    }
    if (!eo->provider || !strcmp(eo->provider, "auto")) {
        o.provider = DAFS_PROVIDER_AUTO;
    } else if (!strcmp(eo->provider, "tcp")) {
        o.provider = DAFS_PROVIDER_TCP;
    } else {
        log_err("dafs: dafs_provider=%s: expected auto or tcp\n", eo->provider);
        return -EINVAL;
    }
    o.secret_file = eo->secret_file;
    o.export_name = eo->export_name;
    o.slots = eo->slots ? eo->slots : (td->o.iodepth > 32 ? td->o.iodepth : 32);
    o.client_id = "fio";
    int r = dafs_connect(eo->target, &o, out);
    if (r < 0)
        log_err("dafs: cannot connect to %s: %s\n", eo->target, dafs_strerror(r));
    return r;
}

/* ---------------------------------------------------------------------------------- */
/* Setup: file sizes (in fio's main process, before the jobs start)                    */
/* ---------------------------------------------------------------------------------- */

static int dafs_fio_setup(struct thread_data *td) {
    dafs_client_t *c = NULL;
    struct fio_file *f;
    unsigned int i;
    int r = connect_opts(td, &c);
    if (r < 0) {
        td_verror(td, -r, "dafs_connect");
        return 1;
    }
    for_each_file(td, f, i) {
        dafs_attr_t a;
        r = dafs_stat(c, f->file_name, &a);
        if (r == 0 && a.type == DAFS_TYPE_REG)
            f->real_file_size = a.size;
        else if (r == 0 || r == -ENOENT)
            f->real_file_size = 0;
        else {
            log_err("dafs: stat %s: %s\n", f->file_name, dafs_strerror(r));
            dafs_disconnect(c);
            td_verror(td, -r, "dafs_stat");
            return 1;
        }
        fio_file_set_size_known(f);
    }
    dafs_disconnect(c);
    return 0;
}

/* ---------------------------------------------------------------------------------- */
/* Engine lifetime                                                                    */
/* ---------------------------------------------------------------------------------- */

static void dafs_fio_cleanup(struct thread_data *td);

static int dafs_fio_init(struct thread_data *td) {
    struct dafs_fio_options *eo = td->eo;
    struct dafs_fio_data *d = calloc(1, sizeof *d);
    if (!d)
        return 1;
    td->io_ops_data = d;
    if (eo->buffers && strcmp(eo->buffers, "alloc") && strcmp(eo->buffers, "register")) {
        log_err("dafs: dafs_buffers=%s: expected alloc or register\n", eo->buffers);
        return 1;
    }
    d->depth = td->o.iodepth ? td->o.iodepth : 1;
    d->sync = d->depth == 1;
    d->pending = calloc(d->depth, sizeof(struct io_u *));
    d->failed = calloc(d->depth, sizeof(struct io_u *));
    d->events = calloc(d->depth, sizeof(struct io_u *));
    d->cqes = calloc(d->depth, sizeof(dafs_completion_t));
    if (!d->pending || !d->failed || !d->events || !d->cqes)
        return 1;
    int r = connect_opts(td, &d->c);
    if (r < 0) {
        td_verror(td, -r, "dafs_connect");
        return 1;
    }
    if ((r = dafs_cg_create(d->c, &d->cg)) < 0) {
        td_verror(td, -r, "dafs_cg_create");
        return 1;
    }
    d->qmax = dafs_slots(d->c) < d->depth ? dafs_slots(d->c) : d->depth;
    if (td->o.max_bs[DDIR_READ] > dafs_max_io_size(d->c) || td->o.max_bs[DDIR_WRITE] > dafs_max_io_size(d->c)) {
        log_err("dafs: block size above the largest DAFS I/O (%zu bytes)\n", dafs_max_io_size(d->c));
        td_verror(td, EINVAL, "dafs_init");
        return 1;
    }
    /* fio bounds offsets by real_file_size; a remote file grows as it is written (and
     * a read job's file is laid out in ->open_file), so announce the job's range. */
    struct fio_file *f;
    unsigned int i;
    for_each_file(td, f, i) {
        if (f->io_size != -1ULL && f->real_file_size < f->file_offset + f->io_size)
            f->real_file_size = f->file_offset + f->io_size;
    }
    dprint(FD_IO, "dafs: connected to %s over %s, slots %u, inline threshold %zu\n", eo->target,
           dafs_provider(d->c), dafs_slots(d->c), dafs_inline_threshold(d->c));
    return 0;
}

/* Wait for everything in flight (completions discarded): only at teardown. */
static void drain(struct dafs_fio_data *d) {
    while (d->inflight > 0) {
        int k = dafs_cg_wait(d->c, d->cg, 1, d->depth, -1, d->cqes);
        if (k <= 0)
            break;
        d->inflight -= (unsigned)k;
    }
}

static void dafs_fio_cleanup(struct thread_data *td) {
    struct dafs_fio_data *d = td->io_ops_data;
    if (!d)
        return;
    if (d->c) {
        dafs_stats_t s;
        memset(&s, 0, sizeof s);
        drain(d);
        if (dafs_stats(d->c, &s) == 0)
            dprint(FD_IO, "dafs: %s: direct reads %llu, direct writes %llu, inline reads %llu, "
                   "inline writes %llu, off direct path %llu\n", dafs_provider(d->c),
                   (unsigned long long)s.direct_reads, (unsigned long long)s.direct_writes,
                   (unsigned long long)s.inline_reads, (unsigned long long)s.inline_writes,
                   (unsigned long long)s.off_direct_path);
        if (s.off_direct_path)
            log_info("dafs: %llu I/Os fell off the direct path (unregistered memory)\n",
                     (unsigned long long)s.off_direct_path);
        if (d->cg)
            dafs_cg_destroy(d->c, d->cg);
        dafs_disconnect(d->c);
    }
    free(d->pending);
    free(d->failed);
    free(d->events);
    free(d->cqes);
    free(d);
    td->io_ops_data = NULL;
}

/* fio's I/O buffers: allocated and registered once. */
static int dafs_fio_iomem_alloc(struct thread_data *td, size_t total) {
    struct dafs_fio_data *d = td->io_ops_data;
    struct dafs_fio_options *eo = td->eo;
    int r;
    void *p = NULL;
    if (!d || !d->c)
        return 1;
    if (eo->buffers && !strcmp(eo->buffers, "register")) {
        if (posix_memalign(&p, 4096, total))
            return 1;
        r = dafs_register(d->c, p, total, &d->region);
        if (r < 0) {
            free(p);
            log_err("dafs: dafs_register(%zu bytes): %s\n", total, dafs_strerror(r));
            return 1;
        }
        d->mem_malloced = 1;
    } else {
        r = dafs_alloc_registered(d->c, total, &p, &d->region);
        if (r < 0) {
            log_err("dafs: dafs_alloc_registered(%zu bytes): %s\n", total, dafs_strerror(r));
            return 1;
        }
    }
    d->mem = p;
    d->mem_len = total;
    d->have_region = 1;
    td->orig_buffer = p;
    return 0;
}

static void dafs_fio_iomem_free(struct thread_data *td) {
    struct dafs_fio_data *d = td->io_ops_data;
    if (!d || !d->have_region)
        return;
    int r = dafs_unregister(d->c, d->region);
    if (r == -EBUSY) {
        drain(d);
        r = dafs_unregister(d->c, d->region);
    }
    if (r == 0 && d->mem_malloced)
        free(d->mem);
    else if (r < 0)
        log_err("dafs: dafs_unregister: %s (buffer memory leaked)\n", dafs_strerror(r));
    d->have_region = 0;
    d->mem = NULL;
}

/* ---------------------------------------------------------------------------------- */
/* Files                                                                              */
/* ---------------------------------------------------------------------------------- */

/* Write fill data from the current size up to `want` (a read job on a missing or
 * short file, like fio's own layout of local files). Uses a registered buffer and the
 * non-blocking path: dafs_pwrite on plain memory would register it for every call. */
static int layout(struct dafs_fio_data *d, dafs_file_t *file, const char *name, uint64_t from, uint64_t want) {
    const size_t chunk = 1 << 20;
    unsigned char *buf;
    dafs_region_t reg;
    dafs_completion_t cq;
    int r = dafs_alloc_registered(d->c, chunk, (void **)&buf, &reg);
    if (r < 0)
        return r;
    uint32_t x = 0x9e3779b9u;
    for (size_t i = 0; i < chunk; i++) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        buf[i] = (unsigned char)x;
    }
    log_info("dafs: laying out IO file %s (%llu MiB)\n", name, (unsigned long long)((want - from) >> 20));
    for (uint64_t off = from; off < want && r == 0;) {
        size_t n = want - off < chunk ? (size_t)(want - off) : chunk;
        r = dafs_pwrite_nb(d->c, file, d->cg, reg, 0, n, off, 0);
        if (r == 0) {
            int k = dafs_cg_wait(d->c, d->cg, 1, 1, -1, &cq);
            r = k < 0 ? k : k == 0 ? -EIO : cq.result < 0 ? (int)cq.result : (size_t)cq.result != n ? -EIO : 0;
        }
        off += n;
    }
    dafs_unregister(d->c, reg);
    return r < 0 ? r : dafs_fsync(d->c, file);
}

static int dafs_fio_open_file(struct thread_data *td, struct fio_file *f) {
    struct dafs_fio_data *d = td->io_ops_data;
    dafs_file_t *file = NULL;
    int r;
    if (!d || !d->c)
        return 1;
    uint64_t want = f->file_offset + f->io_size;
    if (td_write(td)) {
        r = dafs_open(d->c, f->file_name, DAFS_O_RDWR | DAFS_O_CREAT, 0644, &file);
    } else {
        dafs_attr_t a;
        r = dafs_stat(d->c, f->file_name, &a);
        if ((r == -ENOENT || (r == 0 && a.size < want)) && want != (uint64_t)-1) {
            uint64_t from = r == 0 ? a.size : 0;
            r = dafs_open(d->c, f->file_name, DAFS_O_RDWR | DAFS_O_CREAT, 0644, &file);
            if (r == 0 && (r = layout(d, file, f->file_name, from, want)) < 0) {
                dafs_close(d->c, file);
                file = NULL;
            }
        } else if (r == 0) {
            r = dafs_open(d->c, f->file_name, DAFS_O_RDONLY, 0, &file);
        }
    }
    if (r < 0) {
        log_err("dafs: open %s: %s\n", f->file_name, dafs_strerror(r));
        td_verror(td, -r, "dafs_open");
        return 1;
    }
    FILE_SET_ENG_DATA(f, file);
    if (want != (uint64_t)-1 && f->real_file_size < want)
        f->real_file_size = want;
    return 0;
}

static int dafs_fio_close_file(struct thread_data *td, struct fio_file *f) {
    struct dafs_fio_data *d = td->io_ops_data;
    dafs_file_t *file = FILE_ENG_DATA(f);
    int r = 0;
    /* fio closes a file only once none of its I/O is in flight. */
    if (d && d->c && file)
        r = dafs_close(d->c, file);
    FILE_SET_ENG_DATA(f, NULL);
    return r < 0 ? -r : 0;
}

static int dafs_fio_unlink_file(struct thread_data *td, struct fio_file *f) {
    struct dafs_fio_data *d = td->io_ops_data;
    dafs_client_t *c = d ? d->c : NULL;
    int own = 0, r;
    if (!c) {
        if (connect_opts(td, &c) < 0)
            return 1;
        own = 1;
    }
    r = dafs_unlink(c, f->file_name);
    if (own)
        dafs_disconnect(c);
    return r < 0 && r != -ENOENT ? -r : 0;
}

static int dafs_fio_invalidate(struct thread_data *td, struct fio_file *f) {
    (void)td;
    (void)f;
    return 0; /* the server's page cache is not ours to drop */
}

/* ---------------------------------------------------------------------------------- */
/* I/O                                                                                */
/* ---------------------------------------------------------------------------------- */

static int submit(struct dafs_fio_data *d, struct io_u *io_u) {
    dafs_file_t *file = FILE_ENG_DATA(io_u->file);
    char *buf = io_u->xfer_buf;
    size_t len = io_u->xfer_buflen;
    uint64_t ud = (uint64_t)(uintptr_t)io_u;
    int read = io_u->ddir == DDIR_READ;
    if (d->have_region && buf >= d->mem && buf + len <= d->mem + d->mem_len) {
        size_t ro = (size_t)(buf - d->mem);
        return read ? dafs_pread_nb(d->c, file, d->cg, d->region, ro, len, io_u->offset, ud)
                    : dafs_pwrite_nb(d->c, file, d->cg, d->region, ro, len, io_u->offset, ud);
    }
    /* Not in the registered area (should not happen): the copying variants. */
    return read ? dafs_pread_nb_buf(d->c, file, d->cg, buf, len, io_u->offset, ud)
                : dafs_pwrite_nb_buf(d->c, file, d->cg, buf, len, io_u->offset, ud);
}

static void complete(struct io_u *io_u, const dafs_completion_t *cq) {
    if (cq->result < 0) {
        io_u->error = (int)-cq->result;
    } else {
        io_u->error = 0;
        io_u->resid = io_u->xfer_buflen - (unsigned long long)cq->result;
    }
}

static enum fio_q_status dafs_fio_queue(struct thread_data *td, struct io_u *io_u) {
    struct dafs_fio_data *d = td->io_ops_data;
    int r;

    fio_ro_check(td, io_u);

    if (ddir_sync(io_u->ddir)) {
        r = dafs_fsync(d->c, FILE_ENG_DATA(io_u->file));
        io_u->error = r < 0 ? -r : 0;
        return FIO_Q_COMPLETED;
    }
    if (io_u->ddir != DDIR_READ && io_u->ddir != DDIR_WRITE) {
        io_u->error = EOPNOTSUPP;
        return FIO_Q_COMPLETED;
    }
    if (d->sync) {
        dafs_completion_t cq;
        if (fio_fill_issue_time(td))
            fio_gettime(&io_u->issue_time, NULL);
        r = submit(d, io_u);
        if (r < 0) {
            io_u->error = -r;
            return FIO_Q_COMPLETED;
        }
        r = dafs_cg_wait(d->c, d->cg, 1, 1, -1, &cq);
        if (r != 1) {
            io_u->error = r < 0 ? -r : EIO;
            return FIO_Q_COMPLETED;
        }
        complete(io_u, &cq);
        io_u_mark_submit(td, 1);
        io_u_mark_complete(td, 1);
        return FIO_Q_COMPLETED;
    }
    if (d->inflight + d->npending + d->nfailed >= d->qmax)
        return FIO_Q_BUSY;
    d->pending[d->npending++] = io_u;
    return FIO_Q_QUEUED;
}

/* Submit staged io_us (in order) until done or the slots run out. */
static int flush_pending(struct thread_data *td, struct dafs_fio_data *d) {
    unsigned i = 0, submitted = 0;
    struct timespec now;
    int fill = fio_fill_issue_time(td);
    if (fill && d->npending)
        fio_gettime(&now, NULL);
    for (; i < d->npending; i++) {
        struct io_u *io_u = d->pending[i];
        int r = submit(d, io_u);
        if (r == -EAGAIN)
            break; /* no slot: the rest stays staged until completions are reaped */
        if (r < 0) {
            io_u->error = -r;
            d->failed[d->nfailed++] = io_u;
            continue;
        }
        if (fill) {
            memcpy(&io_u->issue_time, &now, sizeof now);
            io_u_queued(td, io_u);
        }
        d->inflight++;
        submitted++;
    }
    if (i > 0) {
        memmove(d->pending, d->pending + i, (d->npending - i) * sizeof(struct io_u *));
        d->npending -= i;
    }
    if (submitted)
        io_u_mark_submit(td, submitted);
    return 0;
}

static int dafs_fio_commit(struct thread_data *td) {
    struct dafs_fio_data *d = td->io_ops_data;
    return flush_pending(td, d);
}

static int dafs_fio_getevents(struct thread_data *td, unsigned int min, unsigned int max, const struct timespec *t) {
    struct dafs_fio_data *d = td->io_ops_data;
    int timeout = t ? (int)(t->tv_sec * 1000 + t->tv_nsec / 1000000) : -1;
    unsigned got = 0;
    if (max > d->depth)
        max = d->depth;
    for (;;) {
        if (d->npending)
            flush_pending(td, d);
        while (d->nfailed && got < max)
            d->events[got++] = d->failed[--d->nfailed];
        if (got >= max || d->inflight == 0)
            break;
        unsigned want = got < min ? min - got : 0;
        if (want > d->inflight)
            want = d->inflight;
        int k = dafs_cg_wait(d->c, d->cg, want, max - got, want ? timeout : 0, d->cqes);
        if (k < 0) {
            log_err("dafs: dafs_cg_wait: %s\n", dafs_strerror(k));
            td_verror(td, -k, "dafs_cg_wait");
            return got ? (int)got : k;
        }
        for (int j = 0; j < k; j++) {
            struct io_u *io_u = (struct io_u *)(uintptr_t)d->cqes[j].user_data;
            complete(io_u, &d->cqes[j]);
            d->events[got++] = io_u;
        }
        d->inflight -= (unsigned)k;
        if (got >= min || k == 0)
            break;
    }
    return (int)got;
}

static struct io_u *dafs_fio_event(struct thread_data *td, int event) {
    struct dafs_fio_data *d = td->io_ops_data;
    return d->events[event];
}

struct ioengine_ops ioengine = {
    .name = "dafs",
    .version = FIO_IOOPS_VERSION,
    .flags = FIO_DISKLESSIO | FIO_NODISKUTIL | FIO_ASYNCIO_SETS_ISSUE_TIME,
    .setup = dafs_fio_setup,
    .init = dafs_fio_init,
    .cleanup = dafs_fio_cleanup,
    .queue = dafs_fio_queue,
    .commit = dafs_fio_commit,
    .getevents = dafs_fio_getevents,
    .event = dafs_fio_event,
    .open_file = dafs_fio_open_file,
    .close_file = dafs_fio_close_file,
    .unlink_file = dafs_fio_unlink_file,
    .invalidate = dafs_fio_invalidate,
    .iomem_alloc = dafs_fio_iomem_alloc,
    .iomem_free = dafs_fio_iomem_free,
    .options = options,
    .option_struct_size = sizeof(struct dafs_fio_options),
};
