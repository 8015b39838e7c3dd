/*
 * fs_dafs.c — the fs component "dafs" (mca_fs_dafs.so): open, close, delete, set_size,
 * get_size and sync of files whose MPI name starts with the prefix (default "dafs:";
 * "dafs:/dir/file" and "dafs:dir/file" both name dir/file in the server's export).
 *
 * MCA parameters (ompi_info --param fs dafs --level 9):
 *   fs_dafs_server              dafs_connect target: host:port or dafs+shm:///path/sock
 *                               (default: $DAFS_TARGET, else 127.0.0.1:7420)
 *   fs_dafs_prefix              file names claimed (default "dafs:")
 *   fs_dafs_provider            auto (shared memory on the server's host) | tcp
 *   fs_dafs_secret_file         HMAC secret (default: $DAFS_SECRET_FILE)
 *   fs_dafs_request_deadline_ms longest time one request may take, reconnects included,
 *                               before it fails with an MPI error (0: libdafs default,
 *                               120 s, or $DAFS_REQUEST_DEADLINE_MS)
 *   fs_dafs_connect_timeout_ms  connect timeout (0: libdafs default, 5 s)
 *   fs_dafs_priority            selection priority for dafs files (default 80; ufs: 10)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ompi_config.h"
#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/mca/common/ompio/common_ompio.h"
#include "ompi/mca/fs/base/base.h"
#include "ompi/mca/fs/fs.h"

#include "dafs_ompio.h"

extern mca_fs_base_component_2_0_0_t mca_fs_dafs_component;
static int priority = 80;

/* Open flags from MPI amode: creation and exclusivity only on the root (the others
 * open what it created), like fs_ufs. MPI_MODE_APPEND is OMPIO's business (it moves
 * the file pointer); DAFS_O_APPEND would restrict writes to dafs_append. */
static int open_flags(int rank, int amode)
{
    int f = (amode & MPI_MODE_RDONLY) ? DAFS_O_RDONLY
            : (amode & MPI_MODE_WRONLY) ? DAFS_O_WRONLY
                                        : DAFS_O_RDWR;
    if (rank == OMPIO_ROOT) {
        f |= (amode & MPI_MODE_CREATE) ? DAFS_O_CREAT : 0;
        f |= (amode & MPI_MODE_EXCL) ? DAFS_O_EXCL : 0;
    }
    return f;
}

static int open_one(ompio_file_t *fh, const char *path, int flags, uint32_t perm)
{
    struct dafs_ompio_file *df = calloc(1, sizeof *df);
    if (df == NULL) {
        return -ENOMEM;
    }
    dafs_ompio_lock();
    dafs_client_t *c;
    int rc = dafs_ompio_client_locked(&c);
    if (rc == 0) {
        rc = dafs_open(c, path, flags, perm, &df->file);
    }
    dafs_ompio_unlock();
    if (rc < 0) {
        free(df);
        return rc;
    }
    fh->f_fs_ptr = df;
    return 0;
}

static int bcast_int(ompio_file_t *fh, int *v)
{
    return fh->f_comm->c_coll->coll_bcast(v, 1, MPI_INT, OMPIO_ROOT, fh->f_comm,
                                          fh->f_comm->c_coll->coll_bcast_module);
}

static int fs_dafs_file_open(struct ompi_communicator_t *comm, const char *filename,
                             int amode, struct opal_info_t *info, ompio_file_t *fh)
{
    (void)comm;
    (void)info;
    const char *path = dafs_ompio_path(filename);
    if (path == NULL || path[0] == '\0') {
        return MPI_ERR_BAD_FILE;
    }
    if (dafs_ompio_mem_mode() < 0) {
        fprintf(stderr, "fbtl_dafs: fbtl_dafs_mem=%s: must be percall, library or cache\n",
                dafs_ompio_cfg.mem);
        return MPI_ERR_ARG;
    }
    /* Only fbtl_dafs can move a dafs file's bytes (fh->fd is not a descriptor). */
    if (fh->f_fbtl_component == NULL ||
        strcmp(fh->f_fbtl_component->mca_component_name, "dafs") != 0) {
        fprintf(stderr, "fs_dafs: %s: the fbtl component \"dafs\" is not loaded (is "
                        "mca_fbtl_dafs.so on OMPI_MCA_mca_base_component_path, and not "
                        "excluded by OMPI_MCA_fbtl?)\n", filename);
        return MPI_ERR_OTHER;
    }
    int perm = mca_fs_base_get_file_perm(fh);
    uint32_t mode = perm == OMPIO_PERM_NULL ? 0666 : (uint32_t)perm;
    int ret = MPI_SUCCESS;
    fh->fd = -1; /* no POSIX descriptor: nothing may fall back to read(2) on it */
    if (fh->f_rank == OMPIO_ROOT) {
        int rc = open_one(fh, path, open_flags(fh->f_rank, amode), mode);
        ret = rc < 0 ? dafs_ompio_mpi_err(rc) : MPI_SUCCESS;
    }
    bcast_int(fh, &ret);
    if (ret != MPI_SUCCESS) {
        return ret;
    }
    if (fh->f_rank != OMPIO_ROOT) {
        int rc = open_one(fh, path, open_flags(fh->f_rank, amode), mode);
        if (rc < 0) {
            return dafs_ompio_mpi_err(rc);
        }
    }
    /* OMPIO deletes MPI_MODE_DELETE_ON_CLOSE files by f_fullfilename, which it made
     * absolute by prefixing the working directory ("/cwd/dafs:/x"): keep our name. */
    char *name = strdup(filename);
    if (name == NULL) {
        return MPI_ERR_NO_MEM;
    }
    free(fh->f_fullfilename);
    fh->f_fullfilename = name;
    fh->f_stripe_size = 0;
    fh->f_stripe_count = 1;
    /* The server executes each request whole; the POSIX fbtl's byte-range locks do not
     * apply to a dafs file. */
    fh->f_flags |= OMPIO_LOCK_NEVER;
    return MPI_SUCCESS;
}

