/* odm_io: submit arrays of I/Os and wait for specific ones or for N completions, with
 * completions kept per thread (each thread has its own completion group and list). */
#include "odm_internal.h"

#include <sched.h>
#include <string.h>

/* Append a completed request to its owner's done list (caller holds t->mu). */
static void done_push(struct odm_thread *t, odm_ioreq_t *r) {
    struct odm_req_priv *p = rp(r);
    p->next = NULL;
    p->prev = t->done_tail;
    if (t->done_tail) rp(t->done_tail)->next = r;
    else t->done_head = r;
    t->done_tail = r;
    p->lflags |= REQ_IN_DONE_LIST;
}

static void done_remove(struct odm_thread *t, odm_ioreq_t *r) {
    struct odm_req_priv *p = rp(r);
    assert(p->lflags & REQ_IN_DONE_LIST);
    if (p->prev) rp(p->prev)->next = p->next;
    else t->done_head = p->next;
    if (p->next) rp(p->next)->prev = p->prev;
    else t->done_tail = p->prev;
    p->next = p->prev = NULL;
    p->lflags &= ~REQ_IN_DONE_LIST;
}

/* Caller holds ctx->mu (the file and buffer in-flight counts are guarded by it). */
void odm_part_done(odm_ctx_t *c, odm_ioreq_t *r, int64_t res, bool eof) {
    struct odm_req_priv *p = rp(r);
    struct odm_thread *t = p->owner;
    assert(p->parts_inflight > 0);
    p->parts_inflight--;
    if (res < 0 && !p->err) p->err = (int32_t)res;
    else if (res > 0) p->done_bytes += (uint64_t)res;
    if (eof) p->flags |= REQ_EOF;
    if (p->parts_inflight || !(p->flags & REQ_ALL_SUBMITTED)) return;
    struct odm_file *f = odm_file_of(c, r->fid);
    assert(f && f->inflight > 0);
    f->inflight--;
    if (r->op == ODM_WRITE && !p->err && r->offset + p->done_bytes > f->written_end)
        f->written_end = r->offset + p->done_bytes;
    if (p->alloc_idx >= 0) c->allocs[p->alloc_idx].inflight--;
    c->ios++;
    c->bytes += p->done_bytes;
    pthread_mutex_lock(&t->mu);
    r->result = p->err ? p->err : (int64_t)p->done_bytes;
    r->state = ODM_REQ_DONE;
    done_push(t, r);
    assert(t->pending > 0);
    t->pending--;
    t->completed_seq++;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

/* Everything is checked before anything is submitted. Caller holds ctx->mu. */
static int validate(odm_ctx_t *c, struct odm_thread *t, odm_ioreq_t *const sub[], unsigned ns,
                    odm_ioreq_t *const wait[], unsigned nw) {
    for (unsigned i = 0; i < ns; i++) {
        odm_ioreq_t *r = sub[i];
        if (!r || (r->op != ODM_READ && r->op != ODM_WRITE) || !r->buf || !r->len ||
            r->reserved0 || r->offset > (uint64_t)INT64_MAX - ODM_HEADER_BYTES - r->len)
            return -EINVAL;
        if (r->state == ODM_REQ_PENDING || (rp(r)->lflags & REQ_IN_DONE_LIST)) return -EBUSY;
        if (!odm_file_of(c, r->fid)) return -EBADF;
        for (unsigned j = 0; j < i; j++)
            if (sub[j] == r) return -EBUSY; /* the same request twice */
    }
    for (unsigned i = 0; i < nw; i++) {
        odm_ioreq_t *r = wait[i];
        if (!r) return -EINVAL;
        bool being_submitted = false;
        for (unsigned j = 0; j < ns; j++) being_submitted |= sub[j] == r;
        if (being_submitted) continue;
        if (r->state == ODM_REQ_IDLE) return -EINVAL; /* never submitted */
        if (rp(r)->owner != t) return -EPERM;
    }
    return 0;
}

/* Start one request (all its parts), making progress while every slot is busy. */
static void submit_one(odm_ctx_t *c, struct odm_thread *t, odm_ioreq_t *r) {
    struct odm_req_priv *p = rp(r);
    pthread_mutex_lock(&c->mu);
    struct odm_file *f = odm_file_of(c, r->fid);
    struct odm_alloc_rec *m = odm_find_alloc(c, r->buf, r->len);
    memset(p, 0, sizeof *p);
    p->owner = t;
    p->alloc_idx = m ? (int32_t)(m - c->allocs) : -1;
    if (m) m->inflight++;
    else c->staged_ios += c->cfg.backend == ODM_BACKEND_DAFS;
    f->inflight++;
    r->result = 0;
    r->state = ODM_REQ_PENDING;
    pthread_mutex_lock(&t->mu);
    t->pending++;
    uint64_t seen = t->completed_seq;
    pthread_mutex_unlock(&t->mu);
    for (;;) {
        int e = c->be->submit(c, t, r, f);
        if (e == -EAGAIN) {
            /* Every slot is busy: let completions in (ours, and over DAFS anyone's) and
             * try again. */
            pthread_mutex_unlock(&c->mu);
            c->be->progress(c, t, seen, 1);
            pthread_mutex_lock(&t->mu);
            seen = t->completed_seq;
            pthread_mutex_unlock(&t->mu);
            pthread_mutex_lock(&c->mu);
            f = odm_file_of(c, r->fid);
            continue;
        }
        if (e < 0) {
            /* This part was not sent: the request ends with the error once the parts
             * sent before it are back. */
            p->flags |= REQ_ALL_SUBMITTED;
            p->parts_inflight++;
            odm_part_done(c, r, e, false);
        }
        break;
    }
    pthread_mutex_unlock(&c->mu);
}

/* Report what is done: wait[] members leave the done list silently, others go into
 * completions[]. Returns true when the wait is satisfied. Caller holds t->mu. */
static bool gather(struct odm_thread *t, odm_ioreq_t *const wait[], unsigned nw,
                   odm_ioreq_t *out[], unsigned max, unsigned min, unsigned *n) {
    bool all_waited = true;
    for (unsigned i = 0; i < nw; i++) all_waited &= wait[i]->state == ODM_REQ_DONE;
    odm_ioreq_t *r = t->done_head;
    while (r && *n < max) {
        odm_ioreq_t *next = rp(r)->next;
        if (!(rp(r)->lflags & REQ_WAITED)) {
            done_remove(t, r);
            out[(*n)++] = r;
        }
        r = next;
    }
    return all_waited && *n >= min;
}

int odm_io(odm_ctx_t *c, odm_ioreq_t *const submit[], unsigned ns, odm_ioreq_t *const wait[],
           unsigned nw, odm_ioreq_t *completions[], unsigned max_complete, unsigned min_complete,
           unsigned *ncomplete_out, int timeout_ms) {
    if (ncomplete_out) *ncomplete_out = 0;
    if (!c || (ns && !submit) || (nw && !wait) || (max_complete && !completions) ||
        (max_complete && !ncomplete_out) || min_complete > max_complete)
        return -EINVAL;
    int err = 0;
    struct odm_thread *t = odm_thread_get(c, &err);
    if (!t) return err;
    pthread_mutex_lock(&c->mu);
    pthread_mutex_lock(&t->mu);
    err = validate(c, t, submit, ns, wait, nw);
    pthread_mutex_unlock(&t->mu);
    pthread_mutex_unlock(&c->mu);
    if (err) return err;
    for (unsigned i = 0; i < ns; i++) submit_one(c, t, submit[i]);
    pthread_mutex_lock(&t->mu);
    for (unsigned i = 0; i < nw; i++) rp(wait[i])->lflags |= REQ_WAITED;
    pthread_mutex_unlock(&t->mu);

    int64_t deadline = timeout_ms < 0 ? INT64_MAX : odm_now_ms() + timeout_ms;
    unsigned n = 0;
    int rc = 0;
    bool progressed = false; /* even a poll (timeout 0) lets completions in once */
    for (;;) {
        pthread_mutex_lock(&t->mu);
        bool ok = gather(t, wait, nw, completions, max_complete, min_complete, &n);
        bool idle = t->pending == 0;
        uint64_t seen = t->completed_seq;
        pthread_mutex_unlock(&t->mu);
        if (ok && !progressed && !idle && n < max_complete) {
            /* Satisfied already (min 0): still collect what has arrived by now. */
            c->be->progress(c, t, seen, 0);
            progressed = true;
            continue;
        }
        if (ok || idle) break;
        int64_t left = deadline - odm_now_ms();
        if (left <= 0 && progressed) {
            rc = -ETIMEDOUT;
            break;
        }
        /* With other threads sharing the DAFS client, wait in short slices so that
         * they get the client in between. */
        int slice = __atomic_load_n(&c->nthreads, __ATOMIC_RELAXED) > 1 ? 1 : 10;
        c->be->progress(c, t, seen, left <= 0 ? 0 : left < slice ? (int)left : slice);
        progressed = true;
    }
    /* Waited requests that are done have been reported through wait[]. */
    pthread_mutex_lock(&t->mu);
    for (unsigned i = 0; i < nw; i++) {
        struct odm_req_priv *p = rp(wait[i]);
        p->lflags &= ~REQ_WAITED;
        if (p->lflags & REQ_IN_DONE_LIST) done_remove(t, wait[i]);
    }
    pthread_mutex_unlock(&t->mu);
    if (ncomplete_out) *ncomplete_out = n;
    return rc;
}
