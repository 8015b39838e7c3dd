/*
 * dafs_ompio_common.c — the process-wide DAFS session of the OMPIO components: one
 * client, its mutex, configuration, name prefix, error classes and counters.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "dafs_ompio.h"

/* Default server when neither the MCA parameter nor $DAFS_TARGET names one. */
#define DAFS_OMPIO_SERVER_DEFAULT "127.0.0.1:7420"

struct dafs_ompio_config dafs_ompio_cfg = {
    .server = NULL,
    .prefix = NULL,
    .provider = NULL,
    .secret_file = NULL,
    .request_deadline_ms = 0,
    .connect_timeout_ms = 0,
    .mem = NULL,
    .regcache_size = 200,
    .verbose_stats = 0,
};
struct dafs_ompio_stats dafs_ompio_st;

/* Recursive: MPI calls made while it is held (the MPI_COMM_SELF attribute set at connect)
 * may run opal_progress, and so fbtl_dafs's progress, in the same thread; that is safe
 * because no dafs_* call is in progress at those points. */
static pthread_mutex_t lock;
static pthread_once_t lock_once = PTHREAD_ONCE_INIT;
static dafs_client_t *client;
static dafs_cg_t cg;
static int connect_err; /* a failed connect is not retried for every call of a job */
static int refs;

static void lock_init(void)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&lock, &a);
    pthread_mutexattr_destroy(&a);
}

void dafs_ompio_lock(void)
{
    pthread_once(&lock_once, lock_init);
    pthread_mutex_lock(&lock);
}

void dafs_ompio_unlock(void)
{
    pthread_mutex_unlock(&lock);
}

bool dafs_ompio_trylock(void)
{
    pthread_once(&lock_once, lock_init);
    return pthread_mutex_trylock(&lock) == 0;
}

static const char *nonempty(const char *s)
{
    return (s != NULL && s[0] != '\0') ? s : NULL;
}

static const char *server_target(void)
{
    const char *s = nonempty(dafs_ompio_cfg.server);
    if (s == NULL) {
        s = nonempty(getenv("DAFS_TARGET"));
    }
    return s != NULL ? s : DAFS_OMPIO_SERVER_DEFAULT;
}

static int connect_locked(void)
{
    dafs_options_t o;
    memset(&o, 0, sizeof o);
    const char *prov = nonempty(dafs_ompio_cfg.provider);
    if (prov == NULL || strcmp(prov, "auto") == 0) {
        o.provider = DAFS_PROVIDER_AUTO;
    } else if (strcmp(prov, "tcp") == 0) {
        o.provider = DAFS_PROVIDER_TCP;
    } else {
        fprintf(stderr, "fs_dafs: fs_dafs_provider=%s: must be auto or tcp\n", prov);
        return -EINVAL;
    }
    o.secret_file = nonempty(dafs_ompio_cfg.secret_file);
    if (o.secret_file == NULL) {
        o.secret_file = nonempty(getenv("DAFS_SECRET_FILE"));
    }
    if (dafs_ompio_cfg.connect_timeout_ms > 0) {
        o.connect_timeout_ms = (uint32_t)dafs_ompio_cfg.connect_timeout_ms;
    }
    /* libdafs reads its request deadline from the environment when a client is built;
     * the MCA parameter wins over an inherited value. */
    if (dafs_ompio_cfg.request_deadline_ms > 0) {
        char v[32];
        snprintf(v, sizeof v, "%d", dafs_ompio_cfg.request_deadline_ms);
        setenv("DAFS_REQUEST_DEADLINE_MS", v, 1);
    }
    /* A server that dies mid-write must give an error, not kill the rank (see dafs.h,
     * Signals). Only if the application left SIGPIPE at its default. */
    struct sigaction sa;
    if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL) {
        signal(SIGPIPE, SIG_IGN);
    }
    const char *target = server_target();
    int rc = dafs_connect(target, &o, &client);
    if (rc < 0) {
        fprintf(stderr, "fs_dafs: cannot connect to %s: %s\n", target, dafs_strerror(rc));
        client = NULL;
        return rc;
    }
    return 0;
}

static void shutdown_locked(void)
{
    if (dafs_ompio_cfg.verbose_stats && (client != NULL || connect_err != 0)) {
        dafs_ompio_print_stats();
    }
    if (client != NULL) {
        dafs_ompio_regcache_flush(client);
        /* The completion group goes with the client. */
        dafs_disconnect(client);
        client = NULL;
        cg = 0;
    }
    connect_err = 0;
}

/* MPI_Finalize deletes MPI_COMM_SELF's attributes first thing: the one standard hook
 * that runs at MPI_Finalize (Open MPI 4.1 does not close the fs/fbtl frameworks there). */
static int finalize_cb(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)attr;
    (void)extra;
    dafs_ompio_lock();
    shutdown_locked();
    dafs_ompio_unlock();
    return MPI_SUCCESS;
}

