/* LD_PRELOAD shim: the NFS baseline of the MPI-IO benchmark (seed 004).
 *
 * The seed ran ROMIO over the kernel NFS client. These machines have no kernel NFS client,
 * and the NFS baseline (shared/peers/nfs) is NFS-Ganesha reached through libnfs, a user-space
 * client. libnfs's own ld_nfs example is not packaged by Debian and does not cover what Open
 * MPI's OMPIO (fs ufs + fbtl posix) calls (preadv/pwritev, lseek, fstat, fsync, POSIX AIO), so
 * this shim maps exactly those calls, for names starting with "nfs://", onto libnfs's
 * synchronous API (one NFS context per open file, as ld_nfs does). Every other name and
 * descriptor goes to the C library untouched.
 *
 * What differs from a kernel client (said in the benchmark report): no client cache and no
 * read-ahead (every call is one or more NFS RPCs), and aio_read/aio_write on these
 * descriptors complete synchronously at submission (libnfs's sync API; glibc's AIO threads
 * would call the kernel directly on the socket), so MPI_File_iread_at on NFS does not overlap.
 * Locks are refused (ENOLCK): OMPIO does not lock ufs files by default. */
#define _GNU_SOURCE
#include <aio.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <nfsc/libnfs.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_FDS 1024

struct nfs_file {
    struct nfs_context *nfs;
    struct nfsfh *fh;
    uint64_t pos; /* for lseek/read/write */
};

static struct nfs_file *files[MAX_FDS];

static int is_nfs_name(const char *path) { return path && strncmp(path, "nfs://", 6) == 0; }

static struct nfs_file *lookup(int fd) { return fd >= 0 && fd < MAX_FDS ? files[fd] : NULL; }

#define REAL(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

/* Mounts the export of url; returns the context and fills *urlp (caller destroys both). */
static struct nfs_context *mount_url(const char *path, struct nfs_url **urlp)
{
    struct nfs_context *nfs = nfs_init_context();
    if (!nfs) { errno = ENOMEM; return NULL; }
    struct nfs_url *url = nfs_parse_url_full(nfs, path);
    if (!url) { nfs_destroy_context(nfs); errno = EINVAL; return NULL; }
    int rc = nfs_mount(nfs, url->server, url->path);
    if (rc != 0) {
        nfs_destroy_url(url);
        nfs_destroy_context(nfs);
        errno = rc < 0 ? -rc : EIO;
        return NULL;
    }
    *urlp = url;
    return nfs;
}

/* libnfs reads "mountport=20048.locktest.0" as 20048 and opens the data file itself; OMPIO's
 * sharedfp/lockedfile then unlinks that "locktest" file, i.e. the data. So a query value
 * must be letters and digits only, or the name is not a valid URL (EINVAL). */
static int valid_query(const char *path)
{
    const char *q = strchr(path, '?');
    if (!q) return 1;
    for (q++; *q; q++) {
        if (*q == '=' || *q == '&' || (*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'z') ||
            (*q >= 'A' && *q <= 'Z') || *q == '_')
            continue;
        return 0;
    }
    return 1;
}

static int nfs_open_name(const char *path, int flags, mode_t mode)
{
    if (!valid_query(path)) { errno = EINVAL; return -1; }
    struct nfs_url *url = NULL;
    struct nfs_context *nfs = mount_url(path, &url);
    if (!nfs) return -1;
    struct nfsfh *fh = NULL;
    int rc = (flags & O_CREAT) ? nfs_open2(nfs, url->file, flags, (int)mode, &fh)
                               : nfs_open(nfs, url->file, flags, &fh);
    nfs_destroy_url(url);
    if (getenv("NFS_PRELOAD_DEBUG"))
        fprintf(stderr, "nfs_preload: pid %d open(%s, 0x%x) = %d\n", (int)getpid(), path, flags, rc);
    int fd = nfs_get_fd(nfs);
    if (rc == 0 && (fd < 0 || fd >= MAX_FDS)) { nfs_close(nfs, fh); rc = -EMFILE; }
    if (rc != 0) { nfs_destroy_context(nfs); errno = -rc; return -1; }
    struct nfs_file *f = calloc(1, sizeof *f);
    f->nfs = nfs;
    f->fh = fh;
    files[fd] = f; /* the context's socket descriptor names the file: it is unique */
    return fd;
}

int open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    if (is_nfs_name(path)) return nfs_open_name(path, flags, mode);
    return REAL(open)(path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    if (is_nfs_name(path)) return nfs_open_name(path, flags, mode);
    return REAL(open64)(path, flags, mode);
}

int close(int fd)
{
    struct nfs_file *f = lookup(fd);
    if (!f) return REAL(close)(fd);
    files[fd] = NULL;
    int rc = nfs_close(f->nfs, f->fh);
    nfs_destroy_context(f->nfs); /* closes the socket, i.e. fd */
    free(f);
    if (rc < 0) { errno = -rc; return -1; }
    return 0;
}

