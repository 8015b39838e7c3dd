/*
 * libdafs_bdb: the file hooks. Paths under the prefix go to dafs; everything else, and
 * every descriptor that is not a dafs file, gets the plain system call, with the
 * conventions Berkeley DB expects of each hook (os/os_*.c of 5.3): open/read/write/
 * pread/pwrite return -1 and set errno; close, fsync, ftruncate, seek, exists, ioinfo,
 * rename, unlink and dirlist return 0 or an errno value.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <db.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bdb_internal.h"

#define MEGABYTE (1024u * 1024u)
/* ioinfo's I/O size for dafs files: what a local file system reports, so databases
 * created without an explicit page size get the same one as on local disk. */
#define DAFS_IOSIZE_BYTES 4096u

/* Open the placeholder `local` (creating it and its directories): the descriptor
 * number we hand to Berkeley DB, and the inode __os_fileid's stat() sees. Read-write
 * when allowed, because DB_REGISTER takes fcntl write locks on this descriptor. */
static int placeholder_open(const char *local)
{
    int fd = open(local, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ENOENT && bdb_mkdir_parent(local) == 0)
        fd = open(local, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 && (errno == EACCES || errno == EROFS || errno == EISDIR))
        fd = open(local, O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
    return fd < 0 ? -errno : fd;
}

/* Descriptors whose last read() hit end of file (bitmap; descriptors beyond
 * EOF_FDS_MAX are not tracked). A second such read in a row, with no seek or write in
 * between, means a caller is reading until end of file (DB_REGISTER's registry scan,
 * hot backup): zeros would make it loop for ever, so that read fails instead. */
#define EOF_FDS_MAX 65536
static unsigned char eof_bits[EOF_FDS_MAX / 8];

/* Set or clear fd's bit (bdb.mu held); returns whether it was set. */
static int eof_mark(int fd, int set)
{
    if (fd < 0 || fd >= EOF_FDS_MAX)
        return 0;
    unsigned char bit = (unsigned char)(1u << (fd % 8));
    int was = (eof_bits[fd / 8] & bit) != 0;
    if (set)
        eof_bits[fd / 8] |= bit;
    else
        eof_bits[fd / 8] &= (unsigned char)~bit;
    return was;
}

void bdb_eof_clear(int fd)
{
    pthread_mutex_lock(&bdb.mu);
    eof_mark(fd, 0);
    pthread_mutex_unlock(&bdb.mu);
}

/* A read() that returned n < len bytes: zero-fill (returns len) or, the second time in
 * a row on this descriptor, -EIO. */
static ssize_t short_read(int fd, void *buf, size_t len, ssize_t n)
{
    static int warned;
    pthread_mutex_lock(&bdb.mu);
    int again = eof_mark(fd, 1);
    if (!again)
        bdb.stats.reads_zero_filled++;
    pthread_mutex_unlock(&bdb.mu);
    if (again) {
        if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
            fprintf(stderr, "dafs_bdb: read past end of file twice in a row (fd %d): Berkeley DB's "
                            "read hook cannot report end of file; DB_REGISTER and hot backup are "
                            "not supported with libdafs_bdb\n", fd);
        return -EIO;
    }
    /* Berkeley DB 5.3's __os_read takes any count but `len` from the read hook as an
     * error (its own read loop would accept end of file). Past end of file we give
     * zeros, as a preallocated file would: its log code reads a zero header as "not yet
     * written", and pages past the end are zero. */
    memset((char *)buf + n, 0, len - (size_t)n);
    return (ssize_t)len;
}

static int h_open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & O_CREAT) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    char local[PATH_MAX], remote[PATH_MAX];
    int m = bdb_map(path, local, remote);
    if (m == 0) {
        int fd = open(path, flags, mode);
        if (fd >= 0)
            bdb_eof_clear(fd); /* a reused descriptor number starts afresh */
        return fd;
    }
    int rc = m;
    if (m > 0) {
        pthread_mutex_lock(&bdb.mu);
        rc = bdb.broken_errno ? -bdb.broken_errno : 0;
        if (rc == 0 && bdb.files_n == bdb.files_max)
            rc = -EMFILE; /* DAFS_BDB_FILES_MAX */
        dafs_file_t *f = NULL;
        /* O_DIRECT, O_CLOEXEC, O_LARGEFILE... have no meaning for a dafs file. */
        int dflags = flags & (O_ACCMODE | O_CREAT | O_EXCL | O_TRUNC);
        if (rc == 0)
            rc = dafs_open(bdb.client, remote, dflags, mode & 07777, &f);
        int fd = rc == 0 ? placeholder_open(local) : rc;
        if (rc == 0 && fd < 0) {
            dafs_close(bdb.client, f);
            rc = fd;
        }
        if (rc == 0) {
            assert(bdb.files_n < bdb.files_max && bdb_file_of(fd) == NULL); /* fds are unique */
            struct bdb_file *e = &bdb.files[bdb.files_n++];
            e->fd = fd;
            e->f = f;
            e->pos_bytes = 0;
            e->dsync = (flags & (O_DSYNC | O_SYNC)) != 0;
            eof_mark(fd, 0);
            rc = fd;
        }
        pthread_mutex_unlock(&bdb.mu);
    }
    if (rc < 0) {
        errno = -rc;
        return -1;
    }
    return rc;
}

