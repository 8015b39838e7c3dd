/* Internal structures of libdafs_odm shared by the core (odm.c, odm_io.c) and the
 * backends (odm_dafs.c, odm_local.c). */
#ifndef ODM_INTERNAL_H
#define ODM_INTERNAL_H

#define _GNU_SOURCE
#include "dafs_odm.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define ODM_HIDDEN __attribute__((visibility("hidden")))

/* On-disk header (first ODM_HEADER_BYTES of every ODM file; rest zero). */
#define ODM_MAGIC "DAFSODM1"
struct odm_header {
    char magic[8];
    uint32_t version;  /* 1 */
    uint32_t ftype;
    uint32_t key_len;
    uint8_t key[ODM_KEY_BYTES_MAX];
};

struct odm_thread;

/* The library's part of an odm_ioreq_t (lives in its priv[] words). */
struct odm_req_priv {
    struct odm_thread *owner;
    odm_ioreq_t *next, *prev; /* in a backend's work queue or the owner's done list */
    uint64_t submitted_bytes; /* parts submitted so far (split I/Os) */
    uint64_t done_bytes;
    int32_t err;              /* first error of a part */
    uint32_t parts_inflight;
    uint32_t flags;           /* REQ_ALL_SUBMITTED, REQ_EOF: guarded by ctx->mu */
    int32_t fd;               /* LOCAL: the file's descriptor */
    int32_t alloc_idx;        /* odm_alloc buffer of `buf`, or -1 */
    uint32_t lflags;          /* REQ_IN_DONE_LIST, REQ_WAITED: guarded by the owner's mu
                                 (LOCAL workers complete requests while the owner waits) */
};
_Static_assert(sizeof(struct odm_req_priv) <= sizeof(((odm_ioreq_t *)0)->priv), "priv");
#define REQ_ALL_SUBMITTED 1u /* no part left to submit */
#define REQ_IN_DONE_LIST  2u /* completed, not yet reported */
#define REQ_WAITED        4u /* named in wait[] of the current odm_io call */
#define REQ_EOF           8u

static inline struct odm_req_priv *rp(odm_ioreq_t *r) {
    return (struct odm_req_priv *)(void *)r->priv;
}

/* One thread's I/O state: its completion group (DAFS) and its list of completed,
 * unreported requests. `mu` guards the list and counters (LOCAL workers append to it). */
struct odm_thread {
    odm_ctx_t *ctx;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    odm_ioreq_t *done_head, *done_tail;
    uint64_t pending;        /* submitted, not complete */
    uint64_t completed_seq;  /* bumped at every completion (LOCAL waits on it) */
    uint32_t cg;             /* DAFS completion group */
    struct odm_thread *next_in_ctx;
};

enum odm_file_state { F_FREE = 0, F_CREATED, F_OPEN };

struct odm_file {
    enum odm_file_state state;
    uint32_t gen;       /* bumped at every reuse: stale fids are refused */
    uint64_t inflight;  /* requests in flight naming it (guarded by ctx->mu) */
    void *dafs;         /* DAFS: dafs_file_t* */
    int fd;             /* LOCAL */
    char *path;         /* LOCAL create: the name to link at commit */
    /* Uncommitted files: a DAFS create-unlinked file has no usable handle until it is
     * published (only I/O by its open works), so their size is kept here: the size
     * set by create/resize, and the end of the furthest write. */
    uint64_t created_size, written_end;
};

struct odm_alloc_rec {
    void *ptr;
    size_t len;
    uint64_t region; /* DAFS region id */
    uint64_t inflight;
};

struct odm_backend;

struct odm_ctx {
    const struct odm_backend *be;
    odm_config_t cfg;
    pthread_mutex_t mu;       /* files, allocs, threads, and the DAFS client */
    pthread_key_t tkey;
    struct odm_thread *threads;
    uint32_t nthreads;
    struct odm_file *files;
    struct odm_alloc_rec *allocs;
    uint64_t ios, bytes, staged_ios; /* guarded by mu */
    void *dafs;               /* DAFS: dafs_client_t* */
    /* LOCAL */
    int root_fd;
    pthread_mutex_t lmu;
    pthread_cond_t lwork, lspace;
    odm_ioreq_t *lq_head, *lq_tail;
    uint32_t linflight;
    bool lstop;
    pthread_t *workers;
    uint32_t nworkers;
};

/* What a backend does; the core does the rest (tables, headers, keys, odm_io). */
struct odm_backend {
    const char *name;
    int (*init)(odm_ctx_t *ctx);
    void (*fini)(odm_ctx_t *ctx);
    int (*exists)(odm_ctx_t *ctx, const char *path);
    /* Open `path`: create-unlinked when `create`. Fills f->dafs or f->fd. */
    int (*open)(odm_ctx_t *ctx, struct odm_file *f, const char *path, bool create,
                const void *key, uint32_t key_len);
    int (*commit)(odm_ctx_t *ctx, struct odm_file *f);
    int (*close)(odm_ctx_t *ctx, struct odm_file *f);
    long (*pread)(odm_ctx_t *ctx, struct odm_file *f, void *buf, size_t len, uint64_t off);
    long (*pwrite)(odm_ctx_t *ctx, struct odm_file *f, const void *buf, size_t len,
                   uint64_t off);
    int (*truncate)(odm_ctx_t *ctx, struct odm_file *f, uint64_t size);
    int (*fsize)(odm_ctx_t *ctx, struct odm_file *f, uint64_t *out);
    int (*thread_init)(odm_ctx_t *ctx, struct odm_thread *t);
    void (*thread_fini)(odm_ctx_t *ctx, struct odm_thread *t);
    /* Start (the rest of) `r`; -EAGAIN: no slot, make progress and call again. Other
     * errors: the part was not submitted (the core completes the request with it). */
    int (*submit)(odm_ctx_t *ctx, struct odm_thread *t, odm_ioreq_t *r, struct odm_file *f);
    /* Wait up to timeout_ms for completions of `t` (while t->completed_seq == seen). */
    void (*progress)(odm_ctx_t *ctx, struct odm_thread *t, uint64_t seen, int timeout_ms);
    int (*alloc)(odm_ctx_t *ctx, size_t len, void **ptr, uint64_t *region);
    int (*free)(odm_ctx_t *ctx, void *ptr, uint64_t region);
    int (*null)(odm_ctx_t *ctx);
    void (*info)(odm_ctx_t *ctx, odm_info_t *out);
};

ODM_HIDDEN extern const struct odm_backend odm_dafs_backend;
ODM_HIDDEN extern const struct odm_backend odm_local_backend;

/* Core helpers for the backends. */
/* A part of `r` finished with `res` (bytes or -errno); completes `r` when it was the last.
 * Takes t->mu itself. */
ODM_HIDDEN void odm_part_done(odm_ctx_t *ctx, odm_ioreq_t *r, int64_t res, bool eof);
/* The odm_alloc buffer holding [p, p+len), or NULL. Caller holds ctx->mu. */
ODM_HIDDEN struct odm_alloc_rec *odm_find_alloc(odm_ctx_t *ctx, const void *p, size_t len);
/* The file of a fid, or NULL. Caller holds ctx->mu. */
ODM_HIDDEN struct odm_file *odm_file_of(odm_ctx_t *ctx, odm_fid_t fid);
/* This thread's state in ctx (created on first use), or NULL with *err set. */
ODM_HIDDEN struct odm_thread *odm_thread_get(odm_ctx_t *ctx, int *err);
/* Monotonic milliseconds. */
ODM_HIDDEN int64_t odm_now_ms(void);

#endif
