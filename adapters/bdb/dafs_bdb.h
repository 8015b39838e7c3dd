/*
 * dafs_bdb.h — keep Berkeley DB 5.3 environments and databases on a dafs server through
 * Berkeley DB's I/O hooks (db_env_set_func_*).
 *
 * Link with -ldafs_bdb (it carries libdafs inside), or preload it into an unmodified
 * program with DAFS_BDB_SERVER and DAFS_BDB_PREFIX set (see README "Berkeley DB").
 *
 * Paths under a local PREFIX directory are served by dafs: "PREFIX/env/data.db" is the
 * file "/env/data.db" of the server's export. Every other path stays local. Because
 * Berkeley DB's __os_fileid calls stat() with no hook, each dafs file has a 0-byte local
 * placeholder of the same name under PREFIX (created by the open hook); its inode gives
 * the file id. Directories are not created by the hooks (Berkeley DB has no mkdir hook):
 * create the environment home on the server (e.g. `dafs mkdir`) before opening it.
 *
 * Region memory (the environment, lock, log, transaction regions and the database cache)
 * is allocated by the region_map hook in memory registered with libdafs, so cache pages
 * read from dafs are placed by the server directly into the cache buffer. Regions are
 * private to the process: one process at a time may open a given environment (a second
 * one gets EBUSY), as with DB_PRIVATE. Read-only databases are never mmap()ed (the
 * file_map hook declines), pages are read through the cache.
 *
 * Errors: functions return 0 or a NEGATIVE errno value, like libdafs.
 */
#ifndef DAFS_BDB_H
#define DAFS_BDB_H

#include <dafs.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Connect to `server` ("host:port", which switches to shared memory on the same host, or
 * "dafs+shm:///path/dafsd.sock") and install the hooks for paths under the local
 * directory `prefix` (created if missing; a relative one is taken from the current
 * directory at this call; "/" is refused with -EINVAL). Call once, before the first
 * Berkeley DB call. The provider follows DAFS_BDB_PROVIDER ("tcp" or "auto", default
 * auto). Returns 0, -EALREADY if set up already, -EINVAL for a bad argument, or the
 * connection's -errno (-ECONNREFUSED, -ETIMEDOUT, ...); on failure no hook is installed. */
DAFS_API int dafs_bdb_setup(const char *server, const char *prefix);

/* Counters of the hooks, for checking where the I/O went. */
typedef struct dafs_bdb_stats_t {
    uint64_t files_open;        /* dafs files open right now */
    uint64_t reads_registered;  /* reads whose buffer lies in registered region memory
                                   (the cache): submitted on that region, no copy */
    uint64_t reads_plain;       /* reads into other memory (e.g. log records) */
    uint64_t reads_zero_filled; /* read-hook calls that reached end of file: the rest
                                   was zero-filled (see README "Berkeley DB") */
    uint64_t writes_registered;
    uint64_t writes_plain;
    uint64_t regions_registered; /* regions mapped in registered memory */
    uint64_t regions_unregistered; /* regions that fell back to anonymous memory */
    uint64_t region_bytes;      /* bytes of region memory mapped now */
    dafs_stats_t client;        /* the libdafs client's counters (direct_reads, ...) */
} dafs_bdb_stats_t;

/* Copy the counters into *out. 0, -EINVAL (NULL), or -ENOTCONN when not set up. */
DAFS_API int dafs_bdb_stats(dafs_bdb_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif /* DAFS_BDB_H */
