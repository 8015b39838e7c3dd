/*
 * dafs.h — C API of the DAFS (Direct Access File System) client library.
 *
 * Link with -ldafs (libdafs.so or libdafs.a; `pkg-config --cflags --libs dafs`).
 *
 * The library is a user-level client: it starts no threads. Requests are sent without
 * blocking, and completions advance only while the application is inside a dafs_* call
 * (a blocking call, dafs_cg_poll or dafs_cg_wait). Small reads and writes travel inline
 * in messages; larger ones ("direct", above dafs_inline_threshold()) are moved by the
 * server straight into or out of registered memory.
 *
 * ------------------------------------------------------------------------------------
 * CONVENTIONS (apply to every function below unless its comment says otherwise)
 *
 * Errors.    Functions returning int or ssize_t return >= 0 on success and a NEGATIVE
 *            errno value on failure (e.g. -ENOENT), like liburing. errno is NOT set.
 *            dafs_strerror() turns either sign into a message. Codes in common use:
 *              -EINVAL          bad argument (NULL pointer, unknown flag, range outside
 *                               a region, I/O larger than dafs_max_io_size(), cg 0,
 *                               non-UTF-8 path)
 *              -EBADF           the dafs_file_t is not an open file of this client
 *                               (closed already, or opened by another client)
 *              -EAGAIN          every request slot is in use, or the completion
 *                               group's queue is full: reap completions, retry
 *              -EMFILE          dafs_cg_create: 1024 completion groups exist already
 *              -EBUSY           region still has I/O in flight; completion group not
 *                               empty; or the client is being used by another thread
 *                               at this very moment (a caller bug, refused safely)
 *              -ENOTCONN        the connection was lost; the client is unusable, call
 *                               dafs_disconnect and connect again (the call that saw
 *                               the loss may return the OS's code instead: -ECONNRESET,
 *                               -EPIPE; dafs_connect: -ECONNREFUSED, ...)
 *              -EPROTO          the server violated the protocol (client disconnected)
 *              -EACCES          authentication failed
 *              -ETIMEDOUT       connect timed out
 *              -ENOTRECOVERABLE internal error in the library (a bug); the client is
 *                               poisoned and only dafs_disconnect still works on it
 *            Server-side failures map to the usual errno values (-ENOENT, -EEXIST,
 *            -ENOTDIR, -EISDIR, -ENOTEMPTY, -EACCES, -EROFS, -ENOSPC, ...).
 *
 * Pointers.  NULL where a pointer is required gives -EINVAL (-EBADF for a file).
 *            Paths and strings are NUL-terminated UTF-8; paths are relative to the
 *            export's root ("/a/b" and "a/b" are the same file). The library never
 *            keeps a string pointer after a call returns.
 *
 * Threads.   A dafs_client_t (and everything opened through it: files, regions,
 *            completion groups) may be used by ONE thread at a time. It may move between
 *            threads between calls. Use one client per thread for parallelism. Two
 *            threads calling into the same client at once is a caller bug; the library
 *            detects it and returns -EBUSY to the second caller instead of corrupting
 *            state (dafs_disconnect cannot be protected that way). Functions that take
 *            no client (dafs_version, dafs_strerror) are thread-safe.
 *
 * Panics.    No Rust panic ever unwinds into C; see -ENOTRECOVERABLE above.
 *
 * Signals.   The library installs no signal handlers. Writing to a TCP connection the
 *            server has closed can raise SIGPIPE; programs that must survive a server
 *            crash should ignore SIGPIPE (signal(SIGPIPE, SIG_IGN)), and then get
 *            -ENOTCONN.
 *
 * Memory.    Registered regions (dafs_register, dafs_alloc_registered) are the direct
 *            path: the server places read data into them and pulls write data out of
 *            them. While a non-blocking I/O naming a region is in flight (from
 *            dafs_pread_nb/dafs_pwrite_nb until its completion has been reaped by
 *            dafs_cg_poll/dafs_cg_wait) the application must neither read nor write the
 *            bytes of that I/O, and dafs_unregister of the region returns -EBUSY.
 *            (The Rust library enforces this with a per-region pin; C cannot be stopped
 *            from touching the memory, so it is the caller's contract.)
 * ------------------------------------------------------------------------------------
 */
#ifndef DAFS_H
#define DAFS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h> /* ssize_t */

