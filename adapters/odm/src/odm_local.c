/* The local backend: the same API over a directory of the local file system, for
 * like-with-like comparisons. I/O is buffered pread/pwrite (the DAFS server's I/O goes
 * through the page cache too) run by max_outstanding worker threads, so the queue depth
 * equals the DAFS backend's request slots (with max_outstanding 1, in odm_io itself). Create-invisible-until-commit is O_TMPFILE
 * plus linkat at commit, as on the DAFS server. Keys are checked against the file's
 * header only (no server to refuse a concurrent open with another key). */
#include "odm_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void *worker(void *arg);

static void l_fini(odm_ctx_t *c) {
    pthread_mutex_lock(&c->lmu);
    c->lstop = true; /* workers drain the queue first */
    pthread_cond_broadcast(&c->lwork);
    pthread_mutex_unlock(&c->lmu);
    for (uint32_t i = 0; i < c->nworkers; i++) pthread_join(c->workers[i], NULL);
    free(c->workers);
    c->workers = NULL;
    c->nworkers = 0;
    if (c->root_fd >= 0) close(c->root_fd);
    c->root_fd = -1;
    pthread_mutex_destroy(&c->lmu);
    pthread_cond_destroy(&c->lwork);
    pthread_cond_destroy(&c->lspace);
}

