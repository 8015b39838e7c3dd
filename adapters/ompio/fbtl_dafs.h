/*
 * fbtl_dafs.h — the OMPIO fbtl component for DAFS (file byte transfer layer: the
 * component that moves an io array of memory/file pieces).
 */
#ifndef FBTL_DAFS_H
#define FBTL_DAFS_H

#include "ompi_config.h"
#include "mpi.h"
#include "ompi/mca/common/ompio/common_ompio.h"
#include "ompi/mca/common/ompio/common_ompio_request.h"
#include "ompi/mca/fbtl/fbtl.h"

#include "dafs_ompio.h"

extern mca_fbtl_base_component_2_0_0_t mca_fbtl_dafs_component;

/* The engine (fbtl_dafs_io.c). All calls with the client lock held. */
struct fbtl_dafs_op;
struct fbtl_dafs_op *fbtl_dafs_op_new(dafs_client_t *c, dafs_file_t *file, bool write,
                                      const mca_common_ompio_io_array_t *a, int n, int mode);
/* Submit what fits, reap (waiting up to wait_ms if > 0, else polling). */
void fbtl_dafs_op_progress_locked(dafs_client_t *c, dafs_cg_t cg, struct fbtl_dafs_op *op,
                                  int wait_ms);
/* Until every piece completed. */
void fbtl_dafs_op_run_locked(dafs_client_t *c, dafs_cg_t cg, struct fbtl_dafs_op *op);
bool fbtl_dafs_op_done(const struct fbtl_dafs_op *op);
int fbtl_dafs_op_err(const struct fbtl_dafs_op *op);
int64_t fbtl_dafs_op_bytes(const struct fbtl_dafs_op *op);
/* Drop the caller's reference (freed now, or when its last piece completes). */
void fbtl_dafs_op_release(struct fbtl_dafs_op *op);

#endif /* FBTL_DAFS_H */
