/*
 * dafs_odm.h — an Oracle-Disk-Manager-style I/O library over DAFS (libdafs_odm.so).
 *
 * The shape follows the ODM API described in "DAFS/ODM" (seed 002, section 3): files are
 * created invisible and become visible only when committed (abort, or a crash before
 * commit, discards them with their data), are opened ("identified") with a key, can be
 * resized, and all I/O goes through one call, odm_io, that submits an array of
 * asynchronous I/Os and waits for specific ones and/or for N completions. I/Os belong to
 * the thread that submitted them: only that thread can wait for them or receive their
 * completions.
 *
 * Two backends behind the same API, so benchmarks compare like with like:
 *   ODM_BACKEND_DAFS   a DAFS server through libdafs (TCP, or shared memory on the same
 *                      host). Asynchronous I/O on completion groups; buffers from
 *                      odm_alloc are registered, so the server places read data into them
 *                      and takes write data from them directly.
 *   ODM_BACKEND_LOCAL  a directory of the local file system, with pread/pwrite run by a
 *                      pool of max_outstanding worker threads (the same queue depth).
 *
 * Link with -ldafs_odm (and -ldafs). Build/install: scripts/install-odm.sh PREFIX.
 *
 * CONVENTIONS
 * Errors.   Functions return 0 (or a count) on success and a NEGATIVE errno value on
 *           failure; errno is not set. odm_strerror() gives a message. ODM-specific:
 *             -EACCES     wrong key (odm_identify; also odm_create/identify while another
 *                         client holds the file open with a different key)
 *             -ENOTSUP    the file is not an ODM file (no ODM header)
 *             -EMEDIUMTYPE the file's type differs from the one asked for (identify)
 *             -EEXIST     odm_create/odm_commit: the name exists already
 *             -EPERM      odm_io: a wait[] request was submitted by another thread
 *             -EBUSY      a request submitted again while still in flight or not yet
 *                         reported; odm_unidentify/odm_abort with I/O in flight
 *             -EBADF      unknown or closed odm_fid_t
 *             -EMFILE     a table is full (max_files, max_threads, max_allocs)
 *             -ETIMEDOUT  odm_io's timeout passed before its wait was satisfied
 * Threads.  Every function may be called from any thread. One context is shared by all
 *           threads of a process: its files, and for the DAFS backend one DAFS client
 *           (one session) used under a mutex, so a file created (not yet committed) or
 *           identified by one thread is usable by all. Each thread gets its own
 *           completion group and completion list the first time it calls odm_io. A
 *           thread should reap its I/O before it exits; what it leaves in flight is
 *           finished (and discarded) by odm_fini.
 * Files.    Paths are relative to the backend's root (the DAFS export, or the local
 *           directory). An ODM file starts with a header of ODM_HEADER_BYTES holding its
 *           type and key; ODM offsets and sizes count from the end of the header (ODM
 *           offset 0 is byte ODM_HEADER_BYTES of the file as the file system stores it).
 */
#ifndef DAFS_ODM_H
#define DAFS_ODM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ODM_API_VERSION 1

#if defined(__GNUC__) || defined(__clang__)
#define ODM_API __attribute__((visibility("default")))
#else
#define ODM_API
#endif

/* Bytes of the header in front of an ODM file's data (a page: keeps data aligned for
 * unbuffered I/O). */
#define ODM_HEADER_BYTES 4096
/* Longest key (bytes): DAFS's open-key limit. */
#define ODM_KEY_BYTES_MAX 64

/* A context (opaque): one per process (or per server). */
typedef struct odm_ctx odm_ctx_t;

/* A file identifier; never 0. Valid in its context until odm_unidentify/odm_abort. */
typedef uint64_t odm_fid_t;

/* odm_config_t.backend */
#define ODM_BACKEND_DAFS  0
#define ODM_BACKEND_LOCAL 1

/* odm_config_t.provider (DAFS backend): the values of dafs.h's DAFS_PROVIDER_* */
#define ODM_PROVIDER_AUTO 0 /* shared memory when the server is on this host */
#define ODM_PROVIDER_TCP  1

/* Context options. Zero (or NULL) fields mean the defaults given. */
typedef struct odm_config_t {
    uint32_t backend;          /* ODM_BACKEND_* */
    uint32_t provider;         /* ODM_PROVIDER_* (DAFS backend only) */
    const char *target;        /* DAFS: "host:port" or "dafs+shm:///path.sock" (required);
                                  LOCAL: the root directory (required) */
    uint32_t max_outstanding;  /* I/Os in flight at once, all threads together: DAFS
                                  request slots asked of the server, LOCAL worker
                                  threads (1: no worker, the I/O runs inside odm_io
                                  and completes there). 0 = 32. A submit beyond it waits for one to
                                  finish (odm_io never fails for lack of slots). */
    uint32_t max_files;        /* identified/created files at once; 0 = 1024 */
    uint32_t max_threads;      /* threads that may call odm_io; 0 = 64 */
    uint32_t max_allocs;       /* odm_alloc buffers at once; 0 = 256 */
    uint64_t reserved[4];      /* must be zero */
} odm_config_t;