#ifdef __cplusplus
extern "C" {
#endif

/* Version of this header; dafs_version() gives the library's. */
#define DAFS_VERSION_MAJOR 0
#define DAFS_VERSION_MINOR 1
#define DAFS_VERSION_PATCH 0
#define DAFS_VERSION "0.1.0"
/* Bumped on any incompatible change of this API or ABI. */
#define DAFS_API_VERSION 1

#if defined(__GNUC__) || defined(__clang__)
#define DAFS_API __attribute__((visibility("default")))
#else
#define DAFS_API
#endif

/* ---------------------------------------------------------------------------------- */
/* Types                                                                              */
/* ---------------------------------------------------------------------------------- */

/* A connected client with one session (opaque). Created by dafs_connect, freed by
 * dafs_disconnect. */
typedef struct dafs_client_t dafs_client_t;

/* An open file (opaque). Created by dafs_open, freed by dafs_close (or, if still open,
 * by dafs_disconnect of its client). Belongs to the client that opened it. */
typedef struct dafs_file_t dafs_file_t;

/* A registered memory region: an id, valid only with the client that registered it,
 * until dafs_unregister or dafs_disconnect. */
typedef uint64_t dafs_region_t;

/* A completion group: an id, valid only with the client that created it. Never 0
 * (0 is the library's internal group and is refused with -EINVAL). */
typedef uint32_t dafs_cg_t;

/* dafs_options_t.provider */
#define DAFS_PROVIDER_AUTO 0 /* host:port targets switch to shared memory on the same host */
#define DAFS_PROVIDER_TCP  1 /* always TCP */

/* Connection options. A zero-initialised struct (or a NULL pointer) means defaults
 * for every field: `dafs_options_t o = {0};`. */
typedef struct dafs_options_t {
    const char *client_id;     /* identity shown to the server; NULL = "hostname:pid" */
    const char *secret_file;   /* file with the shared secret for HMAC authentication
                                  (one trailing newline ignored, >= 8 bytes); NULL = none.
                                  With a secret, servers that cannot prove they hold it
                                  are refused (-EACCES). */
    const char *export_name;   /* NULL or "" = the server's default export */
    uint32_t slots;            /* requests in flight to ask for; 0 = 32. The server may
                                  grant fewer: see dafs_slots() */
    uint32_t provider;         /* DAFS_PROVIDER_AUTO (0) or DAFS_PROVIDER_TCP */
    uint32_t connect_timeout_ms; /* 0 = 5000 */
    uint32_t max_msg_size;     /* message size to ask for; 0 = 256 KiB */
    uint64_t reserved[4];      /* must be zero */
} dafs_options_t;

/* dafs_open flags: the same values as Linux's O_* (so O_RDWR|O_CREAT work too). Any
 * other bit gives -EINVAL. DAFS_O_EXCL implies DAFS_O_CREAT. DAFS_O_APPEND: every
 * write appends atomically at the end of file (the server picks the offset); write
 * with dafs_append, which only such files accept. */
#define DAFS_O_RDONLY  00
#define DAFS_O_WRONLY  01
#define DAFS_O_RDWR    02
#define DAFS_O_ACCMODE 03
#define DAFS_O_CREAT   0100
#define DAFS_O_EXCL    0200
#define DAFS_O_TRUNC   01000
#define DAFS_O_APPEND  02000

/* dafs_attr_t.type */
#define DAFS_TYPE_REG  1
#define DAFS_TYPE_DIR  2
#define DAFS_TYPE_LNK  3
#define DAFS_TYPE_CHR  4
#define DAFS_TYPE_BLK  5
#define DAFS_TYPE_FIFO 6
#define DAFS_TYPE_SOCK 7

/* File attributes (like struct stat). */
typedef struct dafs_attr_t {
    uint32_t type;       /* DAFS_TYPE_* */
    uint32_t mode;       /* permission bits (07777), without the type bits */
    uint32_t nlink;
    uint32_t uid;
    uint32_t gid;
    uint32_t reserved0;
    uint64_t size;       /* bytes */
    uint64_t used;       /* bytes allocated on the server's storage */
    uint64_t fileid;     /* inode number */
    uint64_t fsid;
    uint64_t rdev;
    int64_t atime_ns;    /* nanoseconds since the Unix epoch */
    int64_t mtime_ns;
    int64_t ctime_ns;
} dafs_attr_t;

/* dafs_completion_t.flags */
#define DAFS_CQE_EOF 1u /* a read reached end of file */

/* One finished non-blocking I/O. */
typedef struct dafs_completion_t {
    uint64_t user_data;  /* as given at submit */
    int64_t result;      /* bytes transferred (short only at EOF), or -errno */
    uint32_t flags;      /* DAFS_CQE_* */
    uint32_t reserved;
} dafs_completion_t;

/* Counters of one client (dafs_stats): which path the I/O took. Fields are only ever
 * appended (into reserved) in later versions. */
typedef struct dafs_stats_t {
    uint64_t requests;          /* requests sent */
    uint64_t inline_reads;
    uint64_t inline_writes;
    uint64_t direct_reads;
    uint64_t direct_writes;
    uint64_t inline_bytes;
    uint64_t direct_bytes;
    uint64_t off_direct_path;   /* I/Os above the inline threshold whose memory was not
                                   registered: the library registered (or staged) it
                                   for that one request. Pre-register to avoid this. */
    uint64_t slot_waits;        /* submits that found every slot busy */
    uint64_t errors;            /* non-blocking I/Os that completed with an error */
    uint64_t msgs_sent;         /* transport counters: */
    uint64_t msgs_received;
    uint64_t placed_bytes;      /* bytes the server placed into client memory */
    uint64_t pulled_bytes;      /* bytes the server pulled out of client memory */
    uint64_t placements_refused;
    uint64_t waits_spun;        /* waits that ended while spinning */
    uint64_t waits_slept;       /* waits that slept in the kernel */
    uint64_t vm_registrations;  /* shm: registrations of application memory reached
                                   with process_vm_readv/writev (one extra copy) */
    uint64_t reconnects;        /* broken connections recovered (session re-bound) */
    uint64_t retransmits;       /* requests resent after a reconnect */
    uint64_t stale_replies;     /* answers to duplicates, dropped */
    uint64_t reserved[5];
} dafs_stats_t;

/* dafs_batch_submit modes: how a batch reports completion. */
#define DAFS_BATCH_PER_IO      0 /* one completion per I/O, with that I/O's user_data and
                                    result (bytes, or -errno for that I/O alone) */
#define DAFS_BATCH_PER_BATCH   1 /* one completion for the whole batch, with the batch's
                                    user_data: total bytes, or the first I/O's -errno */
#define DAFS_BATCH_ERRORS_ONLY 2 /* one completion per FAILED I/O (its user_data and
                                    -errno), then one for the batch: the first -errno,
                                    or >= 0 if all succeeded (the server reports only
                                    failures, so no byte count: currently 0) */

