/*
 * libdafs_sqlite.so: a loadable SQLite extension that registers the VFS "dafs".
 *
 *   sqlite3> .load /usr/local/lib/libdafs_sqlite
 *   sqlite3> .open file:/app.db?vfs=dafs&server=127.0.0.1:7420
 *
 * DAFS_SQLITE_DEFAULT=1 at load time makes it the default VFS. Files SQLite opens
 * without a name (temporary databases, sub-journals, sorter files) are private to the
 * process and stay local: they go to the default VFS the extension found at load time
 * (the unix VFS), which also provides randomness, sleep and time.
 */
#include "dafs_sqlite_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

SQLITE_EXTENSION_INIT1

static sqlite3_vfs *local_vfs; /* the default VFS at load time */

#define LOCAL_ONLY_FLAGS                                                              \
    (SQLITE_OPEN_TEMP_DB | SQLITE_OPEN_TEMP_JOURNAL | SQLITE_OPEN_TRANSIENT_DB |      \
     SQLITE_OPEN_SUBJOURNAL)

/* The main database's session, or a journal's: that of its open database if there is
 * one, else a new one (a hot journal is looked at before the database is locked, but
 * always through an open database, so this is the rare case). */
static dsq_conn *conn_for(const char *name, int main_db, int *local) {
    *local = 0;
    if (!main_db) {
        dsq_conn *c = dsq_main_find(sqlite3_filename_database(name), name);
        if (c) return c;
    }
    const char *db = main_db ? name : sqlite3_filename_database(name);
    dsq_where w;
    int where = dsq_resolve(name, sqlite3_uri_parameter(db, "server"),
                            sqlite3_uri_parameter(db, "provider"), &w);
    if (where == DSQ_LOCAL) *local = 1;
    if (where != DSQ_ON_DAFS) return NULL;
    int err = 0;
    dsq_conn *c = dsq_conn_open(&w, &err);
    if (!c) dsq_log("%s: cannot connect to %s: %s", name, w.target, dafs_strerror(err));
    return c;
}

static int open_flags(int flags) {
    int f = (flags & SQLITE_OPEN_READONLY) ? DAFS_O_RDONLY : DAFS_O_RDWR;
    if (flags & SQLITE_OPEN_CREATE) f |= DAFS_O_CREAT;
    if (flags & SQLITE_OPEN_EXCLUSIVE) f |= DAFS_O_EXCL | DAFS_O_CREAT;
    return f;
}