/* Create a context. Stores it in *out. 0 or -errno (-EINVAL bad config; DAFS: the
 * errors of dafs_connect, e.g. -ECONNREFUSED; LOCAL: -ENOENT/-ENOTDIR for the root). */
ODM_API int odm_init(const odm_config_t *cfg, odm_ctx_t **out);

/* Close every file (uncommitted files are discarded), wait for I/O in flight, free the
 * context. Call it after the other threads have stopped using the context. NULL: no-op. */
ODM_API int odm_fini(odm_ctx_t *ctx);

/* Message for an error code, either sign (a static string). */
ODM_API const char *odm_strerror(int err);

/* ---------------------------------------------------------------------------------- */
/* Files                                                                              */
/* ---------------------------------------------------------------------------------- */

/* Create `path` with `size_bytes` of zeros, file type `ftype` (the caller's own
 * numbering: data, log, control...) and key `key` (key_len 0..ODM_KEY_BYTES_MAX bytes).
 * The file is invisible (to this and every other client, and in directory listings)
 * until odm_commit; odm_abort, odm_fini, or the process or its session ending first
 * discards it. Until then it is usable through the returned *out like any identified
 * file. -EEXIST if `path` exists already, -ENOENT if its directory does not. */
ODM_API int odm_create(odm_ctx_t *ctx, const char *path, uint64_t size_bytes, uint32_t ftype,
                       const void *key, uint32_t key_len, odm_fid_t *out);

/* Make a created file durable (fsync) and visible under its path, atomically: other
 * clients see either nothing or the whole file as written so far. The fid stays valid.
 * -EEXIST if the name was taken meanwhile (the file stays uncommitted); -EINVAL if the
 * file is committed already (or was identified). */
ODM_API int odm_commit(odm_ctx_t *ctx, odm_fid_t fid);

/* Discard a created, uncommitted file with everything written to it, and free the
 * fid. -EINVAL for a committed or identified file (use odm_unidentify); -EBUSY while
 * it has I/O in flight. */
ODM_API int odm_abort(odm_ctx_t *ctx, odm_fid_t fid);

/* Open the committed ODM file `path` for reading and writing. `key`/`key_len` must be
 * the file's key (-EACCES otherwise, and nothing is opened); `ftype` must be its type
 * (-EMEDIUMTYPE otherwise) unless 0 (any type). -ENOTSUP: not an ODM file. The DAFS
 * backend also opens the file with the key as its DAFS open key, so the server refuses
 * opens with another key while this one lasts. */
ODM_API int odm_identify(odm_ctx_t *ctx, const char *path, uint32_t ftype, const void *key,
                         uint32_t key_len, odm_fid_t *out);

/* Close an identified (or committed) file and free the fid. -EBUSY while it has I/O in
 * flight. An uncommitted file is discarded, as by odm_abort. */
ODM_API int odm_unidentify(odm_ctx_t *ctx, odm_fid_t fid);

/* Set the file's size (ODM bytes, without the header): extends with zeros or cuts.
 * Before odm_commit a file can only grow (-EINVAL below its created size or the end of
 * its data): over DAFS an uncommitted, create-unlinked file has no handle to truncate
 * by yet; the local backend keeps the same rule so both behave alike. */
ODM_API int odm_resize(odm_ctx_t *ctx, odm_fid_t fid, uint64_t size_bytes);

/* The file's size (ODM bytes, without the header) into *out. */
ODM_API int odm_size(odm_ctx_t *ctx, odm_fid_t fid, uint64_t *out);

/* ---------------------------------------------------------------------------------- */
/* Memory                                                                             */
/* ---------------------------------------------------------------------------------- */

/* `len` bytes of zeroed, page-aligned memory for I/O buffers. DAFS backend: registered
 * (the server moves data straight into and out of it: no staging copy); I/O on any
 * other memory works but is staged through a copy (odm_info_t.staged_ios). NULL when
 * max_allocs buffers exist or memory is short. Free with odm_free. */
ODM_API void *odm_alloc(odm_ctx_t *ctx, size_t len);

/* Free a buffer of odm_alloc. -EBUSY while I/O on it is in flight; -EINVAL if `p` is not
 * such a buffer. */