/* A file segment of a batched I/O: `len` bytes at file offset `offset`. */
typedef struct dafs_file_seg_t {
    uint64_t offset;
    uint64_t len;
} dafs_file_seg_t;

/* A memory segment of a batched I/O: bytes [offset, offset + len) of a registered
 * region of the submitting client. */
typedef struct dafs_mem_seg_t {
    dafs_region_t region;
    size_t offset;
    size_t len;
} dafs_mem_seg_t;

/* One I/O of a batch. The file segments and the memory segments are scattered
 * independently (a gather of several file ranges into one buffer, a scatter of one
 * file range into several buffer pieces, or both); both lists must be non-empty and
 * their total lengths equal, at most dafs_max_io_size(). */
typedef struct dafs_batch_io_t {
    int write;                        /* 0 = read (file -> memory), non-zero = write */
    const dafs_file_seg_t *file_segs; /* n_file_segs entries (caller-owned, copied) */
    size_t n_file_segs;
    const dafs_mem_seg_t *mem_segs;   /* n_mem_segs entries (caller-owned, copied) */
    size_t n_mem_segs;
    uint64_t user_data;               /* this I/O's completion (PER_IO, ERRORS_ONLY) */
} dafs_batch_io_t;

/* dafs_readdir callback: called once per entry (not "." or ".."). `name` is valid only
 * during the call. Return 0 to continue, non-zero to stop (dafs_readdir then returns
 * that value). */
typedef int (*dafs_readdir_fn)(void *arg, const char *name, uint64_t fileid, uint32_t type);

/* ---------------------------------------------------------------------------------- */
/* Library                                                                            */
/* ---------------------------------------------------------------------------------- */

/* The library's version, "MAJOR.MINOR.PATCH" (a static string; thread-safe). */
DAFS_API const char *dafs_version(void);

/* Message for an error code, either sign (-ENOENT or ENOENT). Returns a static string,
 * never NULL; "unknown error" for codes it does not know. Thread-safe. */
DAFS_API const char *dafs_strerror(int err);

/* ---------------------------------------------------------------------------------- */
/* Sessions                                                                           */
/* ---------------------------------------------------------------------------------- */

