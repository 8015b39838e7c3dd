/*
 * fbtl_dafs.c — the fbtl component "dafs" (mca_fbtl_dafs.so): blocking preadv/pwritev
 * and non-blocking ipreadv/ipwritev + progress for files opened by fs_dafs.
 *
 * MCA parameters (ompi_info --param fbtl dafs --level 9):
 *   fbtl_dafs_mem            percall | library | cache (default cache)
 *   fbtl_dafs_regcache_size  registrations the cache keeps (default 200)
 *   fbtl_dafs_verbose_stats  1: print the counters at MPI_Finalize (one line per rank,
 *                            "dafs_ompio_stats key=value ...", on stderr)
 *   fbtl_dafs_priority       selection priority for dafs files (default 80; posix: 50)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fbtl_dafs.h"

static int priority = 80;

/* What a non-blocking OMPIO request carries (req_data). */
struct fbtl_dafs_req {
    struct fbtl_dafs_op *op; /* NULL: failed before anything was submitted */
    int err;
};

/* Client, completion group and file of an fs_dafs file, lock held. */
static int begin(ompio_file_t *fh, dafs_client_t **c, dafs_cg_t *cg, dafs_file_t **f)
{
    const struct dafs_ompio_file *df = fh->f_fs_ptr;
    if (df == NULL || df->file == NULL) {
        return -EBADF;
    }
    *f = df->file;
    int rc = dafs_ompio_client_locked(c);
    return rc < 0 ? rc : dafs_ompio_cg_locked(cg);
}

/* The library's own blocking path: plain memory, registered by libdafs for the call. */
static ssize_t library_io(dafs_client_t *c, dafs_file_t *f, ompio_file_t *fh, bool write,
                          int *err)
{
    size_t thr = dafs_inline_threshold_unregistered(c);
    ssize_t total = 0;
    for (int i = 0; i < fh->f_num_of_io_entries; i++) {
        const mca_common_ompio_io_array_t *e = &fh->f_io_array[i];
        uint64_t off = (uint64_t)(intptr_t)e->offset;
        ssize_t n = write ? dafs_pwrite(c, f, e->memory_address, e->length, off)
                          : dafs_pread(c, f, e->memory_address, e->length, off);
        if (e->length <= thr) {
            dafs_ompio_st.inline_ops++;
        } else {
            dafs_ompio_st.direct_ops++;
        }
        if (n < 0) {
            dafs_ompio_st.io_errors++;
            *err = (int)n;
            return total;
        }
        total += n;
        if (write) {
            dafs_ompio_st.bytes_written += (uint64_t)n;
        } else {
            dafs_ompio_st.bytes_read += (uint64_t)n;
        }
    }
    return total;
}

static ssize_t blocking_io(ompio_file_t *fh, bool write)
{
    dafs_client_t *c;
    dafs_cg_t cg;
    dafs_file_t *f;
    int err = 0;
    ssize_t total = 0;
    dafs_ompio_lock();
    int rc = begin(fh, &c, &cg, &f);
    int mode = dafs_ompio_mem_mode();
    if (rc < 0) {
        err = rc;
    } else if (mode == DAFS_OMPIO_MEM_LIBRARY ||
               (fh->f_num_of_io_entries == 1 &&
                fh->f_io_array[0].length <= dafs_inline_threshold_unregistered(c))) {
        /* Library mode, and one small piece: its latency is one inline round trip. */
        total = library_io(c, f, fh, write, &err);
    } else {
        struct fbtl_dafs_op *op =
            fbtl_dafs_op_new(c, f, write, fh->f_io_array, fh->f_num_of_io_entries, mode);
        if (op == NULL) {
            err = -ENOMEM;
        } else {
            fbtl_dafs_op_run_locked(c, cg, op);
            err = fbtl_dafs_op_err(op);
            total = fbtl_dafs_op_bytes(op);
            fbtl_dafs_op_release(op);
        }
    }
    if (err != 0) {
        struct dafs_ompio_file *df = fh->f_fs_ptr;
        if (df != NULL && df->sticky_err == 0) {
            df->sticky_err = err;
        }
    }
    dafs_ompio_unlock();
    /* Collective I/O (fcoll) turns a negative result into an MPI error; independent
     * I/O in Open MPI 4.1 ignores it, hence the sticky error above. */
    return err != 0 ? OMPI_ERROR : total;
}