static int h_close(int fd)
{
    pthread_mutex_lock(&bdb.mu);
    eof_mark(fd, 0);
    struct bdb_file *e = bdb_file_of(fd);
    int rc = 0;
    if (e != NULL) {
        rc = dafs_close(bdb.client, e->f);
        *e = bdb.files[--bdb.files_n];
    }
    pthread_mutex_unlock(&bdb.mu);
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    return -rc;
}

/* One transfer of a dafs file. A buffer inside registered region memory (the cache)
 * is named by its region, so the server places the data there (or pulls it from
 * there) without a staging copy; other memory takes dafs_pread/dafs_pwrite. */
static ssize_t dafs_io(struct bdb_file *e, void *buf, size_t len, uint64_t off, int is_write)
{
    struct bdb_region *r = bdb_region_of(buf, len);
    ssize_t n;
    if (r != NULL && len > 0 && len <= dafs_max_io_size(bdb.client)) {
        size_t roff = (size_t)((char *)buf - (char *)r->addr);
        int rc = is_write ? dafs_pwrite_nb(bdb.client, e->f, bdb.cg, r->id, roff, len, off, 0)
                       : dafs_pread_nb(bdb.client, e->f, bdb.cg, r->id, roff, len, off, 0);
        dafs_completion_t c;
        if (rc == 0)
            rc = dafs_cg_wait(bdb.client, bdb.cg, 1, 1, -1, &c);
        n = rc < 0 ? rc : rc == 1 ? (ssize_t)c.result : -EIO;
        if (is_write)
            bdb.stats.writes_registered++;
        else
            bdb.stats.reads_registered++;
    } else {
        n = is_write ? dafs_pwrite(bdb.client, e->f, buf, len, off)
                  : dafs_pread(bdb.client, e->f, buf, len, off);
        if (is_write)
            bdb.stats.writes_plain++;
        else
            bdb.stats.reads_plain++;
    }
    if (n >= 0 && is_write && e->dsync) {
        int rc = dafs_fsync(bdb.client, e->f);
        if (rc < 0)
            n = rc;
    }
    return n;
}

/* read() until `len` bytes or end of file, as Berkeley DB's own read loop does. */
static ssize_t read_full(int fd, char *buf, size_t len)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = read(fd, buf + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        done += (size_t)n;
    }
    return (ssize_t)done;
}

/* pread/pwrite (pos >= 0) and read/write (pos < 0: at the file position, which
 * advances), on a dafs file or a local descriptor. */
static ssize_t h_rw(int fd, void *buf, size_t len, off_t pos, int is_write)
{
    pthread_mutex_lock(&bdb.mu);
    struct bdb_file *e = bdb_file_of(fd);
    ssize_t n = 0;
    if (e != NULL) {
        n = dafs_io(e, buf, len, pos < 0 ? e->pos_bytes : (uint64_t)pos, is_write);
        if (n > 0 && pos < 0)
            e->pos_bytes += (uint64_t)n;
    }
    pthread_mutex_unlock(&bdb.mu);
    if (e == NULL) {
        if (pos >= 0)
            return is_write ? pwrite(fd, buf, len, pos) : pread(fd, buf, len, pos);
        if (is_write)
            return write(fd, buf, len);
        n = read_full(fd, buf, len);
    }
    if (pos < 0 && !is_write && n >= 0 && (size_t)n < len)
        n = short_read(fd, buf, len, n);
    else if (pos < 0 && n >= 0)
        bdb_eof_clear(fd); /* a full read or a write: the next end of file is news */
    if (n < 0) {
        errno = (int)-n;
        return -1;
    }
    return n;
}

static ssize_t h_read(int fd, void *buf, size_t len) { return h_rw(fd, buf, len, -1, 0); }
static ssize_t h_write(int fd, const void *buf, size_t len) { return h_rw(fd, (void *)buf, len, -1, 1); }