/* Connect and establish a session. `target` is "host:port" (TCP; on the server's own
 * host the library switches to the shared-memory provider by itself unless
 * opts->provider is DAFS_PROVIDER_TCP) or "dafs+shm:///path/to/dafsd.sock". `opts` may
 * be NULL (defaults). On success stores a new client in *out and returns 0; on failure
 * stores NULL and returns -errno (-ECONNREFUSED, -ENOTCONN, -ETIMEDOUT, -EACCES, ...).
 * Blocks for at most the connect timeout per connection attempt. */
DAFS_API int dafs_connect(const char *target, const dafs_options_t *opts, dafs_client_t **out);

/* End the session and free the client. I/O still in flight is waited for first (at
 * most 10 s), so the server never writes into application memory after this returns;
 * its completions, and any not yet reaped, are discarded. Files still open are freed
 * with it (the server closes them); every region is released (memory from
 * dafs_alloc_registered is unmapped: pointers into it dangle afterwards; memory given
 * to dafs_register is the caller's again). The session has ended when this returns (the
 * server answers SESSION_DESTROY after releasing it; at most 2 s are spent waiting for
 * that answer): its byte-range locks are free for other clients at once. NULL is a
 * no-op. Returns 0, or -EBUSY if another thread is inside a call on this client. */
DAFS_API int dafs_disconnect(dafs_client_t *client);

/* The four queries below return "" or 0 for NULL, and also when called while another
 * thread is inside a call on the same client (see Threads). */

/* The provider in use: "tcp" or "shm" (a static string). */
DAFS_API const char *dafs_provider(const dafs_client_t *client);

/* Reads and writes of registered memory of up to this many bytes travel inline in
 * messages; larger ones are placed directly by the server (the server's per-provider
 * threshold: over shared memory small, direct placement is cheaper there). */
DAFS_API size_t dafs_inline_threshold(const dafs_client_t *client);

/* The same for memory the application did not register (dafs_pread/dafs_pwrite,
 * dafs_pread_nb_buf...): at least 16 KiB, since a direct transfer of such memory
 * registers it first. */
DAFS_API size_t dafs_inline_threshold_unregistered(const dafs_client_t *client);

/* Largest single non-blocking I/O (blocking calls split larger ones). */
DAFS_API size_t dafs_max_io_size(const dafs_client_t *client);

/* Request slots granted by the server: the most requests in flight at once. */
DAFS_API uint32_t dafs_slots(const dafs_client_t *client);

/* Most I/Os one dafs_batch_submit may carry (granted by the server; 0 for NULL). */
DAFS_API uint32_t dafs_batch_max(const dafs_client_t *client);

/* Copy the client's counters into *out. Returns 0 or -errno. */
DAFS_API int dafs_stats(const dafs_client_t *client, dafs_stats_t *out);

/* One NULL round trip to the server (latency probe, liveness check). 0 or -errno. */
DAFS_API int dafs_null(dafs_client_t *client);

/* Sessions survive broken connections: the library reconnects by itself within the
 * server's lease (90 s by default), re-binds the session and resends what was in
 * flight; each request takes effect exactly once. When the session itself is gone
 * (lease expired, server restarted, ended or fenced by an administrator) every call
 * fails with the same error until dafs_reestablish.
 *
 * 0 while the session is usable; -ENOTCONN when the server no longer knows it; -EPERM
 * when this client is fenced. */
DAFS_API int dafs_session_lost(const dafs_client_t *client);

/* Start a new session with the same server and configuration and re-open every open
 * dafs_file_t by the path and flags it was opened with (the handles stay valid;
 * creation and truncation are not repeated). Registered memory stays registered; locks
 * of the old session are gone. 0 or -errno. */
DAFS_API int dafs_reestablish(dafs_client_t *client);

/* ---------------------------------------------------------------------------------- */
/* Files and blocking I/O                                                             */
/* ---------------------------------------------------------------------------------- */

/* Open (and with DAFS_O_CREAT create, with permission bits `mode`) the file at `path`.
 * Stores a new file handle in *out (NULL on failure). Returns 0 or -errno. */
DAFS_API int dafs_open(dafs_client_t *client, const char *path, int flags, uint32_t mode, dafs_file_t **out);

/* Close the file and free the handle. The handle is freed even when the server reports
 * an error (the error is still returned). Non-blocking I/O of this file still in flight
 * completes normally or with an error. -EBADF if not an open file of this client.
 * Handles are checked against the client's open files before use, so a closed handle
 * gives -EBADF rather than a crash; but, like a file descriptor number, its address may
 * be reused by a later dafs_open, so do not use a handle after closing it. */