static void register_finalize_hook(void)
{
    static bool done;
    int keyval;
    if (done || MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, finalize_cb, &keyval, NULL) !=
                    MPI_SUCCESS) {
        return;
    }
    done = MPI_Comm_set_attr(MPI_COMM_SELF, keyval, NULL) == MPI_SUCCESS;
}

int dafs_ompio_client_locked(dafs_client_t **out)
{
    if (client == NULL && connect_err == 0) {
        connect_err = connect_locked();
        register_finalize_hook();
    }
    *out = client;
    return client != NULL ? 0 : connect_err;
}

int dafs_ompio_cg_locked(dafs_cg_t *out)
{
    if (cg == 0) {
        int rc = dafs_cg_create(client, &cg);
        if (rc < 0) {
            return rc;
        }
    }
    *out = cg;
    return 0;
}

static const char *prefix(void)
{
    const char *p = dafs_ompio_cfg.prefix;
    return p != NULL ? p : "dafs:";
}

bool dafs_ompio_claims(const char *filename)
{
    const char *p = prefix();
    return filename != NULL && p[0] != '\0' && strncmp(filename, p, strlen(p)) == 0;
}

const char *dafs_ompio_path(const char *filename)
{
    if (!dafs_ompio_claims(filename)) {
        return NULL;
    }
    return filename + strlen(prefix());
}

int dafs_ompio_mpi_err(int err)
{
    if (err < 0) {
        err = -err;
    }
    switch (err) {
    case 0:
        return MPI_SUCCESS;
    case EACCES:
    case EPERM:
        return MPI_ERR_ACCESS;
    case ENAMETOOLONG:
    case EISDIR:
    case ENOTDIR:
        return MPI_ERR_BAD_FILE;
    case ENOENT:
        return MPI_ERR_NO_SUCH_FILE;
    case EROFS:
        return MPI_ERR_READ_ONLY;
    case EEXIST:
        return MPI_ERR_FILE_EXISTS;
    case ENOSPC:
        return MPI_ERR_NO_SPACE;
    case EDQUOT:
        return MPI_ERR_QUOTA;
    case ETXTBSY:
    case EBUSY:
        return MPI_ERR_FILE_IN_USE;
    case EBADF:
        return MPI_ERR_FILE;
    case EINVAL:
        return MPI_ERR_ARG;
    case EIO:
    case ENOTCONN:
    case ETIMEDOUT:
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case EPIPE:
    case EPROTO:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EFBIG:
        return MPI_ERR_IO;
    default:
        return MPI_ERR_OTHER;
    }
}

int dafs_ompio_mem_mode(void)
{
    const char *m = nonempty(dafs_ompio_cfg.mem);
    if (m == NULL || strcmp(m, "cache") == 0) {
        return DAFS_OMPIO_MEM_CACHE;
    }
    if (strcmp(m, "percall") == 0) {
        return DAFS_OMPIO_MEM_PERCALL;
    }
    if (strcmp(m, "library") == 0) {
        return DAFS_OMPIO_MEM_LIBRARY;
    }
    return -1;
}

void dafs_ompio_acquire(void)
{
    dafs_ompio_lock();
    refs++;
    dafs_ompio_unlock();
}

void dafs_ompio_print_stats(void)
{
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    const char *mem = nonempty(dafs_ompio_cfg.mem);
    const struct dafs_ompio_stats *s = &dafs_ompio_st;
    /* One line, key=value, for scripts (the benchmark parses it). */
    fprintf(stderr,
            "dafs_ompio_stats rank=%s provider=%s mem=%s regcache_size=%d "
            "reg_hits=%llu reg_misses=%llu reg_evictions=%llu reg_invalidations=%llu "
            "reg_uncached=%llu registrations=%llu inline_ops=%llu direct_ops=%llu "
            "bytes_read=%llu bytes_written=%llu nb_requests=%llu io_errors=%llu\n",
            rank != NULL ? rank : "?", client != NULL ? dafs_provider(client) : "none",
            mem != NULL ? mem : "cache", dafs_ompio_cfg.regcache_size,
            (unsigned long long)s->reg_hits, (unsigned long long)s->reg_misses,
            (unsigned long long)s->reg_evictions, (unsigned long long)s->reg_invalidations,
            (unsigned long long)s->reg_uncached, (unsigned long long)s->registrations,
            (unsigned long long)s->inline_ops, (unsigned long long)s->direct_ops,
            (unsigned long long)s->bytes_read, (unsigned long long)s->bytes_written,
            (unsigned long long)s->nb_requests, (unsigned long long)s->io_errors);
}

void dafs_ompio_release(void)
{
    dafs_ompio_lock();
    if (refs > 0 && --refs == 0) {
        shutdown_locked();
    }
    dafs_ompio_unlock();
}