static ssize_t h_pread(int fd, void *buf, size_t len, off_t off)
{
    if (off < 0) {
        errno = EINVAL;
        return -1;
    }
    return h_rw(fd, buf, len, off, 0);
}

static ssize_t h_pwrite(int fd, const void *buf, size_t len, off_t off)
{
    if (off < 0) {
        errno = EINVAL;
        return -1;
    }
    return h_rw(fd, (void *)buf, len, off, 1);
}

static int h_seek(int fd, off_t off, int whence)
{
    pthread_mutex_lock(&bdb.mu);
    struct bdb_file *e = bdb_file_of(fd);
    int rc = 0;
    if (e != NULL) {
        int64_t base = 0;
        if (whence == SEEK_CUR) {
            base = (int64_t)e->pos_bytes;
        } else if (whence == SEEK_END) {
            dafs_attr_t a;
            rc = dafs_fstat(bdb.client, e->f, &a);
            base = (int64_t)a.size;
        } else if (whence != SEEK_SET) {
            rc = -EINVAL;
        }
        if (rc == 0 && base + off < 0)
            rc = -EINVAL;
        if (rc == 0)
            e->pos_bytes = (uint64_t)(base + off);
    }
    eof_mark(fd, 0);
    pthread_mutex_unlock(&bdb.mu);
    if (e == NULL)
        return lseek(fd, off, whence) == -1 ? errno : 0;
    return -rc;
}

/* fsync and ftruncate: the dafs call, or the system call on a local descriptor. */
static int h_fsync(int fd)
{
    pthread_mutex_lock(&bdb.mu);
    struct bdb_file *e = bdb_file_of(fd);
    int rc = e != NULL ? dafs_fsync(bdb.client, e->f) : 0;
    pthread_mutex_unlock(&bdb.mu);
    if (e == NULL)
        return fdatasync(fd) == 0 ? 0 : errno;
    return -rc;
}

static int h_ftruncate(int fd, off_t len)
{
    if (len < 0)
        return EINVAL;
    pthread_mutex_lock(&bdb.mu);
    struct bdb_file *e = bdb_file_of(fd);
    int rc = e != NULL ? dafs_ftruncate(bdb.client, e->f, (uint64_t)len) : 0;
    pthread_mutex_unlock(&bdb.mu);
    if (e == NULL)
        return ftruncate(fd, len) == 0 ? 0 : errno;
    return -rc;
}

static int h_ioinfo(const char *path, int fd, u_int32_t *mbytes, u_int32_t *bytes, u_int32_t *iosize)
{
    (void)path;
    uint64_t size = 0, io = DAFS_IOSIZE_BYTES;
    pthread_mutex_lock(&bdb.mu);
    struct bdb_file *e = bdb_file_of(fd);
    int rc = 0;
    if (e != NULL) {
        dafs_attr_t a;
        rc = dafs_fstat(bdb.client, e->f, &a);
        size = a.size;
    }
    pthread_mutex_unlock(&bdb.mu);
    if (e == NULL) {
        struct stat sb;
        if (fstat(fd, &sb) != 0)
            return errno;
        size = (uint64_t)sb.st_size;
        io = (uint64_t)sb.st_blksize;
    }
    if (rc < 0)
        return -rc;
    if (mbytes != NULL)
        *mbytes = (u_int32_t)(size / MEGABYTE);
    if (bytes != NULL)
        *bytes = (u_int32_t)(size % MEGABYTE);
    if (iosize != NULL)
        *iosize = (u_int32_t)io;
    return 0;
}

/* Map `path` and fail fast when the environment-variable route could not connect.
 * Returns 1 (dafs), 0 (local) or -errno. */
static int map_checked(const char *path, char local[PATH_MAX], char remote[PATH_MAX])
{
    int m = bdb_map(path, local, remote);
    if (m > 0 && bdb.broken_errno)
        return -bdb.broken_errno;
    return m;
}

static int h_exists(const char *path, int *isdirp)
{
    char local[PATH_MAX], remote[PATH_MAX];
    int m = map_checked(path, local, remote);
    if (m < 0)
        return -m;
    uint32_t type;
    if (m == 0) {
        struct stat sb;
        if (stat(path, &sb) != 0)
            return errno;
        type = S_ISDIR(sb.st_mode) ? DAFS_TYPE_DIR : DAFS_TYPE_REG;
    } else {
        dafs_attr_t a;
        pthread_mutex_lock(&bdb.mu);
        int rc = dafs_stat(bdb.client, remote, &a);
        pthread_mutex_unlock(&bdb.mu);
        if (rc < 0)
            return -rc;
        type = a.type;
    }
    if (isdirp != NULL)
        *isdirp = type == DAFS_TYPE_DIR;
    return 0;
}