DAFS_API int dafs_close(dafs_client_t *client, dafs_file_t *file);

/* Blocking read of up to `len` bytes at `offset` into `buf` (caller-owned, any memory,
 * only used during the call). Returns bytes read (short only at end of file, 0 at or
 * past it) or -errno. Large reads are split and pipelined over all slots; memory that
 * is not registered is registered for the duration of the call (counted in
 * dafs_stats_t.off_direct_path). */
DAFS_API ssize_t dafs_pread(dafs_client_t *client, dafs_file_t *file, void *buf, size_t len, uint64_t offset);

/* Blocking write of all `len` bytes of `buf` at `offset`. Returns `len` or -errno.
 * `buf` is only used during the call. Not durable until dafs_fsync. */
DAFS_API ssize_t dafs_pwrite(dafs_client_t *client, dafs_file_t *file, const void *buf, size_t len, uint64_t offset);

/* Make the file's data durable on the server (COMMIT). Returns 0 or -errno. */
DAFS_API int dafs_fsync(dafs_client_t *client, dafs_file_t *file);

/* Fresh attributes of an open file into *out. Returns 0 or -errno. */
DAFS_API int dafs_fstat(dafs_client_t *client, dafs_file_t *file, dafs_attr_t *out);

/* Set the size of an open file (extends with zeros or cuts), also when it has been renamed
 * since it was opened. Returns 0 or -errno (-EINVAL for size > INT64_MAX; -ESTALE once the
 * file has no name left: unlinked, or created unlinked and not yet published — reads and
 * writes through the open file still work then, attribute changes do not). */
DAFS_API int dafs_ftruncate(dafs_client_t *client, dafs_file_t *file, uint64_t size);

/* Append all `len` bytes of `buf` atomically to a file opened with DAFS_O_APPEND: the
 * server writes them at the end of file as of that moment, across all clients, so
 * records appended concurrently never overlap or interleave. Stores the offset the
 * server chose in *offset_out (may be NULL if not wanted). `buf` is only used during
 * the call. Returns `len` or -errno: -EINVAL if the file was not opened with
 * DAFS_O_APPEND or len > dafs_max_io_size() (a larger append would not be atomic).
 * len 0 returns 0 and leaves *offset_out untouched. Not durable until dafs_fsync. */
DAFS_API ssize_t dafs_append(dafs_client_t *client, dafs_file_t *file, const void *buf, size_t len, uint64_t *offset_out);

/* ---------------------------------------------------------------------------------- */
/* Memory registration                                                                */
/* ---------------------------------------------------------------------------------- */

/* Register `len` bytes of caller-owned memory at `buf` for direct placement; stores the
 * region id in *out. The memory stays the caller's: it must remain valid (not freed,
 * not unmapped) until dafs_unregister or dafs_disconnect, and must not be touched while
 * I/O naming it is in flight (see "Memory" above). Over shared memory, such memory is
 * reached with process_vm_readv/writev (one copy on the server side); memory from
 * dafs_alloc_registered avoids that. Returns 0 or -errno. */
DAFS_API int dafs_register(dafs_client_t *client, void *buf, size_t len, dafs_region_t *out);

/* Allocate `len` bytes of zeroed, page-aligned memory registered for direct placement
 * (over shared memory: in a segment the server maps, so placement is a single copy).
 * Stores its address in *ptr_out and its id in *out. The memory belongs to the library:
 * it is freed by dafs_unregister (or dafs_disconnect), after which *ptr_out dangles.
 * The same in-flight rule applies. Returns 0 or -errno. */
DAFS_API int dafs_alloc_registered(dafs_client_t *client, size_t len, void **ptr_out, dafs_region_t *out);

/* Release a region. -EBUSY while I/O naming it is in flight (reap its completions
 * first); -EINVAL for an unknown id. Returns 0 or -errno. */
DAFS_API int dafs_unregister(dafs_client_t *client, dafs_region_t region);

/* ---------------------------------------------------------------------------------- */
/* Completion groups and non-blocking I/O                                             */
/* ---------------------------------------------------------------------------------- */

/* Create a completion group; stores its id (never 0) in *out. Returns 0 or -errno:
 * -EMFILE when 1024 groups exist already (destroy one first). */
DAFS_API int dafs_cg_create(dafs_client_t *client, dafs_cg_t *out);

