/*
 * sqlite3_io_methods of dafs files, and SQLite's lock states on the server's
 * byte-range locks.
 *
 * The locks are those of SQLite's unix VFS (os_unix.c), byte for byte: a SHARED lock is
 * a shared lock on the 510-byte SHARED range, taken while holding a shared lock on the
 * PENDING byte (so that a writer waiting for EXCLUSIVE keeps new readers out); RESERVED
 * is an exclusive lock on the RESERVED byte; PENDING an exclusive lock on the PENDING
 * byte; EXCLUSIVE an exclusive lock on the SHARED range. The server's locks belong to
 * the session and a new lock replaces the session's own overlapping ones (POSIX
 * semantics), so upgrades and downgrades happen in place, as with fcntl. A conflict
 * (-EAGAIN) is SQLITE_BUSY: SQLite's busy handler (PRAGMA busy_timeout) retries.
 *
 * io methods version 1: no xShm*, so WAL needs PRAGMA locking_mode=EXCLUSIVE (SQLite
 * then keeps the WAL index in heap memory). Without it `PRAGMA journal_mode=WAL` fails
 * with SQLITE_ERROR and the message below (see xFileControl).
 */
#include "dafs_sqlite_int.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

int dsq_errno_to_sqlite(int neg_errno, int ioerr) {
    switch (-neg_errno) {
    case 0: return SQLITE_OK;
    case EAGAIN: return SQLITE_BUSY;
    case ENOSPC:
    case EDQUOT: return SQLITE_FULL;
    case ENOMEM: return SQLITE_IOERR_NOMEM;
    default: return ioerr;
    }
}

#define LOCKED(f, expr)                                                              \
    ({                                                                               \
        pthread_mutex_lock(&(f)->conn->mu);                                          \
        __typeof__(expr) _r = (expr);                                                \
        pthread_mutex_unlock(&(f)->conn->mu);                                        \
        _r;                                                                          \
    })

static int x_close(sqlite3_file *pf) {
    dsq_file *f = (dsq_file *)pf;
    int rc = SQLITE_OK;
    if (f->main_name) dsq_main_remove(f);
    if (f->file) {
        /* SQLite unlocks before it closes; a lock still held dies with the close of the
         * session below, or stays until then for a journal (which is never locked). */
        if (f->lock != SQLITE_LOCK_NONE) LOCKED(f, dafs_unlock(f->conn->client, f->file, 0, 0));
        if (LOCKED(f, dafs_close(f->conn->client, f->file)) < 0) rc = SQLITE_IOERR_CLOSE;
        if (f->delete_on_close) LOCKED(f, dafs_unlink(f->conn->client, f->export_path));
    }
    sqlite3_free(f->export_path);
    if (f->conn) dsq_conn_release(f->conn);
    f->file = NULL;
    f->conn = NULL;
    f->export_path = NULL;
    return rc;
}

static int x_read(sqlite3_file *pf, void *buf, int amt, sqlite3_int64 off) {
    dsq_file *f = (dsq_file *)pf;
    ssize_t n = LOCKED(f, dafs_pread(f->conn->client, f->file, buf, (size_t)amt, (uint64_t)off));
    if (n < 0) return dsq_errno_to_sqlite((int)n, SQLITE_IOERR_READ);
    if (n < amt) {
        /* SQLite requires the rest zero-filled on a short read. */
        memset((char *)buf + n, 0, (size_t)(amt - n));
        return SQLITE_IOERR_SHORT_READ;
    }
    return SQLITE_OK;
}

static int x_write(sqlite3_file *pf, const void *buf, int amt, sqlite3_int64 off) {
    dsq_file *f = (dsq_file *)pf;
    ssize_t n = LOCKED(f, dafs_pwrite(f->conn->client, f->file, buf, (size_t)amt, (uint64_t)off));
    if (n < 0) return dsq_errno_to_sqlite((int)n, SQLITE_IOERR_WRITE);
    return n == amt ? SQLITE_OK : SQLITE_IOERR_WRITE;
}