static int h_rename(const char *from, const char *to)
{
    char lf[PATH_MAX], rf[PATH_MAX], lt[PATH_MAX], rt[PATH_MAX];
    int mf = map_checked(from, lf, rf), mt = map_checked(to, lt, rt);
    if (mf < 0 || mt < 0)
        return mf < 0 ? -mf : -mt;
    if (mf != mt)
        return EXDEV; /* one side on dafs, the other local */
    if (mf == 0)
        return rename(from, to) == 0 ? 0 : errno;
    pthread_mutex_lock(&bdb.mu);
    int rc = dafs_rename(bdb.client, rf, rt);
    pthread_mutex_unlock(&bdb.mu);
    if (rc < 0)
        return -rc;
    /* The placeholder follows; a missing one is re-created by the next open. */
    if (rename(lf, lt) != 0 && errno == ENOENT)
        unlink(lt);
    return 0;
}

static int h_unlink(const char *path)
{
    char local[PATH_MAX], remote[PATH_MAX];
    int m = map_checked(path, local, remote);
    if (m < 0)
        return -m;
    if (m == 0)
        return unlink(path) == 0 ? 0 : errno;
    pthread_mutex_lock(&bdb.mu);
    int rc = dafs_unlink(bdb.client, remote);
    pthread_mutex_unlock(&bdb.mu);
    if (rc < 0)
        return -rc;
    unlink(local);
    return 0;
}

struct name_list {
    char **names;
    int n, cap;
    int err;
};

static int add_name(struct name_list *l, const char *name)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 16;
        char **p = realloc(l->names, (size_t)cap * sizeof *p);
        if (p == NULL)
            return l->err = ENOMEM;
        l->names = p;
        l->cap = cap;
    }
    if ((l->names[l->n] = strdup(name)) == NULL)
        return l->err = ENOMEM;
    l->n++;
    return 0;
}

/* Berkeley DB lists directories to find log files and region files: regular files. */
static int collect_remote(void *arg, const char *name, uint64_t fileid, uint32_t type)
{
    (void)fileid;
    return type == DAFS_TYPE_REG ? add_name(arg, name) : 0;
}

static void h_dirfree(char **names, int cnt)
{
    for (int i = 0; i < cnt; i++)
        free(names[i]);
    free(names);
}

static int list_local(const char *dir, struct name_list *l)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return errno;
    struct dirent *de;
    while (l->err == 0 && (de = readdir(d)) != NULL) {
        char p[PATH_MAX];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode))
            add_name(l, de->d_name);
    }
    closedir(d);
    return l->err;
}

static int h_dirlist(const char *dir, char ***namesp, int *cntp)
{
    char local[PATH_MAX], remote[PATH_MAX];
    int m = map_checked(dir, local, remote);
    if (m < 0)
        return -m;
    struct name_list l = {0};
    int rc;
    if (m == 0) {
        rc = list_local(dir, &l);
    } else {
        pthread_mutex_lock(&bdb.mu);
        rc = dafs_readdir(bdb.client, remote, collect_remote, &l);
        pthread_mutex_unlock(&bdb.mu);
        rc = rc < 0 ? -rc : l.err;
    }
    if (rc != 0) {
        h_dirfree(l.names, l.n);
        return rc;
    }
    *namesp = l.names;
    *cntp = l.n;
    return 0;
}

int bdb_install_hooks(void)
{
    int rc = db_env_set_func_open(h_open);
    rc = rc ? rc : db_env_set_func_close(h_close);
    rc = rc ? rc : db_env_set_func_read(h_read);
    rc = rc ? rc : db_env_set_func_write(h_write);
    rc = rc ? rc : db_env_set_func_pread(h_pread);
    rc = rc ? rc : db_env_set_func_pwrite(h_pwrite);
    rc = rc ? rc : db_env_set_func_seek(h_seek);
    rc = rc ? rc : db_env_set_func_fsync(h_fsync);
    rc = rc ? rc : db_env_set_func_ftruncate(h_ftruncate);
    rc = rc ? rc : db_env_set_func_ioinfo(h_ioinfo);
    rc = rc ? rc : db_env_set_func_exists(h_exists);
    rc = rc ? rc : db_env_set_func_rename(h_rename);
    rc = rc ? rc : db_env_set_func_unlink(h_unlink);
    rc = rc ? rc : db_env_set_func_dirlist(h_dirlist);
    rc = rc ? rc : db_env_set_func_dirfree(h_dirfree);
    return rc > 0 ? -rc : rc;
}