static ssize_t do_pread(struct nfs_file *f, void *buf, size_t len, uint64_t off)
{
    size_t done = 0;
    while (done < len) {
        int rc = nfs_pread(f->nfs, f->fh, off + done, len - done, (char *)buf + done);
        if (rc < 0) { errno = -rc; return done ? (ssize_t)done : -1; }
        if (rc == 0) break; /* end of file */
        done += (size_t)rc;
    }
    return (ssize_t)done;
}

static ssize_t do_pwrite(struct nfs_file *f, const void *buf, size_t len, uint64_t off)
{
    size_t done = 0;
    while (done < len) {
        int rc = nfs_pwrite(f->nfs, f->fh, off + done, len - done, (const char *)buf + done);
        if (rc < 0) { errno = -rc; return done ? (ssize_t)done : -1; }
        if (rc == 0) { errno = EIO; return done ? (ssize_t)done : -1; }
        done += (size_t)rc;
    }
    return (ssize_t)done;
}

static ssize_t do_preadv(struct nfs_file *f, const struct iovec *iov, int n, uint64_t off)
{
    ssize_t total = 0;
    for (int i = 0; i < n; i++) {
        ssize_t r = do_pread(f, iov[i].iov_base, iov[i].iov_len, off + (uint64_t)total);
        if (r < 0) return total ? total : -1;
        total += r;
        if ((size_t)r < iov[i].iov_len) break;
    }
    return total;
}

static ssize_t do_pwritev(struct nfs_file *f, const struct iovec *iov, int n, uint64_t off)
{
    ssize_t total = 0;
    for (int i = 0; i < n; i++) {
        ssize_t r = do_pwrite(f, iov[i].iov_base, iov[i].iov_len, off + (uint64_t)total);
        if (r < 0) return total ? total : -1;
        total += r;
    }
    return total;
}

ssize_t pread(int fd, void *buf, size_t len, off_t off)
{
    struct nfs_file *f = lookup(fd);
    return f ? do_pread(f, buf, len, (uint64_t)off) : REAL(pread)(fd, buf, len, off);
}
ssize_t pread64(int fd, void *buf, size_t len, off_t off)
{
    struct nfs_file *f = lookup(fd);
    return f ? do_pread(f, buf, len, (uint64_t)off) : REAL(pread64)(fd, buf, len, off);
}
ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
    struct nfs_file *f = lookup(fd);
    return f ? do_pwrite(f, buf, len, (uint64_t)off) : REAL(pwrite)(fd, buf, len, off);
}
ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off)
{
    struct nfs_file *f = lookup(fd);
    return f ? do_pwrite(f, buf, len, (uint64_t)off) : REAL(pwrite64)(fd, buf, len, off);
}
ssize_t preadv(int fd, const struct iovec *iov, int n, off_t off)
{
    struct nfs_file *f = lookup(fd);
    return f ? do_preadv(f, iov, n, (uint64_t)off) : REAL(preadv)(fd, iov, n, off);
}
ssize_t preadv64(int fd, const struct iovec *iov, int n, off_t off)
{
    struct nfs_file *f = lookup(fd);
    return f ? do_preadv(f, iov, n, (uint64_t)off) : REAL(preadv64)(fd, iov, n, off);
}
ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t off)
{
    struct nfs_file *f = lookup(fd);
    return f ? do_pwritev(f, iov, n, (uint64_t)off) : REAL(pwritev)(fd, iov, n, off);
}
ssize_t pwritev64(int fd, const struct iovec *iov, int n, off_t off)
{
    struct nfs_file *f = lookup(fd);
    return f ? do_pwritev(f, iov, n, (uint64_t)off) : REAL(pwritev64)(fd, iov, n, off);
}

ssize_t read(int fd, void *buf, size_t len)
{
    struct nfs_file *f = lookup(fd);
    if (!f) return REAL(read)(fd, buf, len);
    ssize_t r = do_pread(f, buf, len, f->pos);
    if (r > 0) f->pos += (uint64_t)r;
    return r;
}

ssize_t write(int fd, const void *buf, size_t len)
{
    struct nfs_file *f = lookup(fd);
    if (!f) return REAL(write)(fd, buf, len);
    ssize_t r = do_pwrite(f, buf, len, f->pos);
    if (r > 0) f->pos += (uint64_t)r;
    return r;
}

static int nfs_size(struct nfs_file *f, uint64_t *size)
{
    struct nfs_stat_64 st;
    int rc = nfs_fstat64(f->nfs, f->fh, &st);
    if (rc < 0) { errno = -rc; return -1; }
    *size = st.nfs_size;
    return 0;
}

static off_t do_lseek(struct nfs_file *f, off_t off, int whence)
{
    uint64_t base = 0;
    if (whence == SEEK_CUR) base = f->pos;
    else if (whence == SEEK_END) { if (nfs_size(f, &base) < 0) return -1; }
    else if (whence != SEEK_SET) { errno = EINVAL; return -1; }
    if ((int64_t)base + off < 0) { errno = EINVAL; return -1; }
    f->pos = base + (uint64_t)off;
    return (off_t)f->pos;
}

