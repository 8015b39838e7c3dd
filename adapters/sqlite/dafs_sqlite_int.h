/*
 * Internal declarations of libdafs_sqlite.so, the SQLite VFS on dafs (see README.md,
 * section "SQLite"). Three parts: conn.c (where a file lives, sessions), vfs.c (the
 * sqlite3_vfs and the extension entry point), io.c (sqlite3_io_methods and locking).
 */
#ifndef DAFS_SQLITE_INT_H
#define DAFS_SQLITE_INT_H

#include <dafs.h>
#include <pthread.h>
#include <sqlite3ext.h>

SQLITE_EXTENSION_INIT3

/* Longest path or target string handled (longer ones are refused with SQLITE_CANTOPEN). */
#define DSQ_PATH_MAX_BYTES 1024

/* SQLite's unix-VFS lock layout (os_unix.c), so that the lock states mean the same. */
#define DSQ_PENDING_BYTE 0x40000000ULL
#define DSQ_RESERVED_BYTE (DSQ_PENDING_BYTE + 1)
#define DSQ_SHARED_FIRST (DSQ_PENDING_BYTE + 2)
#define DSQ_SHARED_SIZE 510ULL

/* One dafs session. Each main database file opened through the VFS gets its own (so
 * that two connections, even of one process, hold separate server locks, exactly like
 * two hosts); its journal, WAL and super-journal files share it. `mu` serialises calls,
 * because xAccess/xDelete of one connection may reach another connection's session
 * (the C client refuses overlapping calls with -EBUSY). */
typedef struct dsq_conn {
    pthread_mutex_t mu;
    dafs_client_t *client;
    int refs;                                 /* under the table lock of conn.c */
    char target[DSQ_PATH_MAX_BYTES];          /* as connected to (host:port, dafs+shm://) */
    char local_prefix[DSQ_PATH_MAX_BYTES];    /* "" = names are export paths */
    char export_base[DSQ_PATH_MAX_BYTES];     /* directory in the export ("" = root) */
} dsq_conn;

/* Where a name lives. */
typedef struct dsq_where {
    char target[DSQ_PATH_MAX_BYTES]; /* host:port or dafs+shm:///x.sock */
    char local_prefix[DSQ_PATH_MAX_BYTES];
    char export_base[DSQ_PATH_MAX_BYTES];
    int tcp;                         /* provider=tcp */
} dsq_where;

/* An open file of the VFS. Local files (temporary ones, and names outside every
 * DAFS_MOUNT prefix) are opened by the default VFS in the same memory instead. */
typedef struct dsq_file {
    sqlite3_file base;
    dsq_conn *conn;
    dafs_file_t *file;
    int lock;                 /* SQLITE_LOCK_* held on the server */
    int exclusive_mode;       /* PRAGMA locking_mode=EXCLUSIVE seen (allows WAL) */
    const char *main_name;    /* main db: SQLite's name pointer (stable until xClose) */
    char *export_path;        /* sqlite3_malloc'ed */
    int delete_on_close;
    struct dsq_file *next;    /* list of open main databases (conn.c) */
} dsq_file;

/* conn.c */
enum { DSQ_ON_DAFS = 0, DSQ_LOCAL = 1, DSQ_NOWHERE = -1 };
int dsq_resolve(const char *path, const char *uri_server, const char *uri_provider,
                dsq_where *w);
int dsq_export_path(const dsq_conn *c, const char *path, char *out, size_t out_len);
dsq_conn *dsq_conn_open(const dsq_where *w, int *err);
void dsq_conn_ref(dsq_conn *c);
void dsq_conn_release(dsq_conn *c);
void dsq_main_add(dsq_file *f);
void dsq_main_remove(dsq_file *f);
dsq_conn *dsq_main_find(const char *db_name, const char *path);
int dsq_main_clash(const char *name, const char *target);
void dsq_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* io.c */
extern const sqlite3_io_methods dsq_io_methods;
int dsq_errno_to_sqlite(int neg_errno, int ioerr);

#endif