static ssize_t fbtl_dafs_preadv(ompio_file_t *fh)
{
    return blocking_io(fh, false);
}

static ssize_t fbtl_dafs_pwritev(ompio_file_t *fh)
{
    return blocking_io(fh, true);
}

static bool fbtl_dafs_progress(mca_ompio_request_t *req)
{
    struct fbtl_dafs_req *d = req->req_data;
    int err = d->err;
    int64_t bytes = 0;
    if (d->op != NULL) {
        /* Another thread inside the client: try again on the next progress call. */
        if (!dafs_ompio_trylock()) {
            return false;
        }
        dafs_client_t *c;
        dafs_cg_t cg;
        int rc = dafs_ompio_client_locked(&c);
        if (rc == 0) {
            rc = dafs_ompio_cg_locked(&cg);
        }
        if (rc == 0) {
            fbtl_dafs_op_progress_locked(c, cg, d->op, 0);
        }
        bool done = rc != 0 || fbtl_dafs_op_done(d->op);
        err = rc != 0 ? rc : fbtl_dafs_op_err(d->op);
        bytes = fbtl_dafs_op_bytes(d->op);
        dafs_ompio_unlock();
        if (!done) {
            return false;
        }
    }
    req->req_ompi.req_status.MPI_ERROR = err != 0 ? dafs_ompio_mpi_err(err) : MPI_SUCCESS;
    req->req_ompi.req_status._ucount = (size_t)bytes;
    return true;
}

static void fbtl_dafs_request_free(mca_ompio_request_t *req)
{
    struct fbtl_dafs_req *d = req->req_data;
    if (d == NULL) {
        return;
    }
    if (d->op != NULL) {
        dafs_ompio_lock();
        fbtl_dafs_op_release(d->op);
        dafs_ompio_unlock();
    }
    free(d);
    req->req_data = NULL; /* OMPIO's destructor would free it again */
}

static ssize_t nonblocking_io(ompio_file_t *fh, ompi_request_t *request, bool write)
{
    mca_ompio_request_t *req = (mca_ompio_request_t *)request;
    struct fbtl_dafs_req *d = calloc(1, sizeof *d);
    if (d == NULL) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    /* OMPIO ignores ipreadv's result: every failure is reported through progress, so
     * the request always completes (with an error) instead of hanging. */
    req->req_data = d;
    /* MPI_Wait/MPI_Test hand a failed request to the error handler of the object that
     * created it; Open MPI 4.1's OMPIO leaves that object unset (NULL: a crash in
     * ompi_errhandler_request_invoke), so name the file here. */
    req->req_ompi.req_mpi_object.file = fh->f_fh;
    req->req_progress_fn = fbtl_dafs_progress;
    req->req_free_fn = fbtl_dafs_request_free;
    dafs_client_t *c;
    dafs_cg_t cg;
    dafs_file_t *f;
    dafs_ompio_lock();
    dafs_ompio_st.nb_requests++;
    int rc = begin(fh, &c, &cg, &f);
    if (rc < 0) {
        d->err = rc;
    } else {
        d->op = fbtl_dafs_op_new(c, f, write, fh->f_io_array, fh->f_num_of_io_entries,
                                 dafs_ompio_mem_mode());
        if (d->op == NULL) {
            d->err = -ENOMEM;
        } else {
            fbtl_dafs_op_progress_locked(c, cg, d->op, 0);
        }
    }
    dafs_ompio_unlock();
    return OMPI_SUCCESS;
}

static ssize_t fbtl_dafs_ipreadv(ompio_file_t *fh, ompi_request_t *request)
{
    return nonblocking_io(fh, request, false);
}

static ssize_t fbtl_dafs_ipwritev(ompio_file_t *fh, ompi_request_t *request)
{
    return nonblocking_io(fh, request, true);
}