static int x_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *pf, int flags,
                  int *out_flags) {
    (void)vfs;
    dsq_file *f = (dsq_file *)pf;
    memset(f, 0, sizeof *f);
    if (!name || (flags & LOCAL_ONLY_FLAGS))
        return local_vfs->xOpen(local_vfs, name, pf, flags, out_flags);
    int main_db = (flags & SQLITE_OPEN_MAIN_DB) != 0, local = 0;
    dsq_conn *c = conn_for(name, main_db, &local);
    if (local) return local_vfs->xOpen(local_vfs, name, pf, flags, out_flags);
    if (!c) return SQLITE_CANTOPEN;
    if (main_db && dsq_main_clash(name, c->target)) {
        dsq_log("%s: already open in this process on another server than %s (journals are "
                "told apart by name only)", name, c->target);
        dsq_conn_release(c);
        return SQLITE_CANTOPEN;
    }
    f->conn = c;
    char path[DSQ_PATH_MAX_BYTES];
    if (dsq_export_path(c, name, path, sizeof path) || !(f->export_path = sqlite3_mprintf("%s", path))) {
        dsq_conn_release(c);
        f->conn = NULL;
        return SQLITE_CANTOPEN;
    }
    pthread_mutex_lock(&c->mu);
    int r = dafs_open(c->client, path, open_flags(flags), 0644, &f->file);
    if ((r == -EACCES || r == -EROFS) && (flags & SQLITE_OPEN_READWRITE)) {
        /* like the unix VFS: fall back to read-only and say so in *out_flags */
        flags = (flags & ~(SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) | SQLITE_OPEN_READONLY;
        r = dafs_open(c->client, path, DAFS_O_RDONLY, 0, &f->file);
    }
    pthread_mutex_unlock(&c->mu);
    if (r < 0) {
        if (r != -ENOENT || main_db)
            dsq_log("%s: open of %s on the server failed: %s", name, path, dafs_strerror(r));
        sqlite3_free(f->export_path);
        f->export_path = NULL;
        dsq_conn_release(c);
        f->conn = NULL;
        return SQLITE_CANTOPEN;
    }
    f->delete_on_close = (flags & SQLITE_OPEN_DELETEONCLOSE) != 0;
    f->base.pMethods = &dsq_io_methods;
    if (main_db) {
        f->main_name = name;
        dsq_main_add(f);
    }
    if (out_flags) *out_flags = flags;
    return SQLITE_OK;
}

/* Run `op` (unlink or stat) on a name that has no open file: through the session of
 * its open database, or a short-lived one; local names go to the local VFS (-1). */
typedef int (*name_op)(dafs_client_t *c, const char *path, void *arg);

static int on_name(const char *name, name_op op, void *arg) {
    dsq_conn *c = dsq_main_find(NULL, name);
    if (!c) {
        dsq_where w;
        const char *mounts = getenv("DAFS_MOUNT");
        if (!mounts || !*mounts || dsq_resolve(name, NULL, NULL, &w) != DSQ_ON_DAFS) return 1;
        int err = 0;
        if (!(c = dsq_conn_open(&w, &err))) return err;
    }
    char path[DSQ_PATH_MAX_BYTES];
    int r = -ENAMETOOLONG;
    if (dsq_export_path(c, name, path, sizeof path) == 0) {
        pthread_mutex_lock(&c->mu);
        r = op(c->client, path, arg);
        pthread_mutex_unlock(&c->mu);
    }
    dsq_conn_release(c);
    return r;
}

static int do_unlink(dafs_client_t *c, const char *path, void *arg) {
    (void)arg;
    return dafs_unlink(c, path);
}

static int do_stat(dafs_client_t *c, const char *path, void *arg) {
    return dafs_stat(c, path, arg);
}

static int x_delete(sqlite3_vfs *vfs, const char *name, int sync_dir) {
    (void)vfs;
    /* sync_dir: the server's unlink is not followed by an fsync of the directory there
     * (no such request in the protocol); see README "SQLite", what differs. */
    int r = on_name(name, do_unlink, NULL);
    if (r == 1) return local_vfs->xDelete(local_vfs, name, sync_dir);
    if (r == -ENOENT) return SQLITE_IOERR_DELETE_NOENT;
    return r < 0 ? SQLITE_IOERR_DELETE : SQLITE_OK;
}

static int x_access(sqlite3_vfs *vfs, const char *name, int flags, int *out) {
    (void)vfs;
    dafs_attr_t a;
    int r = on_name(name, do_stat, &a);
    if (r == 1) return local_vfs->xAccess(local_vfs, name, flags, out);
    *out = 0;
    if (r == -ENOENT || r == -ENOTDIR) return SQLITE_OK;
    if (r < 0) return SQLITE_IOERR_ACCESS;
    if (flags == SQLITE_ACCESS_EXISTS)
        *out = a.type != DAFS_TYPE_REG || a.size > 0; /* as the unix VFS: empty = absent */
    else
        *out = (a.mode & 0200) != 0;
    return SQLITE_OK;
}

/* Absolute names, without the unix VFS's resolution of local symlinks (the name may be
 * a path inside the export that means nothing locally). */
static int x_full_pathname(sqlite3_vfs *vfs, const char *name, int n, char *out) {
    (void)vfs;
    int w;
    if (name[0] == '/') {
        w = snprintf(out, (size_t)n, "%s", name);
    } else {
        char cwd[DSQ_PATH_MAX_BYTES];
        if (!getcwd(cwd, sizeof cwd)) return SQLITE_CANTOPEN;
        w = snprintf(out, (size_t)n, "%s/%s", cwd, name);
    }
    return w < 0 || w >= n ? SQLITE_CANTOPEN : SQLITE_OK;
}

static int x_randomness(sqlite3_vfs *v, int n, char *out) {
    (void)v;
    return local_vfs->xRandomness(local_vfs, n, out);
}
static int x_sleep(sqlite3_vfs *v, int us) {
    (void)v;
    return local_vfs->xSleep(local_vfs, us);
}
static int x_current_time(sqlite3_vfs *v, double *t) {
    (void)v;
    return local_vfs->xCurrentTime(local_vfs, t);
}
static int x_current_time64(sqlite3_vfs *v, sqlite3_int64 *t) {
    (void)v;
    return local_vfs->xCurrentTimeInt64(local_vfs, t);
}
static int x_last_error(sqlite3_vfs *v, int n, char *out) {
    (void)v;
    return local_vfs->xGetLastError(local_vfs, n, out);
}

static sqlite3_vfs dafs_vfs = {
    .iVersion = 2,
    .mxPathname = DSQ_PATH_MAX_BYTES - 1,
    .zName = "dafs",
    .xOpen = x_open,
    .xDelete = x_delete,
    .xAccess = x_access,
    .xFullPathname = x_full_pathname,
    .xRandomness = x_randomness,
    .xSleep = x_sleep,
    .xCurrentTime = x_current_time,
    .xGetLastError = x_last_error,
    .xCurrentTimeInt64 = x_current_time64,
};

/* Entry point for .load / sqlite3_load_extension (named after the file). */
__attribute__((visibility("default"))) int
sqlite3_dafssqlite_init(sqlite3 *db, char **err, const sqlite3_api_routines *api) {
    (void)db;
    SQLITE_EXTENSION_INIT2(api);
    if (!sqlite3_vfs_find("dafs")) {
        local_vfs = sqlite3_vfs_find(NULL);
        if (!local_vfs || local_vfs->iVersion < 2) {
            *err = sqlite3_mprintf("dafs VFS: no usable default VFS to keep local files on");
            return SQLITE_ERROR;
        }
        /* Room for our file object or the local VFS's (temporary files use it). */
        dafs_vfs.szOsFile = (int)sizeof(dsq_file) > local_vfs->szOsFile ? (int)sizeof(dsq_file)
                                                                        : local_vfs->szOsFile;
        const char *d = getenv("DAFS_SQLITE_DEFAULT");
        int rc = sqlite3_vfs_register(&dafs_vfs, d && strcmp(d, "1") == 0);
        if (rc != SQLITE_OK) return rc;
    }
    return SQLITE_OK_LOAD_PERMANENTLY;
}