off_t lseek(int fd, off_t off, int whence)
{
    struct nfs_file *f = lookup(fd);
    return f ? do_lseek(f, off, whence) : REAL(lseek)(fd, off, whence);
}
off_t lseek64(int fd, off_t off, int whence)
{
    struct nfs_file *f = lookup(fd);
    return f ? do_lseek(f, off, whence) : REAL(lseek64)(fd, off, whence);
}

static int do_fstat(struct nfs_file *f, struct stat *buf)
{
    struct nfs_stat_64 st;
    int rc = nfs_fstat64(f->nfs, f->fh, &st);
    if (rc < 0) { errno = -rc; return -1; }
    memset(buf, 0, sizeof *buf);
    buf->st_dev = st.nfs_dev;
    buf->st_ino = st.nfs_ino;
    buf->st_mode = st.nfs_mode;
    buf->st_nlink = st.nfs_nlink;
    buf->st_uid = st.nfs_uid;
    buf->st_gid = st.nfs_gid;
    buf->st_size = (off_t)st.nfs_size;
    buf->st_blksize = (blksize_t)st.nfs_blksize;
    buf->st_blocks = (blkcnt_t)st.nfs_blocks;
    buf->st_mtim.tv_sec = (time_t)st.nfs_mtime;
    return 0;
}

int fstat(int fd, struct stat *buf)
{
    struct nfs_file *f = lookup(fd);
    return f ? do_fstat(f, buf) : REAL(fstat)(fd, buf);
}
int fstat64(int fd, struct stat64 *buf)
{
    struct nfs_file *f = lookup(fd);
    /* struct stat and struct stat64 are the same on 64-bit Linux */
    return f ? do_fstat(f, (struct stat *)buf) : REAL(fstat64)(fd, buf);
}

static int do_ftruncate(struct nfs_file *f, off_t len)
{
    if (len < 0) { errno = EINVAL; return -1; }
    int rc = nfs_ftruncate(f->nfs, f->fh, (uint64_t)len);
    if (rc < 0) { errno = -rc; return -1; }
    return 0;
}
int ftruncate(int fd, off_t len)
{
    struct nfs_file *f = lookup(fd);
    return f ? do_ftruncate(f, len) : REAL(ftruncate)(fd, len);
}
int ftruncate64(int fd, off_t len)
{
    struct nfs_file *f = lookup(fd);
    return f ? do_ftruncate(f, len) : REAL(ftruncate64)(fd, len);
}

static int do_fsync(struct nfs_file *f)
{
    int rc = nfs_fsync(f->nfs, f->fh);
    if (rc < 0) { errno = -rc; return -1; }
    return 0;
}
int fsync(int fd)
{
    struct nfs_file *f = lookup(fd);
    return f ? do_fsync(f) : REAL(fsync)(fd);
}
int fdatasync(int fd)
{
    struct nfs_file *f = lookup(fd);
    return f ? do_fsync(f) : REAL(fdatasync)(fd);
}

int unlink(const char *path)
{
    if (!is_nfs_name(path)) return REAL(unlink)(path);
    if (!valid_query(path)) { errno = EINVAL; return -1; }
    struct nfs_url *url = NULL;
    struct nfs_context *nfs = mount_url(path, &url);
    if (!nfs) return -1;
    int rc = nfs_unlink(nfs, url->file);
    nfs_destroy_url(url);
    nfs_destroy_context(nfs);
    if (rc < 0) { errno = -rc; return -1; }
    return 0;
}

int fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (!lookup(fd)) return REAL(fcntl)(fd, cmd, arg);
    switch (cmd) {
    case F_GETFL: return O_RDWR;
    case F_GETFD: case F_SETFD: case F_SETFL: return 0;
    default: errno = ENOLCK; return -1; /* no NLM locking in this baseline */
    }
}

/* POSIX AIO on an NFS descriptor: done now, synchronously. glibc's aio_error/aio_return
 * read the request's own __error_code/__return_value, so filling them in completes it. */
static int sync_aio(struct aiocb *cb, int is_write)
{
    struct nfs_file *f = lookup(cb->aio_fildes);
    ssize_t r = is_write ? do_pwrite(f, (const void *)cb->aio_buf, cb->aio_nbytes, (uint64_t)cb->aio_offset)
                         : do_pread(f, (void *)cb->aio_buf, cb->aio_nbytes, (uint64_t)cb->aio_offset);
    cb->__return_value = r;
    cb->__error_code = r < 0 ? errno : 0;
    return 0;
}

int aio_read(struct aiocb *cb)
{
    return lookup(cb->aio_fildes) ? sync_aio(cb, 0) : REAL(aio_read)(cb);
}
int aio_write(struct aiocb *cb)
{
    return lookup(cb->aio_fildes) ? sync_aio(cb, 1) : REAL(aio_write)(cb);
}
int aio_read64(struct aiocb64 *cb)
{
    return lookup(cb->aio_fildes) ? sync_aio((struct aiocb *)cb, 0) : REAL(aio_read64)(cb);
}
int aio_write64(struct aiocb64 *cb)
{
    return lookup(cb->aio_fildes) ? sync_aio((struct aiocb *)cb, 1) : REAL(aio_write64)(cb);
}
