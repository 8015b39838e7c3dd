/*
 * fbtl_dafs_io.c — the I/O engine of fbtl_dafs: an OMPIO io array (fh->f_io_array,
 * memory address + file offset + length per entry) becomes "pieces" of at most
 * dafs_max_io_size() bytes, submitted as non-blocking DAFS I/O on the process's
 * completion group. Blocking calls submit and wait; ipreadv/ipwritev submit and return,
 * and progress (called by OMPIO from MPI_Test/MPI_Wait through opal_progress) reaps.
 *
 * Every piece above dafs_inline_threshold_unregistered() uses registered memory (per call or from
 * the cache, dafs_pread_nb/dafs_pwrite_nb on the region): the server places the data
 * straight into the application's buffer. Pieces at or below the threshold travel
 * inline in messages, where registering would not pay (dafs_pread_nb_buf etc.); so do
 * all pieces in the "library" memory mode, where libdafs handles plain memory itself.
 *
 * Completions of all operations arrive on one group: a completion's user_data is its
 * piece, whose op is kept alive until its last piece completed, even after OMPIO freed
 * the request (MPI_Request_free on an active request).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dafs_ompio.h"
#include "fbtl_dafs.h"

/* Completions reaped per poll/wait call. */
#define REAP_BATCH 64
/* How long one blocking wait sleeps before re-checking (the request deadline of
 * libdafs bounds the whole operation). */
#define WAIT_SLICE_MS 1000

enum piece_kind { PIECE_BUF, PIECE_REGION };
enum piece_state { PIECE_PENDING, PIECE_IN_FLIGHT, PIECE_DONE };

struct piece {
    struct fbtl_dafs_op *op;
    char *mem;
    size_t len;
    uint64_t off;
    struct dafs_ompio_reg reg;
    bool registered;
    enum piece_kind kind;
    enum piece_state state;
};

struct fbtl_dafs_op {
    bool write;
    dafs_file_t *file;
    int mode;
    size_t npieces, next, outstanding;
    int64_t bytes;
    int err;             /* first -errno */
    bool owner_gone;     /* the request was freed: free when outstanding reaches 0 */
    bool broken;         /* the client failed: pieces in flight will never be reaped, so
                            the op is done now and never freed (a leak beats a
                            use-after-free) */
    struct piece pieces[];
};

static size_t count_pieces(const mca_common_ompio_io_array_t *a, int n, size_t max)
{
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        k += a[i].length == 0 ? 0 : (a[i].length + max - 1) / max;
    }
    return k;
}

struct fbtl_dafs_op *fbtl_dafs_op_new(dafs_client_t *c, dafs_file_t *file, bool write,
                                      const mca_common_ompio_io_array_t *a, int n, int mode)
{
    size_t max = dafs_max_io_size(c), thr = dafs_inline_threshold_unregistered(c);
    size_t k = count_pieces(a, n, max);
    struct fbtl_dafs_op *op = calloc(1, sizeof *op + k * sizeof(struct piece));
    if (op == NULL) {
        return NULL;
    }
    op->write = write;
    op->file = file;
    op->mode = mode;
    op->npieces = k;
    size_t p = 0;
    for (int i = 0; i < n; i++) {
        char *mem = a[i].memory_address;
        uint64_t off = (uint64_t)(intptr_t)a[i].offset;
        for (size_t done = 0; done < a[i].length; done += max) {
            struct piece *pc = &op->pieces[p++];
            pc->op = op;
            pc->mem = mem + done;
            pc->len = a[i].length - done < max ? a[i].length - done : max;
            pc->off = off + done;
            pc->kind = (mode == DAFS_OMPIO_MEM_LIBRARY || pc->len <= thr) ? PIECE_BUF
                                                                          : PIECE_REGION;
            if (pc->len <= thr) {
                dafs_ompio_st.inline_ops++;
            } else {
                dafs_ompio_st.direct_ops++;
            }
        }
    }
    return op;
}

static void piece_finish(dafs_client_t *c, struct piece *pc, int64_t result)
{
    struct fbtl_dafs_op *op = pc->op;
    if (pc->registered) {
        dafs_ompio_reg_put(c, &pc->reg);
        pc->registered = false;
    }
    pc->state = PIECE_DONE;
    if (result < 0) {
        dafs_ompio_st.io_errors++;
        if (op->err == 0) {
            op->err = (int)result;
        }
        return;
    }
    op->bytes += result;
    if (op->write) {
        dafs_ompio_st.bytes_written += (uint64_t)result;
    } else {
        dafs_ompio_st.bytes_read += (uint64_t)result;
    }
}