/* Destroy an empty completion group. -EBUSY while it has I/O in flight or completions
 * not yet reaped; -EINVAL if unknown. Returns 0 or -errno. */
DAFS_API int dafs_cg_destroy(dafs_client_t *client, dafs_cg_t cg);

/* Number of I/Os submitted on `cg` that have not completed yet (completed but unreaped
 * ones are not counted), or -errno. */
DAFS_API int dafs_cg_outstanding(dafs_client_t *client, dafs_cg_t cg);

/* Make progress without blocking and store up to `max` completions of `cg` into
 * out[0..max) (caller-owned array). Returns how many were stored (0 if none), or
 * -errno. After the connection is lost, I/Os that were in flight are returned here
 * with result -ENOTCONN. */
DAFS_API int dafs_cg_poll(dafs_client_t *client, dafs_cg_t cg, dafs_completion_t *out, unsigned max);

/* Wait until at least `min` completions of `cg` are available, then store up to `max`
 * of them into out[0..max). Returns early (with fewer than `min`, possibly 0) when
 * `timeout_ms` passes (negative = no timeout, 0 = just poll) or when `cg` has nothing
 * left in flight (so it never waits for I/O that was not submitted). Returns the number
 * stored or -errno; -EINVAL if min > max. */
DAFS_API int dafs_cg_wait(dafs_client_t *client, dafs_cg_t cg, unsigned min, unsigned max, int timeout_ms, dafs_completion_t *out);

/* Submit a read of `len` bytes at `file_offset` into region bytes
 * [region_offset, region_offset + len), completing on `cg` with `user_data`. Returns 0
 * once submitted (the data is there when the completion is reaped), or -errno:
 * -EAGAIN every slot is busy or cg's completion queue is full (reap and retry), -EINVAL
 * range outside the region or len > dafs_max_io_size() or unknown region/cg, -EBADF bad
 * file, -ENOTCONN. Above the inline threshold the server places the data directly into
 * the region. */
DAFS_API int dafs_pread_nb(dafs_client_t *client, dafs_file_t *file, dafs_cg_t cg, dafs_region_t region, size_t region_offset, size_t len, uint64_t file_offset, uint64_t user_data);

/* Submit a write of region bytes [region_offset, region_offset + len) at `file_offset`.
 * Same rules and errors as dafs_pread_nb; do not modify those bytes until the
 * completion has been reaped. */
DAFS_API int dafs_pwrite_nb(dafs_client_t *client, dafs_file_t *file, dafs_cg_t cg, dafs_region_t region, size_t region_offset, size_t len, uint64_t file_offset, uint64_t user_data);

/* Non-blocking read into plain (unregistered) memory. The request reads into a staging
 * buffer owned by the library; the bytes are copied into `buf` when the completion is
 * reaped by dafs_cg_poll/dafs_cg_wait. So `buf` must stay valid and must not be
 * touched until then; if the client is disconnected first, `buf` is never written.
 * Costs one extra copy (and above the threshold a per-request registration, counted in
 * off_direct_path): use dafs_pread_nb with a registered region for speed. len must be
 * <= dafs_max_io_size(). Returns 0 or -errno like dafs_pread_nb. */
DAFS_API int dafs_pread_nb_buf(dafs_client_t *client, dafs_file_t *file, dafs_cg_t cg, void *buf, size_t len, uint64_t file_offset, uint64_t user_data);

/* Non-blocking write from plain memory. The bytes are copied before this returns, so
 * `buf` may be reused at once. Same costs and errors as dafs_pread_nb_buf. */
DAFS_API int dafs_pwrite_nb_buf(dafs_client_t *client, dafs_file_t *file, dafs_cg_t cg, const void *buf, size_t len, uint64_t file_offset, uint64_t user_data);

/* Submit `n_ios` I/Os (ios[0..n_ios)) on one file as ONE request, completing on `cg`
 * as `mode` (DAFS_BATCH_*) says; `user_data` is the batch's own (PER_BATCH,
 * ERRORS_ONLY). Memory is registered regions only; the in-flight rule of "Memory"
 * applies to every memory segment until the batch's last completion is reaped (the
 * regions stay -EBUSY until then). The descriptor and segment arrays are copied: they
 * may be reused as soon as this returns. A batch takes one request slot. Returns 0
 * once submitted, or -errno: -E2BIG n_ios > dafs_batch_max(); -EINVAL n_ios 0, unknown
 * mode, NULL arrays, an I/O with no file or memory segment or with unequal totals, a
 * segment outside its region, unknown region/cg, or an I/O larger than
 * dafs_max_io_size(); -EAGAIN, -EBADF, -ENOTCONN as for dafs_pread_nb. Failures of
 * single I/Os (e.g. -EBADF for a write on a file opened read-only) are reported in
 * their completions, not here. */
