/* The DAFS backend: one dafs client (one session) per context, used under ctx->mu;
 * one completion group per thread; buffers of odm_alloc are registered regions.
 *
 * Why one client under a mutex rather than a client per thread: ODM files belong to the
 * context (Oracle opens a file in one thread and does I/O on it from others), and a
 * dafs_file_t belongs to the client that opened it; an uncommitted (create-unlinked) file
 * cannot even be opened by a second client. The mutex is held only while a call runs;
 * completions are routed by the client to the completion group of the thread that
 * submitted them, so any thread's call makes progress for all. */
#include "odm_internal.h"

#include <dafs.h>
#include <stdio.h>
#include <string.h>

#define CQE_BATCH 64

static int d_init(odm_ctx_t *c) {
    dafs_options_t o;
    memset(&o, 0, sizeof o);
    o.slots = c->cfg.max_outstanding;
    o.provider = c->cfg.provider == ODM_PROVIDER_TCP ? DAFS_PROVIDER_TCP : DAFS_PROVIDER_AUTO;
    dafs_client_t *cl = NULL;
    int r = dafs_connect(c->cfg.target, &o, &cl);
    c->dafs = cl;
    return r;
}

static void d_fini(odm_ctx_t *c) {
    pthread_mutex_lock(&c->mu);
    /* Waits for I/O in flight; closes every file (uncommitted ones vanish) and
     * releases the registered buffers. */
    dafs_disconnect(c->dafs);
    c->dafs = NULL;
    pthread_mutex_unlock(&c->mu);
}

static int d_exists(odm_ctx_t *c, const char *path) {
    dafs_attr_t a;
    return dafs_stat(c->dafs, path, &a);
}

static int d_open(odm_ctx_t *c, struct odm_file *f, const char *path, bool create,
                  const void *key, uint32_t key_len) {
    dafs_open_ex_t ex;
    memset(&ex, 0, sizeof ex);
    ex.flags = create ? DAFS_OX_UNLINKED : 0;
    ex.key = key;
    ex.key_len = key_len;
    dafs_file_t *df = NULL;
    int r = dafs_open_ex(c->dafs, path, DAFS_O_RDWR, 0644, &ex, &df);
    f->dafs = df;
    return r;
}

static int d_commit(odm_ctx_t *c, struct odm_file *f) {
    int r = dafs_fsync(c->dafs, f->dafs);
    return r ? r : dafs_publish(c->dafs, f->dafs);
}

static int d_close(odm_ctx_t *c, struct odm_file *f) {
    if (!c->dafs) return 0; /* after fini: the disconnect closed it */
    int r = dafs_close(c->dafs, f->dafs);
    f->dafs = NULL;
    return r;
}

static long d_pread(odm_ctx_t *c, struct odm_file *f, void *buf, size_t len, uint64_t off) {
    return dafs_pread(c->dafs, f->dafs, buf, len, off);
}

static long d_pwrite(odm_ctx_t *c, struct odm_file *f, const void *buf, size_t len,
                     uint64_t off) {
    return dafs_pwrite(c->dafs, f->dafs, buf, len, off);
}

static int d_truncate(odm_ctx_t *c, struct odm_file *f, uint64_t size) {
    return dafs_ftruncate(c->dafs, f->dafs, size);
}

static int d_fsize(odm_ctx_t *c, struct odm_file *f, uint64_t *out) {
    dafs_attr_t a;
    int r = dafs_fstat(c->dafs, f->dafs, &a);
    if (!r) *out = a.size;
    return r;
}

static int d_thread_init(odm_ctx_t *c, struct odm_thread *t) {
    dafs_cg_t cg = 0;
    int r = dafs_cg_create(c->dafs, &cg);
    t->cg = cg;
    return r;
}

static void d_thread_fini(odm_ctx_t *c, struct odm_thread *t) {
    if (c->dafs) dafs_cg_destroy(c->dafs, t->cg);
}