static int x_truncate(sqlite3_file *pf, sqlite3_int64 size) {
    dsq_file *f = (dsq_file *)pf;
    int r = LOCKED(f, dafs_ftruncate(f->conn->client, f->file, (uint64_t)size));
    return r < 0 ? dsq_errno_to_sqlite(r, SQLITE_IOERR_TRUNCATE) : SQLITE_OK;
}

static int x_sync(sqlite3_file *pf, int flags) {
    (void)flags; /* FULL and NORMAL both commit on the server (fsync of the file there) */
    dsq_file *f = (dsq_file *)pf;
    int r = LOCKED(f, dafs_fsync(f->conn->client, f->file));
    return r < 0 ? dsq_errno_to_sqlite(r, SQLITE_IOERR_FSYNC) : SQLITE_OK;
}

static int x_file_size(sqlite3_file *pf, sqlite3_int64 *size) {
    dsq_file *f = (dsq_file *)pf;
    dafs_attr_t a;
    int r = LOCKED(f, dafs_fstat(f->conn->client, f->file, &a));
    if (r < 0) return dsq_errno_to_sqlite(r, SQLITE_IOERR_FSTAT);
    *size = (sqlite3_int64)a.size;
    return SQLITE_OK;
}

/* ---------------------------------------------------------------- locking */

static int lk(dsq_file *f, uint64_t off, uint64_t len, int excl) {
    return LOCKED(f, dafs_lock(f->conn->client, f->file, off, len, excl));
}

static int unlk(dsq_file *f, uint64_t off, uint64_t len) {
    return LOCKED(f, dafs_unlock(f->conn->client, f->file, off, len));
}

static int lock_shared(dsq_file *f) {
    int r = lk(f, DSQ_PENDING_BYTE, 1, 0);
    if (r < 0) return dsq_errno_to_sqlite(r, SQLITE_IOERR_LOCK);
    int r2 = lk(f, DSQ_SHARED_FIRST, DSQ_SHARED_SIZE, 0);
    r = unlk(f, DSQ_PENDING_BYTE, 1);
    if (r2 < 0) return dsq_errno_to_sqlite(r2, SQLITE_IOERR_LOCK);
    if (r < 0) {
        unlk(f, DSQ_SHARED_FIRST, DSQ_SHARED_SIZE);
        return SQLITE_IOERR_UNLOCK;
    }
    f->lock = SQLITE_LOCK_SHARED;
    return SQLITE_OK;
}

static int x_lock(sqlite3_file *pf, int want) {
    dsq_file *f = (dsq_file *)pf;
    if (f->lock >= want) return SQLITE_OK;
    if (want == SQLITE_LOCK_SHARED) return lock_shared(f);
    /* SQLite asks for RESERVED or EXCLUSIVE only while holding SHARED (os.h contract). */
    if (f->lock < SQLITE_LOCK_SHARED) return SQLITE_MISUSE;
    int r;
    if (want == SQLITE_LOCK_RESERVED) {
        r = lk(f, DSQ_RESERVED_BYTE, 1, 1);
        if (r < 0) return dsq_errno_to_sqlite(r, SQLITE_IOERR_LOCK);
        f->lock = SQLITE_LOCK_RESERVED;
        return SQLITE_OK;
    }
    if (f->lock < SQLITE_LOCK_PENDING) {
        r = lk(f, DSQ_PENDING_BYTE, 1, 1);
        if (r < 0) return dsq_errno_to_sqlite(r, SQLITE_IOERR_LOCK);
        f->lock = SQLITE_LOCK_PENDING;
    }
    /* Upgrades the session's shared lock in place; BUSY while readers remain (the
     * PENDING byte stays held so that no new reader starts meanwhile). */
    r = lk(f, DSQ_SHARED_FIRST, DSQ_SHARED_SIZE, 1);
    if (r < 0) return dsq_errno_to_sqlite(r, SQLITE_IOERR_LOCK);
    f->lock = SQLITE_LOCK_EXCLUSIVE;
    return SQLITE_OK;
}

