/* libdafs_odm: contexts, the file table (create/commit/abort/identify/resize), buffers
 * and information. odm_io lives in odm_io.c, the backends in odm_dafs.c/odm_local.c. */
#include "odm_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_OUTSTANDING 32
#define DEFAULT_FILES 1024
#define DEFAULT_THREADS 64
#define DEFAULT_ALLOCS 256

int64_t odm_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void thread_destructor(void *p);

int odm_init(const odm_config_t *cfg, odm_ctx_t **out) {
    if (!cfg || !out || !cfg->target) return -EINVAL;
    *out = NULL;
    for (int i = 0; i < 4; i++)
        if (cfg->reserved[i]) return -EINVAL;
    const struct odm_backend *be;
    if (cfg->backend == ODM_BACKEND_DAFS) be = &odm_dafs_backend;
    else if (cfg->backend == ODM_BACKEND_LOCAL) be = &odm_local_backend;
    else return -EINVAL;
    if (cfg->provider > ODM_PROVIDER_TCP) return -EINVAL;
    odm_ctx_t *c = calloc(1, sizeof *c);
    if (!c) return -ENOMEM;
    c->be = be;
    c->cfg = *cfg;
    if (!c->cfg.max_outstanding) c->cfg.max_outstanding = DEFAULT_OUTSTANDING;
    if (!c->cfg.max_files) c->cfg.max_files = DEFAULT_FILES;
    if (!c->cfg.max_threads) c->cfg.max_threads = DEFAULT_THREADS;
    if (!c->cfg.max_allocs) c->cfg.max_allocs = DEFAULT_ALLOCS;
    c->cfg.target = NULL; /* the caller's string is not kept */
    c->files = calloc(c->cfg.max_files, sizeof *c->files);
    c->allocs = calloc(c->cfg.max_allocs, sizeof *c->allocs);
    c->root_fd = -1;
    pthread_mutex_init(&c->mu, NULL);
    int r = (!c->files || !c->allocs) ? -ENOMEM : 0;
    if (!r && pthread_key_create(&c->tkey, thread_destructor) != 0) r = -EAGAIN;
    if (!r) {
        c->cfg.target = cfg->target; /* backends read it during init only */
        r = be->init(c);
        c->cfg.target = NULL;
        if (r) pthread_key_delete(c->tkey);
    }
    if (r) {
        free(c->files);
        free(c->allocs);
        pthread_mutex_destroy(&c->mu);
        free(c);
        return r;
    }
    *out = c;
    return 0;
}

/* Forget one thread's state (caller holds ctx->mu). Its I/O must be finished. */
static void thread_drop(odm_ctx_t *c, struct odm_thread *t) {
    c->be->thread_fini(c, t);
    for (struct odm_thread **pp = &c->threads; *pp; pp = &(*pp)->next_in_ctx) {
        if (*pp == t) {
            *pp = t->next_in_ctx;
            break;
        }
    }
    __atomic_fetch_sub(&c->nthreads, 1, __ATOMIC_RELAXED); /* read unlocked by odm_io */
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
}

/* A thread exits: its state goes unless it still has I/O in flight (then odm_fini
 * frees it). */
static void thread_destructor(void *p) {
    struct odm_thread *t = p;
    odm_ctx_t *c = t->ctx;
    pthread_mutex_lock(&c->mu);
    pthread_mutex_lock(&t->mu);
    bool idle = t->pending == 0;
    pthread_mutex_unlock(&t->mu);
    if (idle) thread_drop(c, t);
    pthread_mutex_unlock(&c->mu);
}