DAFS_API int dafs_batch_submit(dafs_client_t *client, dafs_file_t *file, dafs_cg_t cg, const dafs_batch_io_t *ios, size_t n_ios, int mode, uint64_t user_data);

/* ---------------------------------------------------------------------------------- */
/* Namespace                                                                          */
/* ---------------------------------------------------------------------------------- */

/* Attributes of `path`, following a final symlink (stat) or not (lstat), into *out.
 * Returns 0 or -errno. */
DAFS_API int dafs_stat(dafs_client_t *client, const char *path, dafs_attr_t *out);
DAFS_API int dafs_lstat(dafs_client_t *client, const char *path, dafs_attr_t *out);

/* Create a directory with permission bits `mode`. 0 or -errno (-EEXIST, -ENOENT...). */
DAFS_API int dafs_mkdir(dafs_client_t *client, const char *path, uint32_t mode);

/* Remove an empty directory. 0 or -errno (-ENOTEMPTY, -ENOTDIR, ...). */
DAFS_API int dafs_rmdir(dafs_client_t *client, const char *path);

/* Remove a file (not a directory). 0 or -errno. */
DAFS_API int dafs_unlink(dafs_client_t *client, const char *path);

/* Rename `from` to `to` (replacing `to` like rename(2)). 0 or -errno. */
DAFS_API int dafs_rename(dafs_client_t *client, const char *from, const char *to);

/* dafs_rename2 flags: those of Linux renameat2(2). At most one may be set. */
#define DAFS_RENAME_NOREPLACE 1u /* fail with -EEXIST if `to` exists */
#define DAFS_RENAME_EXCHANGE 2u  /* swap `from` and `to` atomically; both must exist */

/* Rename `from` to `to` as renameat2(2) does: `flags` 0 replaces `to` (dafs_rename),
 * DAFS_RENAME_NOREPLACE fails with -EEXIST if `to` exists, DAFS_RENAME_EXCHANGE swaps the
 * two names (they may be a file and a directory; -ENOENT if either is missing). Other
 * bits, or both flags: -EINVAL, nothing sent. -EINVAL also where the exported file
 * system does not support the flag. 0 or -errno. */
DAFS_API int dafs_rename2(dafs_client_t *client, const char *from, const char *to,
                          uint32_t flags);

/* Set the size of the file at `path` (shrink or extend with zeros). 0 or -errno. */
DAFS_API int dafs_truncate(dafs_client_t *client, const char *path, uint64_t size);

/* Call `fn(arg, name, fileid, type)` for every entry of directory `path` (in server
 * order, without "." and ".."). The whole listing is fetched first, so the callback
 * may call other dafs functions on the same client. Returns the number of entries
 * delivered, the callback's non-zero return value if it stopped early, or -errno
 * (-ENOTDIR, -ENOENT, ...) if the listing failed (then `fn` was not called). */
DAFS_API int dafs_readdir(dafs_client_t *client, const char *path, dafs_readdir_fn fn, void *arg);

/* ---------------------------------------------------------------------------------- */
/* Byte-range locks                                                                   */
/* ---------------------------------------------------------------------------------- */

/* Locks are advisory (I/O is never blocked by them) and belong to the client's SESSION,
 * with POSIX fcntl semantics between sessions: shared locks of different sessions
 * coexist, an exclusive one excludes every other session's lock on an overlapping
 * range. A session's own locks never conflict with each other: a new lock replaces the
 * overlapping parts of its existing ones (upgrade shared -> exclusive and downgrade in
 * place), and an unlock may cover any range, splitting locks it partly covers. All of
 * a session's locks are released when the session ends (dafs_disconnect, an
 * administrator's kill, or -- after a crash of the client -- when the server's lease
 * runs out: dafsd --lease-secs, 90 s by default). `len` 0 means "to the end of the
 * 64-bit range". The server holds at most 4096 locks per file (all sessions
 * together); beyond that a lock fails with -EMFILE. Regular files only (-EISDIR,
 * -EINVAL otherwise). */