static int l_init(odm_ctx_t *c) {
    c->root_fd = open(c->cfg.target, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (c->root_fd < 0) return -errno;
    pthread_mutex_init(&c->lmu, NULL);
    pthread_cond_init(&c->lwork, NULL);
    pthread_cond_init(&c->lspace, NULL);
    /* One I/O at a time (odmlat): no worker, the I/O runs in odm_io itself, so a
     * latency measures the file system rather than two thread wake-ups. */
    uint32_t n = c->cfg.max_outstanding > 1 ? c->cfg.max_outstanding : 0;
    c->workers = calloc(n ? n : 1, sizeof *c->workers);
    if (!c->workers) {
        l_fini(c);
        return -ENOMEM;
    }
    for (; c->nworkers < n; c->nworkers++) {
        int e = pthread_create(&c->workers[c->nworkers], NULL, worker, c);
        if (e) {
            l_fini(c);
            return -e;
        }
    }
    return 0;
}

static int l_exists(odm_ctx_t *c, const char *path) {
    struct stat st;
    return fstatat(c->root_fd, path, &st, 0) == 0 ? 0 : -errno;
}

static int l_open(odm_ctx_t *c, struct odm_file *f, const char *path, bool create,
                  const void *key, uint32_t key_len) {
    (void)key;
    (void)key_len;
    while (*path == '/') path++;
    if (!create) {
        f->fd = openat(c->root_fd, path, O_RDWR | O_CLOEXEC);
        return f->fd < 0 ? -errno : 0;
    }
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    else snprintf(dir, sizeof dir, ".");
    f->fd = openat(c->root_fd, dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
    if (f->fd < 0) return -errno;
    f->path = strdup(path);
    if (!f->path) {
        close(f->fd);
        f->fd = -1;
        return -ENOMEM;
    }
    return 0;
}

static int l_commit(odm_ctx_t *c, struct odm_file *f) {
    if (fsync(f->fd) != 0) return -errno;
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", f->fd);
    if (linkat(AT_FDCWD, proc, c->root_fd, f->path, AT_SYMLINK_FOLLOW) != 0) return -errno;
    return 0;
}

static int l_close(odm_ctx_t *c, struct odm_file *f) {
    (void)c;
    int r = f->fd >= 0 && close(f->fd) != 0 ? -errno : 0;
    f->fd = -1;
    return r;
}

/* Whole transfers (short only at end of file for reads). */
static long xfer(int fd, int op, void *buf, size_t len, uint64_t off) {
    size_t done = 0;
    while (done < len) {
        ssize_t n = op == ODM_READ ? pread(fd, (char *)buf + done, len - done, (off_t)(off + done))
                                   : pwrite(fd, (char *)buf + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -errno;
        if (n == 0) break;
        done += (size_t)n;
    }
    return (long)done;
}

static long l_pread(odm_ctx_t *c, struct odm_file *f, void *buf, size_t len, uint64_t off) {
    (void)c;
    return xfer(f->fd, ODM_READ, buf, len, off);
}

static long l_pwrite(odm_ctx_t *c, struct odm_file *f, const void *buf, size_t len,
                     uint64_t off) {
    (void)c;
    return xfer(f->fd, ODM_WRITE, (void *)buf, len, off);
}

static int l_truncate(odm_ctx_t *c, struct odm_file *f, uint64_t size) {
    (void)c;
    return ftruncate(f->fd, (off_t)size) == 0 ? 0 : -errno;
}

static int l_fsize(odm_ctx_t *c, struct odm_file *f, uint64_t *out) {
    (void)c;
    struct stat st;
    if (fstat(f->fd, &st) != 0) return -errno;
    *out = (uint64_t)st.st_size;
    return 0;
}

static int l_thread_init(odm_ctx_t *c, struct odm_thread *t) {
    (void)c;
    (void)t;
    return 0;
}

static void l_thread_fini(odm_ctx_t *c, struct odm_thread *t) {
    (void)c;
    (void)t;
}

/* Caller holds ctx->mu; never blocks (a full pool answers -EAGAIN). */
static int l_submit(odm_ctx_t *c, struct odm_thread *t, odm_ioreq_t *r, struct odm_file *f) {
    (void)t;
    struct odm_req_priv *p = rp(r);
    if (!c->nworkers) {
        p->parts_inflight = 1;
        p->submitted_bytes = r->len;
        p->flags |= REQ_ALL_SUBMITTED;
        long n = xfer(f->fd, (int)r->op, r->buf, r->len, ODM_HEADER_BYTES + r->offset);
        odm_part_done(c, r, n, n >= 0 && (size_t)n < r->len);
        return 0;
    }
    pthread_mutex_lock(&c->lmu);
    if (c->linflight >= c->cfg.max_outstanding) {
        pthread_mutex_unlock(&c->lmu);
        return -EAGAIN;
    }
    p->fd = f->fd;
    p->parts_inflight = 1;
    p->submitted_bytes = r->len;
    p->flags |= REQ_ALL_SUBMITTED;
    p->next = NULL;
    if (c->lq_tail) rp(c->lq_tail)->next = r;
    else c->lq_head = r;
    c->lq_tail = r;
    c->linflight++;
    pthread_cond_signal(&c->lwork);
    pthread_mutex_unlock(&c->lmu);
    return 0;
}

static void *worker(void *arg) {
    odm_ctx_t *c = arg;
    for (;;) {
        pthread_mutex_lock(&c->lmu);
        while (!c->lq_head && !c->lstop) pthread_cond_wait(&c->lwork, &c->lmu);
        odm_ioreq_t *r = c->lq_head;
        if (!r) {
            pthread_mutex_unlock(&c->lmu);
            return NULL;
        }
        c->lq_head = rp(r)->next;
        if (!c->lq_head) c->lq_tail = NULL;
        pthread_mutex_unlock(&c->lmu);
        long n = xfer(rp(r)->fd, (int)r->op, r->buf, r->len, ODM_HEADER_BYTES + r->offset);
        pthread_mutex_lock(&c->mu);
        odm_part_done(c, r, n, n >= 0 && (size_t)n < r->len);
        pthread_mutex_unlock(&c->mu);
        pthread_mutex_lock(&c->lmu);
        c->linflight--;
        pthread_cond_signal(&c->lspace);
        pthread_mutex_unlock(&c->lmu);
    }
}

static void l_progress(odm_ctx_t *c, struct odm_thread *t, uint64_t seen, int timeout_ms) {
    (void)c;
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&t->mu);
    while (t->completed_seq == seen && t->pending > 0)
        if (pthread_cond_timedwait(&t->cv, &t->mu, &dl) == ETIMEDOUT) break;
    pthread_mutex_unlock(&t->mu);
}

static int l_alloc(odm_ctx_t *c, size_t len, void **ptr, uint64_t *region) {
    (void)c;
    *region = 0;
    if (posix_memalign(ptr, 4096, len) != 0) return -ENOMEM;
    memset(*ptr, 0, len);
    return 0;
}

static int l_free(odm_ctx_t *c, void *ptr, uint64_t region) {
    (void)c;
    (void)region;
    free(ptr);
    return 0;
}

static int l_null(odm_ctx_t *c) {
    (void)c;
    return 0;
}

static void l_info(odm_ctx_t *c, odm_info_t *out) {
    (void)c;
    snprintf(out->provider, sizeof out->provider, "local");
    out->max_io_bytes = 0;
}

const struct odm_backend odm_local_backend = {
    .name = "local",
    .init = l_init,
    .fini = l_fini,
    .exists = l_exists,
    .open = l_open,
    .commit = l_commit,
    .close = l_close,
    .pread = l_pread,
    .pwrite = l_pwrite,
    .truncate = l_truncate,
    .fsize = l_fsize,
    .thread_init = l_thread_init,
    .thread_fini = l_thread_fini,
    .submit = l_submit,
    .progress = l_progress,
    .alloc = l_alloc,
    .free = l_free,
    .null = l_null,
    .info = l_info,
};