/* Caller holds ctx->mu. Sends the parts of `r` not yet sent. */
static int d_submit(odm_ctx_t *c, struct odm_thread *t, odm_ioreq_t *r, struct odm_file *f) {
    struct odm_req_priv *p = rp(r);
    size_t max = dafs_max_io_size(c->dafs);
    assert(max > 0);
    struct odm_alloc_rec *m = p->alloc_idx >= 0 ? &c->allocs[p->alloc_idx] : NULL;
    while (p->submitted_bytes < r->len) {
        size_t done = (size_t)p->submitted_bytes;
        size_t part = r->len - done < max ? r->len - done : max;
        uint64_t foff = ODM_HEADER_BYTES + r->offset + done;
        char *b = (char *)r->buf + done;
        uint64_t ud = (uint64_t)(uintptr_t)r;
        int e;
        if (m) {
            size_t roff = (size_t)(b - (char *)m->ptr);
            e = r->op == ODM_READ
                    ? dafs_pread_nb(c->dafs, f->dafs, t->cg, m->region, roff, part, foff, ud)
                    : dafs_pwrite_nb(c->dafs, f->dafs, t->cg, m->region, roff, part, foff, ud);
        } else {
            e = r->op == ODM_READ
                    ? dafs_pread_nb_buf(c->dafs, f->dafs, t->cg, b, part, foff, ud)
                    : dafs_pwrite_nb_buf(c->dafs, f->dafs, t->cg, b, part, foff, ud);
        }
        if (e) return e;
        p->parts_inflight++;
        p->submitted_bytes += part;
    }
    p->flags |= REQ_ALL_SUBMITTED;
    return 0;
}

static void d_progress(odm_ctx_t *c, struct odm_thread *t, uint64_t seen, int timeout_ms) {
    (void)seen; /* the completion group's own wait says when something came in */
    dafs_completion_t cq[CQE_BATCH];
    pthread_mutex_lock(&c->mu);
    if (c->dafs) {
        int n = dafs_cg_wait(c->dafs, t->cg, 1, CQE_BATCH, timeout_ms, cq);
        for (int i = 0; i < n; i++) {
            odm_ioreq_t *r = (odm_ioreq_t *)(uintptr_t)cq[i].user_data;
            odm_part_done(c, r, cq[i].result, cq[i].flags & DAFS_CQE_EOF);
        }
    }
    pthread_mutex_unlock(&c->mu);
}

static int d_alloc(odm_ctx_t *c, size_t len, void **ptr, uint64_t *region) {
    dafs_region_t rg = 0;
    int r = dafs_alloc_registered(c->dafs, len, ptr, &rg);
    *region = rg;
    return r;
}

static int d_free(odm_ctx_t *c, void *ptr, uint64_t region) {
    (void)ptr;
    return c->dafs ? dafs_unregister(c->dafs, region) : 0;
}

static int d_null(odm_ctx_t *c) { return dafs_null(c->dafs); }

static void d_info(odm_ctx_t *c, odm_info_t *out) {
    snprintf(out->provider, sizeof out->provider, "%s", dafs_provider(c->dafs));
    out->inline_threshold_bytes = dafs_inline_threshold(c->dafs);
    out->max_io_bytes = dafs_max_io_size(c->dafs);
    dafs_stats_t s;
    if (dafs_stats(c->dafs, &s) == 0) {
        out->inline_ios = s.inline_reads + s.inline_writes;
        out->direct_ios = s.direct_reads + s.direct_writes;
    }
}

const struct odm_backend odm_dafs_backend = {
    .name = "dafs",
    .init = d_init,
    .fini = d_fini,
    .exists = d_exists,
    .open = d_open,
    .commit = d_commit,
    .close = d_close,
    .pread = d_pread,
    .pwrite = d_pwrite,
    .truncate = d_truncate,
    .fsize = d_fsize,
    .thread_init = d_thread_init,
    .thread_fini = d_thread_fini,
    .submit = d_submit,
    .progress = d_progress,
    .alloc = d_alloc,
    .free = d_free,
    .null = d_null,
    .info = d_info,
};