struct odm_thread *odm_thread_get(odm_ctx_t *c, int *err) {
    struct odm_thread *t = pthread_getspecific(c->tkey);
    if (t) return t;
    pthread_mutex_lock(&c->mu);
    if (c->nthreads >= c->cfg.max_threads) {
        pthread_mutex_unlock(&c->mu);
        *err = -EMFILE;
        return NULL;
    }
    t = calloc(1, sizeof *t);
    if (!t) {
        pthread_mutex_unlock(&c->mu);
        *err = -ENOMEM;
        return NULL;
    }
    t->ctx = c;
    pthread_mutex_init(&t->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cv, &ca);
    pthread_condattr_destroy(&ca);
    int r = c->be->thread_init(c, t);
    if (r) {
        pthread_mutex_destroy(&t->mu);
        pthread_cond_destroy(&t->cv);
        free(t);
        pthread_mutex_unlock(&c->mu);
        *err = r;
        return NULL;
    }
    t->next_in_ctx = c->threads;
    c->threads = t;
    __atomic_fetch_add(&c->nthreads, 1, __ATOMIC_RELAXED);
    pthread_setspecific(c->tkey, t);
    pthread_mutex_unlock(&c->mu);
    return t;
}

int odm_fini(odm_ctx_t *c) {
    if (!c) return 0;
    pthread_key_delete(c->tkey);
    /* The backend first waits for I/O in flight and stops (DAFS: disconnects, which
     * closes every file on the server, discarding uncommitted ones, and releases the
     * registered buffers); then the tables go. */
    c->be->fini(c);
    pthread_mutex_lock(&c->mu);
    for (uint32_t i = 0; i < c->cfg.max_files; i++)
        if (c->files[i].state != F_FREE) {
            c->be->close(c, &c->files[i]);
            free(c->files[i].path);
        }
    while (c->threads) {
        pthread_mutex_lock(&c->threads->mu);
        c->threads->pending = 0; /* finished or discarded by the backend's fini */
        pthread_mutex_unlock(&c->threads->mu);
        thread_drop(c, c->threads);
    }
    for (uint32_t i = 0; i < c->cfg.max_allocs; i++)
        if (c->allocs[i].ptr) c->be->free(c, c->allocs[i].ptr, c->allocs[i].region);
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_destroy(&c->mu);
    free(c->files);
    free(c->allocs);
    free(c);
    return 0;
}

const char *odm_strerror(int err) {
    int e = err < 0 ? -err : err;
    switch (e) {
    case EACCES: return "wrong key (or the file is open with another key)";
    case ENOTSUP: return "not an ODM file";
    case EMEDIUMTYPE: return "the ODM file has another file type";
    case EPERM: return "request submitted by another thread";
    default: return strerror(e);
    }
}

/* ---------------------------------------------------------------------------------- */
/* Files                                                                              */

struct odm_file *odm_file_of(odm_ctx_t *c, odm_fid_t fid) {
    uint32_t idx = (uint32_t)(fid & 0xffffffffu);
    uint32_t gen = (uint32_t)(fid >> 32);
    if (idx == 0 || idx > c->cfg.max_files) return NULL;
    struct odm_file *f = &c->files[idx - 1];
    return (f->state != F_FREE && f->gen == gen) ? f : NULL;
}

static struct odm_file *file_slot(odm_ctx_t *c) {
    for (uint32_t i = 0; i < c->cfg.max_files; i++)
        if (c->files[i].state == F_FREE) return &c->files[i];
    return NULL;
}

static odm_fid_t fid_of(odm_ctx_t *c, struct odm_file *f) {
    return ((uint64_t)f->gen << 32) | (uint64_t)(f - c->files + 1);
}

static void file_release(struct odm_file *f) {
    free(f->path);
    uint32_t gen = f->gen + 1;
    memset(f, 0, sizeof *f);
    f->gen = gen ? gen : 1;
    f->fd = -1;
}

static int check_key(const void *key, uint32_t key_len) {
    if (key_len > ODM_KEY_BYTES_MAX || (key_len && !key)) return -EINVAL;
    return 0;
}

/* Make an uncommitted file at least `size` ODM bytes long without touching data:
 * its end is extended by writing one zero byte unless data is there already (an
 * uncommitted DAFS file cannot be truncated: it has no handle yet). Caller holds mu. */
static int grow(odm_ctx_t *c, struct odm_file *f, uint64_t size) {
    if (size > f->created_size && size > 0) {
        unsigned char b = 0;
        long n = c->be->pread(c, f, &b, 1, ODM_HEADER_BYTES + size - 1);
        if (n == 0) n = c->be->pwrite(c, f, &b, 1, ODM_HEADER_BYTES + size - 1);
        if (n < 0) return (int)n;
    }
    if (size > f->created_size) f->created_size = size;
    return 0;
}