ODM_API int odm_free(odm_ctx_t *ctx, void *p);

/* ---------------------------------------------------------------------------------- */
/* I/O                                                                                */
/* ---------------------------------------------------------------------------------- */

/* odm_ioreq_t.op */
#define ODM_READ  1
#define ODM_WRITE 2

/* odm_ioreq_t.state (set by the library) */
#define ODM_REQ_IDLE    0 /* never submitted (zero-initialise new requests) */
#define ODM_REQ_PENDING 1 /* submitted, not complete */
#define ODM_REQ_DONE    2 /* complete: `result` is valid */

/* One I/O. The caller owns the memory and must keep it (and `buf`) valid and untouched
 * from submission until the request has been reported (through wait[] or completions[]
 * of odm_io). */
typedef struct odm_ioreq_t {
    uint32_t op;          /* ODM_READ or ODM_WRITE */
    uint32_t reserved0;   /* must be zero */
    odm_fid_t fid;
    uint64_t offset;      /* ODM offset (from the end of the header) */
    void *buf;
    size_t len;           /* > 0; any size (large I/Os are split internally) */
    void *user;           /* the caller's, never touched */
    /* Set by the library: */
    volatile int32_t state; /* ODM_REQ_* */
    int32_t reserved1;
    int64_t result;       /* bytes transferred (short only for a read at end of file),
                             or -errno */
    uint64_t priv[8];     /* the library's */
} odm_ioreq_t;

/* Submit and wait in one call (each part optional: NULL arrays with count 0).
 *
 * 1. Every submit[i] is started (asynchronously). Requests in submit[] must be
 *    ODM_REQ_IDLE or reported DONE ones; the whole call is refused with nothing
 *    submitted (-EINVAL bad op/fid/buf/len/reserved field, -EBUSY a request still
 *    pending or not yet reported, -EBADF unknown fid) if any is not valid. An I/O that
 *    fails later completes with result -errno like any other completion.
 * 2. Then the call waits until every wait[i] is DONE, and until at least min_complete
 *    other completed requests of THIS thread have been stored into completions[0..),
 *    (at most max_complete; the count goes to *ncomplete_out, which may be NULL when
 *    max_complete is 0). Requests in wait[] must have been submitted by this thread
 *    (-EPERM otherwise, before anything is submitted).
 * Every completed request is reported exactly once: through wait[] if it is named there,
 * otherwise in completions[] of a later odm_io call of the thread that submitted it —
 * never in another thread's call. The wait ends early (returning 0 with fewer than
 * min_complete) when this thread has no I/O left in flight.
 * timeout_ms: < 0 no limit, 0 just poll. Returns 0, or -ETIMEDOUT when it passed first
 * (completions stored so far are still counted in *ncomplete_out; unfinished requests
 * of wait[] are reported later), or -errno. */
ODM_API int odm_io(odm_ctx_t *ctx, odm_ioreq_t *const submit[], unsigned nsubmit,
                   odm_ioreq_t *const wait[], unsigned nwait, odm_ioreq_t *completions[],
                   unsigned max_complete, unsigned min_complete, unsigned *ncomplete_out,
                   int timeout_ms);

/* ---------------------------------------------------------------------------------- */
/* Information                                                                        */
/* ---------------------------------------------------------------------------------- */

typedef struct odm_info_t {
    char backend[8];              /* "dafs" or "local" */
    char provider[8];             /* "tcp", "shm" (DAFS) or "local" */
    uint64_t inline_threshold_bytes; /* DAFS: I/Os up to this size travel inline in
                                        messages, larger ones directly; LOCAL: 0 */
    uint64_t max_io_bytes;        /* largest single backend I/O (larger ones are split);
                                     0: no limit (LOCAL) */
    uint64_t ios;                 /* requests completed */
    uint64_t bytes;               /* bytes they transferred */
    uint64_t staged_ios;          /* DAFS: I/Os on memory not from odm_alloc (copied) */
    uint64_t inline_ios;          /* DAFS: backend I/Os sent inline (dafs_stats) */
    uint64_t direct_ios;          /* DAFS: backend I/Os placed directly (dafs_stats) */
    uint64_t reserved[8];
} odm_info_t;

/* Fill *out. 0 or -errno. */
ODM_API int odm_info(odm_ctx_t *ctx, odm_info_t *out);

/* One zero-byte request/response with the server (DAFS: dafs_null; LOCAL: nothing):
 * the fixed cost Treq of every request, for odmlat. 0 or -errno. */
ODM_API int odm_null(odm_ctx_t *ctx);

#ifdef __cplusplus
}
#endif

#endif /* DAFS_ODM_H */