static int fbtl_dafs_module_init(ompio_file_t *fh)
{
    (void)fh;
    return OMPI_SUCCESS;
}

static int fbtl_dafs_module_finalize(ompio_file_t *fh)
{
    (void)fh;
    return OMPI_SUCCESS;
}

static mca_fbtl_base_module_1_0_0_t dafs_module = {
    fbtl_dafs_module_init,  fbtl_dafs_module_finalize, fbtl_dafs_preadv,
    fbtl_dafs_ipreadv,      fbtl_dafs_pwritev,         fbtl_dafs_ipwritev,
    fbtl_dafs_progress,     fbtl_dafs_request_free,
};

static int fbtl_dafs_init_query(bool enable_progress_threads, bool enable_mpi_threads)
{
    (void)enable_progress_threads;
    (void)enable_mpi_threads;
    return OMPI_SUCCESS;
}

static struct mca_fbtl_base_module_1_0_0_t *fbtl_dafs_file_query(ompio_file_t *fh, int *prio)
{
    *prio = priority;
    /* Only files fs_dafs opened carry a dafs handle in f_fs_ptr. */
    if (!dafs_ompio_claims(fh->f_filename) || fh->f_fs_component == NULL ||
        strcmp(fh->f_fs_component->mca_component_name, "dafs") != 0) {
        return NULL;
    }
    return &dafs_module;
}

static int fbtl_dafs_file_unquery(ompio_file_t *fh)
{
    (void)fh;
    return OMPI_SUCCESS;
}

static int fbtl_dafs_open(void)
{
    /* A bad fbtl_dafs_mem is reported by fs_dafs when a dafs file is opened (refusing
     * to load here would hand dafs files to the posix fbtl). */
    dafs_ompio_regcache_hooks_init();
    dafs_ompio_acquire();
    return OMPI_SUCCESS;
}

static int fbtl_dafs_close(void)
{
    dafs_ompio_release();
    return OMPI_SUCCESS;
}

static int fbtl_dafs_register(void)
{
    mca_base_component_t *v = &mca_fbtl_dafs_component.fbtlm_version;
    dafs_ompio_cfg.mem = "cache";
    (void)mca_base_component_var_register(
        v, "mem", "Memory registration: percall (register each I/O's buffer), library "
                  "(plain memory, libdafs registers per call), cache (LRU registration "
                  "cache, invalidated on free/munmap)",
        MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &dafs_ompio_cfg.mem);
    dafs_ompio_cfg.regcache_size = 200;
    (void)mca_base_component_var_register(
        v, "regcache_size", "Registrations the cache keeps (fbtl_dafs_mem=cache)",
        MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &dafs_ompio_cfg.regcache_size);
    dafs_ompio_cfg.verbose_stats = 0;
    (void)mca_base_component_var_register(
        v, "verbose_stats", "1: print the component's counters at MPI_Finalize (stderr, "
                            "one 'dafs_ompio_stats key=value...' line per process)",
        MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &dafs_ompio_cfg.verbose_stats);
    priority = 80;
    (void)mca_base_component_var_register(
        v, "priority", "Priority of the fbtl dafs component for dafs files",
        MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_9, MCA_BASE_VAR_SCOPE_READONLY,
        &priority);
    return OMPI_SUCCESS;
}

mca_fbtl_base_component_2_0_0_t mca_fbtl_dafs_component = {
    .fbtlm_version =
        {
            MCA_FBTL_BASE_VERSION_2_0_0,
            .mca_component_name = "dafs",
            MCA_BASE_MAKE_VERSION(component, 0, 1, 0),
            .mca_open_component = fbtl_dafs_open,
            .mca_close_component = fbtl_dafs_close,
            .mca_register_component_params = fbtl_dafs_register,
        },
    .fbtlm_data = {MCA_BASE_METADATA_PARAM_CHECKPOINT},
    .fbtlm_init_query = fbtl_dafs_init_query,
    .fbtlm_file_query = fbtl_dafs_file_query,
    .fbtlm_file_unquery = fbtl_dafs_file_unquery,
};