/* A conflicting lock of another session (dafs_test_lock). */
typedef struct dafs_lock_info_t {
    uint64_t offset;
    uint64_t len;        /* 0 = to the end of the 64-bit range */
    uint64_t owner;      /* the owning session's id (as `dafs admin sessions` shows) */
    uint32_t exclusive;  /* 1 = exclusive, 0 = shared */
    uint32_t reserved;
} dafs_lock_info_t;

/* Take a shared (exclusive == 0) or exclusive lock on [offset, offset + len) without
 * waiting. Returns 0, or -EAGAIN if another session holds a conflicting lock (as
 * fcntl F_SETLK), or -errno. */
DAFS_API int dafs_lock(dafs_client_t *client, dafs_file_t *file, uint64_t offset, uint64_t len,
                       int exclusive);

/* Like dafs_lock, but while the range is held by another session retry with a backoff
 * from 100 us to 10 ms for up to `timeout_ms` (negative: up to a day). Returns 0, or
 * -ETIMEDOUT if the conflict outlasted the timeout, or -errno. The client is busy for
 * the whole wait (one thread at a time, see Threads). */
DAFS_API int dafs_lock_wait(dafs_client_t *client, dafs_file_t *file, uint64_t offset,
                            uint64_t len, int exclusive, int timeout_ms);

/* Would a shared (exclusive == 0) or exclusive lock on the range conflict with another
 * session's lock? Takes nothing. Returns 0 (no conflict), 1 (conflict; the first
 * conflicting lock is stored in *out unless out is NULL), or -errno. */
DAFS_API int dafs_test_lock(dafs_client_t *client, dafs_file_t *file, uint64_t offset,
                            uint64_t len, int exclusive, dafs_lock_info_t *out);

/* Release this session's locks over [offset, offset + len) (ranges it does not hold
 * are ignored). Returns 0 or -errno. */
DAFS_API int dafs_unlock(dafs_client_t *client, dafs_file_t *file, uint64_t offset, uint64_t len);

/* ---------------------------------------------------------------------------------- */
/* Open modes: create-unlinked, delete-on-close, open keys                            */
/* ---------------------------------------------------------------------------------- */

/* dafs_open_ex_t.flags */
#define DAFS_OX_UNLINKED        1u /* create-unlinked: the file is created without a name
                                      (invisible to every other open and to listings)
                                      and gets `path` only at dafs_publish; closing it
                                      (or the session ending) unpublished discards it
                                      and its data. Implies DAFS_O_CREAT and write
                                      access; not with DAFS_O_TRUNC or DAFS_O_APPEND. */
#define DAFS_OX_DELETE_ON_CLOSE 2u /* remove the name `path` when the last open of the
                                      file (by any client) closes. Not with
                                      DAFS_OX_UNLINKED. */

/* Extra options of dafs_open_ex. A zero-initialised struct (or NULL) means none. */
typedef struct dafs_open_ex_t {
    uint32_t flags;       /* DAFS_OX_* */
    uint32_t key_len;     /* 0..64 bytes of open key at `key`; 0 = no key */
    const void *key;      /* open key: the first open of a file sets it; while any open
                             of the file lasts, every other open must present the same
                             key or fails with -EACCES. Once the last open closes the
                             key is forgotten (it is not stored with the file). An open
                             with a key needs a writable export (-EROFS otherwise). */
    uint64_t reserved[4]; /* must be zero */
} dafs_open_ex_t;

/* dafs_open with the DAFS open modes of `ex` (NULL = none, same as dafs_open). `flags`
 * and `mode` as for dafs_open. Returns 0 or -errno: -EINVAL for unknown DAFS_OX_* bits,
 * non-zero reserved fields, key_len > 64 or a NULL key with key_len > 0, and the
 * combinations refused above (nothing is sent); -EACCES wrong key; -ENOENT the
 * directory of `path` does not exist. */
DAFS_API int dafs_open_ex(dafs_client_t *client, const char *path, int flags, uint32_t mode,
                          const dafs_open_ex_t *ex, dafs_file_t **out);

/* Give a file opened with DAFS_OX_UNLINKED its name (the `path` it was opened with),
 * atomically: other clients see either no file or the whole file as written so far.
 * Never replaces an entry: -EEXIST if the name exists by then (the file stays open and
 * unnamed: close it to discard it, or keep using it). -EINVAL if the file was not
 * opened with DAFS_OX_UNLINKED or is published already. The open continues as an
 * ordinary open of the named file. Returns 0 or -errno. */
DAFS_API int dafs_publish(dafs_client_t *client, dafs_file_t *file);

#ifdef __cplusplus
}
#endif

#endif /* DAFS_H */