/* The sticky error of independent I/O, reported once (then cleared). */
static int take_sticky(struct dafs_ompio_file *df)
{
    int e = df->sticky_err;
    df->sticky_err = 0;
    return e;
}

/* MPI_MODE_DELETE_ON_CLOSE: after fs close, OMPIO calls fs delete on EVERY rank; all
 * but the first would fail with ENOENT. So close deletes once (the root, after the
 * barrier) and leaves this process a note that answers OMPIO's delete of that name. */
static char *deleted_on_close;
static int deleted_on_close_ret;

static void delete_on_close(ompio_file_t *fh, dafs_client_t *c, const char *path)
{
    int ret = MPI_SUCCESS;
    if (fh->f_rank == OMPIO_ROOT) {
        dafs_ompio_lock();
        ret = c != NULL ? dafs_ompio_mpi_err(dafs_unlink(c, path)) : MPI_ERR_IO;
        dafs_ompio_unlock();
    }
    bcast_int(fh, &ret);
    free(deleted_on_close);
    deleted_on_close = strdup(fh->f_fullfilename);
    deleted_on_close_ret = ret;
}

static int fs_dafs_file_close(ompio_file_t *fh)
{
    fh->f_comm->c_coll->coll_barrier(fh->f_comm, fh->f_comm->c_coll->coll_barrier_module);
    struct dafs_ompio_file *df = fh->f_fs_ptr;
    if (df == NULL) {
        return MPI_SUCCESS;
    }
    dafs_ompio_lock();
    dafs_client_t *c;
    int rc = dafs_ompio_client_locked(&c);
    if (rc == 0) {
        rc = dafs_close(c, df->file);
    }
    dafs_ompio_unlock();
    int sticky = take_sticky(df);
    free(df);
    fh->f_fs_ptr = NULL;
    if (fh->f_amode & MPI_MODE_DELETE_ON_CLOSE) {
        fh->f_comm->c_coll->coll_barrier(fh->f_comm, fh->f_comm->c_coll->coll_barrier_module);
        delete_on_close(fh, c, dafs_ompio_path(fh->f_fullfilename));
    }
    return dafs_ompio_mpi_err(sticky != 0 ? sticky : rc);
}

static int fs_dafs_file_delete(char *filename, struct opal_info_t *info)
{
    (void)info;
    const char *path = dafs_ompio_path(filename);
    if (path == NULL || path[0] == '\0') {
        return MPI_ERR_BAD_FILE;
    }
    if (deleted_on_close != NULL && strcmp(deleted_on_close, filename) == 0) {
        free(deleted_on_close);
        deleted_on_close = NULL;
        return deleted_on_close_ret;
    }
    dafs_ompio_lock();
    dafs_client_t *c;
    int rc = dafs_ompio_client_locked(&c);
    if (rc == 0) {
        rc = dafs_unlink(c, path);
    }
    dafs_ompio_unlock();
    return dafs_ompio_mpi_err(rc);
}

/* Collective (all ranks call it): the root sets the size, the others learn the result. */
static int fs_dafs_file_set_size(ompio_file_t *fh, OMPI_MPI_OFFSET_TYPE size)
{
    int ret = MPI_SUCCESS;
    if (fh->f_rank == OMPIO_ROOT) {
        struct dafs_ompio_file *df = fh->f_fs_ptr;
        dafs_ompio_lock();
        dafs_client_t *c;
        int rc = dafs_ompio_client_locked(&c);
        if (rc == 0) {
            rc = size < 0 ? -EINVAL : dafs_ftruncate(c, df->file, (uint64_t)size);
        }
        dafs_ompio_unlock();
        ret = dafs_ompio_mpi_err(rc);
    }
    bcast_int(fh, &ret);
    return ret;
}

