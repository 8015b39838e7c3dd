/* Shared state of libdafs_bdb (not installed). */
#ifndef DAFS_BDB_INTERNAL_H
#define DAFS_BDB_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "dafs_bdb.h"

/* Default limits; DAFS_BDB_FILES_MAX / DAFS_BDB_REGIONS_MAX override them. */
#define BDB_FILES_MAX_DEFAULT 1024
#define BDB_REGIONS_MAX_DEFAULT 64

/* One open dafs file. `fd` is a real descriptor of the local placeholder: the kernel
 * keeps the numbers unique among the process's descriptors, so Berkeley DB's fd-keyed
 * calls can tell dafs files from local ones. */
struct bdb_file {
    int fd;
    int dsync;       /* opened with O_DSYNC/O_SYNC: every write is followed by an fsync */
    dafs_file_t *f;
    uint64_t pos_bytes; /* position for read/write/seek */
};

/* One region handed out by region_map. */
struct bdb_region {
    void *addr;
    size_t len_bytes;
    dafs_region_t id;  /* valid when registered */
    int registered;    /* 1: dafs_alloc_registered memory; 0: anonymous mmap */
    int refs;          /* DB_ENV handles of this process attached to it */
    int lock_fd;       /* the environment's flock (on its first region), else -1 */
    char *name;
};

struct bdb_state {
    pthread_mutex_t mu; /* serializes every libdafs call: the client is single-threaded */
    int installed;
    int broken_errno;   /* > 0: the environment-variable route could not connect; dafs
                           paths fail with this errno instead of silently going local */
    dafs_client_t *client;
    dafs_cg_t cg;
    char prefix[PATH_MAX];
    size_t prefix_len;
    struct bdb_file *files;
    size_t files_max, files_n;
    struct bdb_region *regions;
    size_t regions_max, regions_n;
    dafs_bdb_stats_t stats;
};

extern struct bdb_state bdb;

/* Resolve `path` (relative to the cwd) into `local` (absolute, normalized). Returns 1
 * when it is under the prefix (then `remote` holds the export path), 0 when local, or
 * -errno (-ENAMETOOLONG). */
int bdb_map(const char *path, char local[PATH_MAX], char remote[PATH_MAX]);

/* mkdir -p of the parent directory of `path`. 0 or -errno. */
int bdb_mkdir_parent(const char *path);

/* The dafs file behind real descriptor `fd`, or NULL (call with bdb.mu held). */
struct bdb_file *bdb_file_of(int fd);

/* The registered region holding [buf, buf + len), or NULL (bdb.mu held). */
struct bdb_region *bdb_region_of(const void *buf, size_t len);

/* Forget that fd's last read hit end of file (bdb.mu NOT held). */
void bdb_eof_clear(int fd);

/* Install every hook into Berkeley DB. 0 or -errno. */
int bdb_install_hooks(void);
int bdb_install_region_hooks(void);

#endif