static int x_unlock(sqlite3_file *pf, int want) {
    dsq_file *f = (dsq_file *)pf;
    if (f->lock <= want) return SQLITE_OK;
    int r;
    if (want == SQLITE_LOCK_SHARED) {
        if (f->lock == SQLITE_LOCK_EXCLUSIVE) {
            r = lk(f, DSQ_SHARED_FIRST, DSQ_SHARED_SIZE, 0); /* downgrade in place */
            if (r < 0) return dsq_errno_to_sqlite(r, SQLITE_IOERR_RDLOCK);
        }
        r = unlk(f, DSQ_PENDING_BYTE, 2); /* PENDING and RESERVED */
        if (r < 0) return SQLITE_IOERR_UNLOCK;
        f->lock = SQLITE_LOCK_SHARED;
        return SQLITE_OK;
    }
    /* NONE: everything in one request. */
    r = unlk(f, DSQ_PENDING_BYTE, 2 + DSQ_SHARED_SIZE);
    if (r < 0) return SQLITE_IOERR_UNLOCK;
    f->lock = SQLITE_LOCK_NONE;
    return SQLITE_OK;
}

static int x_check_reserved(sqlite3_file *pf, int *out) {
    dsq_file *f = (dsq_file *)pf;
    if (f->lock >= SQLITE_LOCK_RESERVED) {
        *out = 1;
        return SQLITE_OK;
    }
    int r = LOCKED(f, dafs_test_lock(f->conn->client, f->file, DSQ_RESERVED_BYTE, 1, 1, NULL));
    if (r < 0) return dsq_errno_to_sqlite(r, SQLITE_IOERR_CHECKRESERVEDLOCK);
    *out = r;
    return SQLITE_OK;
}

/* ---------------------------------------------------------------- file controls */

static const char WAL_REFUSED[] =
    "dafs VFS: journal_mode=WAL needs PRAGMA locking_mode=EXCLUSIVE first (the WAL index "
    "cannot be shared memory between dafs clients); rollback journals work in any mode";

static int x_file_control(sqlite3_file *pf, int op, void *arg) {
    dsq_file *f = (dsq_file *)pf;
    switch (op) {
    case SQLITE_FCNTL_LOCKSTATE:
        *(int *)arg = f->lock;
        return SQLITE_OK;
    case SQLITE_FCNTL_VFSNAME:
        *(char **)arg = sqlite3_mprintf("dafs");
        return SQLITE_OK;
    case SQLITE_FCNTL_PRAGMA: {
        char **a = arg; /* a[1] = name, a[2] = value or NULL; a[0] = our message */
        if (a[2] && sqlite3_stricmp(a[1], "locking_mode") == 0) {
            f->exclusive_mode = sqlite3_stricmp(a[2], "exclusive") == 0;
        } else if (a[2] && sqlite3_stricmp(a[1], "journal_mode") == 0 &&
                   sqlite3_stricmp(a[2], "wal") == 0 && !f->exclusive_mode) {
            a[0] = sqlite3_mprintf("%s", WAL_REFUSED);
            return SQLITE_ERROR;
        }
        return SQLITE_NOTFOUND; /* SQLite carries on with the pragma */
    }
    default:
        return SQLITE_NOTFOUND;
    }
}

static int x_sector_size(sqlite3_file *pf) {
    (void)pf;
    return 4096; /* as the unix VFS (SQLITE_DEFAULT_SECTOR_SIZE) */
}

static int x_device_characteristics(sqlite3_file *pf) {
    (void)pf;
    /* The server writes into a local file system: the same guarantee as the unix VFS
     * gives by default (a write never damages bytes outside its range). */
    return SQLITE_IOCAP_POWERSAFE_OVERWRITE;
}

const sqlite3_io_methods dsq_io_methods = {
    .iVersion = 1,
    .xClose = x_close,
    .xRead = x_read,
    .xWrite = x_write,
    .xTruncate = x_truncate,
    .xSync = x_sync,
    .xFileSize = x_file_size,
    .xLock = x_lock,
    .xUnlock = x_unlock,
    .xCheckReservedLock = x_check_reserved,
    .xFileControl = x_file_control,
    .xSectorSize = x_sector_size,
    .xDeviceCharacteristics = x_device_characteristics,
};
