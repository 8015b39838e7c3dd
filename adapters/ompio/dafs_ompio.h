/*
 * dafs_ompio.h — state shared by the Open MPI OMPIO components fs_dafs and fbtl_dafs.
 *
 * Both components link against libdafs_ompio.so (this header's implementation), so a
 * process has exactly ONE copy of this state whichever component the MCA loads first:
 * one dafs_client_t per process, one mutex serializing every call into it (the C API
 * client refuses two threads at once; OMPIO may call from several threads under
 * MPI_THREAD_MULTIPLE and from opal_progress), one completion group for all
 * non-blocking I/O, one registration cache and one set of counters.
 *
 * Built against Debian's Open MPI 4.1 development headers (component ABI fs 2.0.0,
 * fbtl 2.0.0); see adapters/ompio/Makefile.
 */
#ifndef DAFS_OMPIO_H
#define DAFS_OMPIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dafs.h>

/* Memory modes of fbtl_dafs (MCA fbtl_dafs_mem), the three alternatives the seed
 * "MPI-IO on DAFS" compares. */
enum dafs_ompio_mem_mode {
    DAFS_OMPIO_MEM_PERCALL = 0, /* register the buffer before each I/O, release after */
    DAFS_OMPIO_MEM_LIBRARY = 1, /* hand plain memory to libdafs (its own per-call path) */
    DAFS_OMPIO_MEM_CACHE = 2,   /* LRU cache of registrations, invalidated on free/munmap */
};

/* Configuration, filled from MCA parameters by the components' register functions
 * (defaults here). Strings are owned by the MCA variable system. */
struct dafs_ompio_config {
    char *server;          /* fs_dafs_server: dafs_connect target; "" = $DAFS_TARGET or
                              127.0.0.1:7420 */
    char *prefix;          /* fs_dafs_prefix: file names claimed, default "dafs:" */
    char *provider;        /* fs_dafs_provider: "auto" or "tcp" */
    char *secret_file;     /* fs_dafs_secret_file: "" = $DAFS_SECRET_FILE or none */
    int request_deadline_ms; /* fs_dafs_request_deadline_ms: 0 = libdafs default */
    int connect_timeout_ms;  /* fs_dafs_connect_timeout_ms: 0 = libdafs default */
    char *mem;             /* fbtl_dafs_mem: "percall" | "library" | "cache" */
    int regcache_size;     /* fbtl_dafs_regcache_size: registrations kept, default 200 */
    int verbose_stats;     /* fbtl_dafs_verbose_stats: 1 = counters at MPI_Finalize */
};
extern struct dafs_ompio_config dafs_ompio_cfg;

/* Counters (fbtl_dafs_verbose_stats prints them as one line per process). */
struct dafs_ompio_stats {
    uint64_t reg_hits;       /* cache: I/O whose memory was already registered */
    uint64_t reg_misses;     /* cache: I/O that had to register its memory */
    uint64_t reg_evictions;  /* cache: LRU registrations released to make room */
    uint64_t reg_invalidations; /* cache: registrations dropped because the memory was
                                   freed/unmapped (Open MPI memory hooks) */
    uint64_t reg_uncached;   /* cache full of registrations in use: registered for one
                                I/O only */
    uint64_t registrations;  /* dafs_register calls made by the component */
    uint64_t inline_ops;     /* pieces at or below dafs_inline_threshold_unregistered(): no registration */
    uint64_t direct_ops;     /* pieces above it (direct placement) */
    uint64_t bytes_read;
    uint64_t bytes_written;
    uint64_t nb_requests;    /* non-blocking OMPIO requests (ipreadv/ipwritev) */
    uint64_t io_errors;      /* pieces that completed with an error */
};
extern struct dafs_ompio_stats dafs_ompio_st;

/* An open file (ompio_file_t.f_fs_ptr of files fs_dafs opened). */
struct dafs_ompio_file {
    dafs_file_t *file;
    int sticky_err;  /* first -errno of an independent blocking I/O, reported by the next
                        sync/close: Open MPI 4.1's OMPIO ignores fbtl_preadv/pwritev's
                        result outside collective I/O */
};

/* Lock/unlock the process-wide client. Every dafs_* call goes through it. */
void dafs_ompio_lock(void);
void dafs_ompio_unlock(void);
bool dafs_ompio_trylock(void);

/* The client, connected on first use (lock held). 0 or -errno. */
int dafs_ompio_client_locked(dafs_client_t **out);
/* The completion group for non-blocking I/O (lock held, client connected). */
int dafs_ompio_cg_locked(dafs_cg_t *out);

/* Name handling: the path inside the export for a file name carrying the prefix, or
 * NULL if the name is not ours. */
const char *dafs_ompio_path(const char *filename);
bool dafs_ompio_claims(const char *filename);

/* -errno (either sign) -> MPI error class, like fs_ufs's mca_fs_base_get_mpi_err plus
 * the transport errors (connection lost, timeouts -> MPI_ERR_IO). */
int dafs_ompio_mpi_err(int err);

/* Memory mode from the configuration; -1 (and a message) if the name is unknown. */
int dafs_ompio_mem_mode(void);

/* Reference counting of the two components (open/close). The session ends (counters
 * printed if asked, client disconnected) at MPI_Finalize, through a delete callback of
 * an MPI_COMM_SELF attribute set at connect, or at the last component close, whichever
 * comes first. */
void dafs_ompio_acquire(void);
void dafs_ompio_release(void);

/* Registration cache (dafs_ompio_regcache.c). Lock held for all but invalidate. */
struct dafs_ompio_reg {
    dafs_region_t region;
    size_t offset;   /* of the I/O's first byte inside the region */
    int slot;        /* cache slot pinned, or -1: a registration of this I/O alone */
};
int dafs_ompio_reg_get(dafs_client_t *c, void *buf, size_t len, int mode,
                       struct dafs_ompio_reg *out);
void dafs_ompio_reg_put(dafs_client_t *c, const struct dafs_ompio_reg *r);
void dafs_ompio_regcache_flush(dafs_client_t *c);
void dafs_ompio_regcache_hooks_init(void);

/* Print the counters line (stderr). */
void dafs_ompio_print_stats(void);

#endif /* DAFS_OMPIO_H */