static int fs_dafs_file_get_size(ompio_file_t *fh, OMPI_MPI_OFFSET_TYPE *size)
{
    struct dafs_ompio_file *df = fh->f_fs_ptr;
    dafs_attr_t a;
    dafs_ompio_lock();
    dafs_client_t *c;
    int rc = dafs_ompio_client_locked(&c);
    if (rc == 0) {
        rc = dafs_fstat(c, df->file, &a);
    }
    dafs_ompio_unlock();
    if (rc < 0) {
        return dafs_ompio_mpi_err(rc);
    }
    *size = (OMPI_MPI_OFFSET_TYPE)a.size;
    return MPI_SUCCESS;
}

static int fs_dafs_file_sync(ompio_file_t *fh)
{
    struct dafs_ompio_file *df = fh->f_fs_ptr;
    dafs_ompio_lock();
    dafs_client_t *c;
    int rc = dafs_ompio_client_locked(&c);
    if (rc == 0) {
        rc = dafs_fsync(c, df->file);
    }
    int sticky = take_sticky(df);
    dafs_ompio_unlock();
    return dafs_ompio_mpi_err(sticky != 0 ? sticky : rc);
}

static int fs_dafs_module_init(ompio_file_t *fh)
{
    (void)fh;
    return OMPI_SUCCESS;
}

static int fs_dafs_module_finalize(ompio_file_t *fh)
{
    (void)fh;
    return OMPI_SUCCESS;
}

static mca_fs_base_module_1_0_0_t dafs_module = {
    fs_dafs_module_init,   fs_dafs_module_finalize, fs_dafs_file_open,
    fs_dafs_file_close,    fs_dafs_file_delete,     fs_dafs_file_set_size,
    fs_dafs_file_get_size, fs_dafs_file_sync,
};

static int fs_dafs_init_query(bool enable_progress_threads, bool enable_mpi_threads)
{
    (void)enable_progress_threads;
    (void)enable_mpi_threads;
    return OMPI_SUCCESS;
}

static struct mca_fs_base_module_1_0_0_t *fs_dafs_file_query(ompio_file_t *fh, int *prio)
{
    *prio = priority;
    return dafs_ompio_claims(fh->f_filename) ? &dafs_module : NULL;
}

static int fs_dafs_file_unquery(ompio_file_t *fh)
{
    (void)fh;
    return OMPI_SUCCESS;
}

static int fs_dafs_open(void)
{
    dafs_ompio_acquire();
    return OMPI_SUCCESS;
}

static int fs_dafs_close(void)
{
    dafs_ompio_release();
    return OMPI_SUCCESS;
}

static void register_string(const char *name, const char *desc, const char *def, char **var)
{
    *var = (char *)def;
    (void)mca_base_component_var_register(&mca_fs_dafs_component.fsm_version, name, desc,
                                          MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0,
                                          OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY, var);
}

static void register_int(const char *name, const char *desc, int def, int *var)
{
    *var = def;
    (void)mca_base_component_var_register(&mca_fs_dafs_component.fsm_version, name, desc,
                                          MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_5,
                                          MCA_BASE_VAR_SCOPE_READONLY, var);
}

static int fs_dafs_register(void)
{
    struct dafs_ompio_config *g = &dafs_ompio_cfg;
    register_string("server", "DAFS server: host:port or dafs+shm:///path/dafsd.sock "
                              "(empty: $DAFS_TARGET, else 127.0.0.1:7420)",
                    "", &g->server);
    register_string("prefix", "File names starting with this are DAFS files", "dafs:",
                    &g->prefix);
    register_string("provider", "auto (shared memory on the server's host) or tcp", "auto",
                    &g->provider);
    register_string("secret_file", "Shared secret for HMAC authentication "
                                   "(empty: $DAFS_SECRET_FILE, else none)",
                    "", &g->secret_file);
    register_int("request_deadline_ms", "Longest time one request may take, reconnects "
                                        "included (0: libdafs default, 120000)",
                 0, &g->request_deadline_ms);
    register_int("connect_timeout_ms", "Connect timeout (0: libdafs default, 5000)", 0,
                 &g->connect_timeout_ms);
    register_int("priority", "Priority of the fs dafs component for dafs files", 80,
                 &priority);
    return OMPI_SUCCESS;
}

mca_fs_base_component_2_0_0_t mca_fs_dafs_component = {
    .fsm_version =
        {
            MCA_FS_BASE_VERSION_2_0_0,
            .mca_component_name = "dafs",
            MCA_BASE_MAKE_VERSION(component, 0, 1, 0),
            .mca_open_component = fs_dafs_open,
            .mca_close_component = fs_dafs_close,
            .mca_register_component_params = fs_dafs_register,
        },
    .fsm_data = {MCA_BASE_METADATA_PARAM_CHECKPOINT},
    .fsm_init_query = fs_dafs_init_query,
    .fsm_file_query = fs_dafs_file_query,
    .fsm_file_unquery = fs_dafs_file_unquery,
};