int odm_create(odm_ctx_t *c, const char *path, uint64_t size_bytes, uint32_t ftype,
               const void *key, uint32_t key_len, odm_fid_t *out) {
    if (!c || !path || !*path || !out || check_key(key, key_len)) return -EINVAL;
    if (size_bytes > (uint64_t)INT64_MAX - ODM_HEADER_BYTES) return -EFBIG;
    *out = 0;
    pthread_mutex_lock(&c->mu);
    struct odm_file *f = file_slot(c);
    int r = f ? c->be->exists(c, path) : -EMFILE;
    if (r == 0) r = -EEXIST;
    else if (r == -ENOENT) r = 0;
    if (!r) r = c->be->open(c, f, path, true, key, key_len);
    if (!r) {
        f->state = F_CREATED;
        struct odm_header h = {.version = 1, .ftype = ftype, .key_len = key_len};
        memcpy(h.magic, ODM_MAGIC, 8);
        if (key_len) memcpy(h.key, key, key_len);
        long w = c->be->pwrite(c, f, &h, sizeof h, 0);
        r = w < 0 ? (int)w : grow(c, f, size_bytes);
        if (r) {
            c->be->close(c, f);
            file_release(f);
        } else {
            *out = fid_of(c, f);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return r;
}

int odm_commit(odm_ctx_t *c, odm_fid_t fid) {
    if (!c) return -EINVAL;
    pthread_mutex_lock(&c->mu);
    struct odm_file *f = odm_file_of(c, fid);
    int r = !f ? -EBADF : f->state != F_CREATED ? -EINVAL : c->be->commit(c, f);
    if (!r) f->state = F_OPEN;
    pthread_mutex_unlock(&c->mu);
    return r;
}

/* Close and free a file: `created_only` refuses committed/identified ones. */
static int close_fid(odm_ctx_t *c, odm_fid_t fid, bool created_only) {
    if (!c) return -EINVAL;
    pthread_mutex_lock(&c->mu);
    struct odm_file *f = odm_file_of(c, fid);
    int r = !f                                   ? -EBADF
            : created_only && f->state != F_CREATED ? -EINVAL
            : f->inflight                        ? -EBUSY
                                                 : 0;
    if (!r) {
        r = c->be->close(c, f); /* an uncommitted file vanishes with its last close */
        file_release(f);
    }
    pthread_mutex_unlock(&c->mu);
    return r;
}

int odm_abort(odm_ctx_t *c, odm_fid_t fid) { return close_fid(c, fid, true); }

int odm_unidentify(odm_ctx_t *c, odm_fid_t fid) { return close_fid(c, fid, false); }

int odm_identify(odm_ctx_t *c, const char *path, uint32_t ftype, const void *key,
                 uint32_t key_len, odm_fid_t *out) {
    if (!c || !path || !out || check_key(key, key_len)) return -EINVAL;
    *out = 0;
    pthread_mutex_lock(&c->mu);
    struct odm_file *f = file_slot(c);
    int r = f ? c->be->open(c, f, path, false, key, key_len) : -EMFILE;
    if (!r) {
        struct odm_header h;
        memset(&h, 0, sizeof h);
        long n = c->be->pread(c, f, &h, sizeof h, 0);
        if (n < 0) r = (int)n;
        else if (n < (long)sizeof h || memcmp(h.magic, ODM_MAGIC, 8) != 0 || h.version != 1 ||
                 h.key_len > ODM_KEY_BYTES_MAX)
            r = -ENOTSUP;
        else if (h.key_len != key_len || (key_len && memcmp(h.key, key, key_len) != 0))
            r = -EACCES;
        else if (ftype && h.ftype != ftype)
            r = -EMEDIUMTYPE;
        if (r) {
            c->be->close(c, f);
            file_release(f);
        } else {
            f->state = F_OPEN;
            *out = fid_of(c, f);
        }
    } else if (f) {
        file_release(f);
    }
    pthread_mutex_unlock(&c->mu);
    return r;
}

int odm_resize(odm_ctx_t *c, odm_fid_t fid, uint64_t size_bytes) {
    if (!c) return -EINVAL;
    if (size_bytes > (uint64_t)INT64_MAX - ODM_HEADER_BYTES) return -EFBIG;
    pthread_mutex_lock(&c->mu);
    struct odm_file *f = odm_file_of(c, fid);
    int r;
    if (!f) r = -EBADF;
    else if (f->state == F_CREATED) /* may only grow before commit (see grow) */
        r = size_bytes < f->created_size || size_bytes < f->written_end
                ? -EINVAL
                : grow(c, f, size_bytes);
    else r = c->be->truncate(c, f, ODM_HEADER_BYTES + size_bytes);
    pthread_mutex_unlock(&c->mu);
    return r;
}

int odm_size(odm_ctx_t *c, odm_fid_t fid, uint64_t *out) {
    if (!c || !out) return -EINVAL;
    pthread_mutex_lock(&c->mu);
    struct odm_file *f = odm_file_of(c, fid);
    uint64_t sz = 0;
    int r = 0;
    if (!f) r = -EBADF;
    else if (f->state == F_CREATED)
        sz = ODM_HEADER_BYTES + (f->created_size > f->written_end ? f->created_size : f->written_end);
    else r = c->be->fsize(c, f, &sz);
    pthread_mutex_unlock(&c->mu);
    if (!r) *out = sz > ODM_HEADER_BYTES ? sz - ODM_HEADER_BYTES : 0;
    return r;
}

/* ---------------------------------------------------------------------------------- */
/* Memory and information                                                             */

struct odm_alloc_rec *odm_find_alloc(odm_ctx_t *c, const void *p, size_t len) {
    uintptr_t a = (uintptr_t)p;
    for (uint32_t i = 0; i < c->cfg.max_allocs; i++) {
        struct odm_alloc_rec *m = &c->allocs[i];
        uintptr_t b = (uintptr_t)m->ptr;
        if (m->ptr && a >= b && a - b <= m->len && len <= m->len - (a - b)) return m;
    }
    return NULL;
}

void *odm_alloc(odm_ctx_t *c, size_t len) {
    if (!c || !len) return NULL;
    void *p = NULL;
    pthread_mutex_lock(&c->mu);
    for (uint32_t i = 0; i < c->cfg.max_allocs; i++) {
        struct odm_alloc_rec *m = &c->allocs[i];
        if (m->ptr) continue;
        if (c->be->alloc(c, len, &p, &m->region) == 0) {
            m->ptr = p;
            m->len = len;
            m->inflight = 0;
        }
        break;
    }
    pthread_mutex_unlock(&c->mu);
    return p;
}

int odm_free(odm_ctx_t *c, void *p) {
    if (!c || !p) return -EINVAL;
    pthread_mutex_lock(&c->mu);
    int r = -EINVAL;
    for (uint32_t i = 0; i < c->cfg.max_allocs; i++) {
        struct odm_alloc_rec *m = &c->allocs[i];
        if (m->ptr != p) continue;
        r = m->inflight ? -EBUSY : c->be->free(c, p, m->region);
        if (!r) memset(m, 0, sizeof *m);
        break;
    }
    pthread_mutex_unlock(&c->mu);
    return r;
}

int odm_info(odm_ctx_t *c, odm_info_t *out) {
    if (!c || !out) return -EINVAL;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&c->mu);
    snprintf(out->backend, sizeof out->backend, "%s", c->be->name);
    out->ios = c->ios;
    out->bytes = c->bytes;
    out->staged_ios = c->staged_ios;
    c->be->info(c, out);
    pthread_mutex_unlock(&c->mu);
    return 0;
}

int odm_null(odm_ctx_t *c) {
    if (!c) return -EINVAL;
    pthread_mutex_lock(&c->mu);
    int r = c->be->null(c);
    pthread_mutex_unlock(&c->mu);
    return r;
}