/* Submit one piece: 0, -EAGAIN (no slot: retry later), or the piece failed. */
static int piece_submit(dafs_client_t *c, dafs_cg_t cg, struct piece *pc)
{
    struct fbtl_dafs_op *op = pc->op;
    uint64_t ud = (uint64_t)(uintptr_t)pc;
    int rc;
    if (pc->kind == PIECE_REGION && !pc->registered) {
        rc = dafs_ompio_reg_get(c, pc->mem, pc->len, op->mode, &pc->reg);
        if (rc < 0) {
            piece_finish(c, pc, rc);
            return 0;
        }
        pc->registered = true;
    }
    if (pc->kind == PIECE_REGION) {
        rc = op->write ? dafs_pwrite_nb(c, op->file, cg, pc->reg.region, pc->reg.offset,
                                        pc->len, pc->off, ud)
                       : dafs_pread_nb(c, op->file, cg, pc->reg.region, pc->reg.offset,
                                       pc->len, pc->off, ud);
    } else {
        rc = op->write ? dafs_pwrite_nb_buf(c, op->file, cg, pc->mem, pc->len, pc->off, ud)
                       : dafs_pread_nb_buf(c, op->file, cg, pc->mem, pc->len, pc->off, ud);
    }
    if (rc == -EAGAIN) {
        return rc; /* keeps its registration for the retry */
    }
    if (rc < 0) {
        piece_finish(c, pc, rc);
        return 0;
    }
    pc->state = PIECE_IN_FLIGHT;
    op->outstanding++;
    return 0;
}

/* Submit what is pending, in order, until the slots run out. */
static void op_submit(dafs_client_t *c, dafs_cg_t cg, struct fbtl_dafs_op *op)
{
    while (op->next < op->npieces && !op->owner_gone) {
        if (piece_submit(c, cg, &op->pieces[op->next]) == -EAGAIN) {
            return;
        }
        op->next++;
    }
}

static void dispatch(dafs_client_t *c, const dafs_completion_t *done, int n)
{
    for (int i = 0; i < n; i++) {
        struct piece *pc = (struct piece *)(uintptr_t)done[i].user_data;
        struct fbtl_dafs_op *op = pc->op;
        piece_finish(c, pc, done[i].result);
        op->outstanding--;
        if (op->owner_gone && op->outstanding == 0) {
            free(op);
        }
    }
}

bool fbtl_dafs_op_done(const struct fbtl_dafs_op *op)
{
    return op->broken || (op->outstanding == 0 && (op->next == op->npieces || op->err != 0));
}

int fbtl_dafs_op_err(const struct fbtl_dafs_op *op)
{
    return op->err;
}

int64_t fbtl_dafs_op_bytes(const struct fbtl_dafs_op *op)
{
    return op->bytes;
}

/* A failure of the client itself (not of one piece): the op ends with it; pieces in
 * flight may still complete later (owner_gone keeps the op until then). */
static void op_fail(struct fbtl_dafs_op *op, int rc)
{
    if (op->err == 0) {
        op->err = rc;
    }
    op->next = op->npieces;
}

void fbtl_dafs_op_progress_locked(dafs_client_t *c, dafs_cg_t cg, struct fbtl_dafs_op *op,
                                  int wait_ms)
{
    dafs_completion_t done[REAP_BATCH];
    if (op->err == 0) {
        op_submit(c, cg, op);
    }
    if (fbtl_dafs_op_done(op)) {
        return;
    }
    int n = wait_ms > 0 ? dafs_cg_wait(c, cg, 1, REAP_BATCH, wait_ms, done)
                        : dafs_cg_poll(c, cg, done, REAP_BATCH);
    if (n < 0) {
        op_fail(op, n);
        op->broken = true;
        return;
    }
    dispatch(c, done, n);
    if (op->err == 0) {
        op_submit(c, cg, op);
    }
}

void fbtl_dafs_op_run_locked(dafs_client_t *c, dafs_cg_t cg, struct fbtl_dafs_op *op)
{
    while (!fbtl_dafs_op_done(op)) {
        fbtl_dafs_op_progress_locked(c, cg, op, WAIT_SLICE_MS);
    }
}

void fbtl_dafs_op_release(struct fbtl_dafs_op *op)
{
    if (op->outstanding == 0) {
        free(op);
    } else {
        op->owner_gone = true;
    }
}
