/*
 * libdafs_bdb: region memory. Berkeley DB asks region_map for every shared region of a
 * non-private environment (the environment, lock, log, transaction regions and the
 * database cache) and then never opens the __db.00N region files. We hand out memory
 * registered with libdafs (dafs_alloc_registered: over shared memory it lies in a
 * segment the server maps), so a cache page read from dafs is placed by the server
 * straight into the cache buffer (bdb_hooks.c names the region in the read).
 *
 * That memory belongs to this process, so the environment is process-private: a flock
 * on a local file next to the placeholders keeps a second process out (EBUSY, with a
 * message) instead of letting it build a second, diverging set of regions. The lock
 * dies with the process, so a crashed process never blocks recovery.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <db.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bdb_internal.h"

/* The environment's primary region, created first and detached last. */
#define ENV_REGION_SUFFIX "__db.001"
#define ENV_LOCK_NAME "__db.dafs-lock"

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Take the environment's flock: the lock file's descriptor, or -errno. */
static int env_lock(DB_ENV *dbenv, const char *region_name)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", region_name);
    char *slash = strrchr(path, '/');
    size_t dir_len = slash ? (size_t)(slash - path + 1) : 0;
    if (dir_len + sizeof ENV_LOCK_NAME > sizeof path)
        return -ENAMETOOLONG;
    memcpy(path + dir_len, ENV_LOCK_NAME, sizeof ENV_LOCK_NAME);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ENOENT && bdb_mkdir_parent(path) == 0)
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        close(fd);
        if (e == EWOULDBLOCK) {
            dbenv->errx(dbenv, "dafs_bdb: %s: the environment is open in another process "
                               "(with libdafs_bdb, region memory is private to one process)",
                        region_name);
            return -EBUSY;
        }
        return -e;
    }
    return fd;
}

static struct bdb_region *region_named(const char *name)
{
    for (size_t i = 0; i < bdb.regions_n; i++)
        if (strcmp(bdb.regions[i].name, name) == 0)
            return &bdb.regions[i];
    return NULL;
}

/* Memory for a new region: registered when a client is connected, else anonymous. */
static int region_alloc(struct bdb_region *r, size_t len)
{
    r->registered = 0;
    if (bdb.client != NULL &&
        dafs_alloc_registered(bdb.client, len, &r->addr, &r->id) == 0) {
        r->registered = 1;
        bdb.stats.regions_registered++;
    } else {
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return -errno;
        r->addr = p;
        bdb.stats.regions_unregistered++;
    }
    r->len_bytes = len;
    bdb.stats.region_bytes += len;
    return 0;
}

static int region_create(DB_ENV *dbenv, const char *name, size_t len, void **addrp)
{
    if (bdb.regions_n == bdb.regions_max) {
        dbenv->errx(dbenv, "dafs_bdb: more than %zu regions (DAFS_BDB_REGIONS_MAX)", bdb.regions_max);
        return -ENOMEM;
    }
    struct bdb_region r = {.refs = 1, .lock_fd = -1};
    if (ends_with(name, ENV_REGION_SUFFIX) && (r.lock_fd = env_lock(dbenv, name)) < 0)
        return r.lock_fd;
    if ((r.name = strdup(name)) == NULL) {
        if (r.lock_fd >= 0)
            close(r.lock_fd);
        return -ENOMEM;
    }
    int rc = region_alloc(&r, len);
    if (rc < 0) {
        free(r.name);
        if (r.lock_fd >= 0)
            close(r.lock_fd);
        return rc;
    }
    assert(bdb.regions_n < bdb.regions_max);
    bdb.regions[bdb.regions_n++] = r;
    *addrp = r.addr;
    return 0;
}

static int h_region_map(DB_ENV *dbenv, char *name, size_t len, int *createp, void **addrp)
{
    char local[PATH_MAX], remote[PATH_MAX];
    if (bdb_map(name, local, remote) > 0 && bdb.broken_errno)
        return bdb.broken_errno; /* no server: nothing of this environment is created */
    pthread_mutex_lock(&bdb.mu);
    struct bdb_region *r = region_named(name);
    int rc = 0;
    if (r != NULL) {
        /* Another handle of this process joins: same memory, not a creation. */
        if (len > r->len_bytes) {
            rc = -EINVAL;
        } else {
            r->refs++;
            *addrp = r->addr;
            *createp = 0;
        }
    } else if (!*createp) {
        rc = -ENOENT; /* joining a region no handle of this process created */
    } else {
        rc = region_create(dbenv, name, len, addrp);
        if (rc == 0)
            *createp = 1;
    }
    pthread_mutex_unlock(&bdb.mu);
    return -rc;
}

static int h_region_unmap(DB_ENV *dbenv, void *addr)
{
    (void)dbenv;
    pthread_mutex_lock(&bdb.mu);
    int rc = -EINVAL;
    for (size_t i = 0; i < bdb.regions_n; i++) {
        struct bdb_region *r = &bdb.regions[i];
        if (r->addr != addr)
            continue;
        rc = 0;
        assert(r->refs > 0);
        if (--r->refs > 0)
            break;
        if (r->registered)
            rc = dafs_unregister(bdb.client, r->id);
        else
            rc = munmap(r->addr, r->len_bytes) == 0 ? 0 : -errno;
        bdb.stats.region_bytes -= r->len_bytes;
        if (r->lock_fd >= 0)
            close(r->lock_fd);
        free(r->name);
        bdb.regions[i] = bdb.regions[--bdb.regions_n];
        break;
    }
    pthread_mutex_unlock(&bdb.mu);
    return -rc;
}

/* Berkeley DB maps read-only databases into memory when it can. The placeholder is
 * empty, so a dafs file cannot be mapped: decline for every file (Berkeley DB then
 * reads pages through the cache, as with mp_mmapsize 0). */
static int h_file_map(DB_ENV *dbenv, char *path, size_t len, int is_rdonly, void **addrp)
{
    (void)dbenv;
    (void)path;
    (void)len;
    (void)is_rdonly;
    (void)addrp;
    return EINVAL;
}

static int h_file_unmap(DB_ENV *dbenv, void *addr)
{
    (void)dbenv;
    (void)addr;
    return EINVAL;
}

int bdb_install_region_hooks(void)
{
    int rc = db_env_set_func_region_map(h_region_map, h_region_unmap);
    rc = rc ? rc : db_env_set_func_file_map(h_file_map, h_file_unmap);
    return rc > 0 ? -rc : rc;
}
