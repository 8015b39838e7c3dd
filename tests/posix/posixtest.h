/*
 * Shared by the files of posixtest (tests/posix/posixtest.c, posix_lib.c and the cases in
 * posix_*.c, linked into one program): the identities, the check macros, the helpers of
 * posix_lib.c and the case functions.
 */
#ifndef POSIXTEST_H
#define POSIXTEST_H

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define U1 65534 /* "nobody": the unprivileged user of the identity cases */
#define G1 65534
#define U2 65533 /* another unprivileged user */
#define G2 65533
#define GX 4242 /* a group neither user has, unless a case adds it */

/* Checks of a system call's result (errno is cleared first): OK must succeed, ERR must
 * fail with E (ERR2: or ALT), EQ must return WANT. */
#define OK(check, call) (errno = 0, chk_ok((check), (long)(call)))
#define ERR(check, call, e) (errno = 0, chk_err((check), (long)(call), (e), 0))
#define ERR2(check, call, e, alt) (errno = 0, chk_err((check), (long)(call), (e), (alt)))
#define EQ(check, call, want) (errno = 0, chk_eq((check), (long)(call), (long)(want)))

/* An object's times, taken by snap(). */
struct snap {
    int err; /* errno of the lstat, 0 if it worked */
    struct stat st;
};

enum which { ATIME, MTIME, CTIME };

/* Run the following block in a child process as UID/GID (groups: GID and EXTRA when
 * nonzero); the parent waits for it. Use as AS(U1, G1) { ... } and never leave the block
 * with break/return/goto. */
#define AS_G(uid, gid, extra) \
    for (int as_once_ = as_begin((uid), (gid), (extra)); as_once_; as_once_ = as_end())
#define AS(uid, gid) AS_G((uid), (gid), 0)

/* ================================================================== posix_lib.c */
/* ------------------------------------------------------------------ reporting */
extern const char *g_case;
extern char g_base[PATH_MAX];
extern int g_child;    /* set in a forked identity child */
extern int g_children; /* identity children started in this case */
const char *ename(int e);
void report(const char *check, int ok, const char *fmt, ...);
void setup_failed(const char *what, const char *path);
long chk_ok(const char *check, long r);
long chk_err(const char *check, long r, int want, int alt);
void chk_eq(const char *check, long got, long want);
void chk_true(const char *check, int cond, const char *want, const char *got);

/* ------------------------------------------------------------------ attributes */
int get(const char *check, const char *path, struct stat *st, int follow);
const char *tname(mode_t m);
void chk_type(const char *check, const char *path, mode_t type);
void chk_mode(const char *check, const char *path, mode_t want);
void chk_owner(const char *check, const char *path, uid_t uid, gid_t gid);
void chk_gid(const char *check, const char *path, gid_t gid);
void chk_nlink(const char *check, const char *path, unsigned long n);
void chk_size(const char *check, const char *path, long long size);
void chk_rdev(const char *check, const char *path, dev_t rdev);
void chk_exists(const char *check, const char *path);
void chk_absent(const char *check, const char *path);
ino_t ino_of(const char *path, int follow);
void chk_same(const char *check, const char *path, const char *other, int follow);
void chk_content(const char *check, const char *path, const char *want);

/* ------------------------------------------------------------------ times */
struct snap snap(const char *path);
int ts_cmp(struct timespec a, struct timespec b);
struct timespec ts_of(const struct snap *s, enum which w);
void chk_later(const char *check, struct snap before, struct snap after, enum which w);
void chk_kept(const char *check, struct snap before, struct snap after, enum which w);
void chk_time(const char *check, const char *path, enum which w, struct timespec t);
void chk_now(const char *check, const char *path, enum which w);
void tick(void);

/* ------------------------------------------------------------------ setup helpers */
void mkfo(const char *path, mode_t mode, uid_t uid, gid_t gid, const char *content);
void mkf(const char *path, mode_t mode, const char *content);
void mkdo(const char *path, mode_t mode, uid_t uid, gid_t gid);
void mkd(const char *path, mode_t mode);
void mkl(const char *target, const char *path);
void mkn(const char *path, mode_t mode, dev_t dev);
void cl(int fd);
int listed(const char *dir, const char *name, ino_t *ino);
const char *dtname(int t);
void chk_listed(const char *check, const char *dir, const char *name, int dtype);
long od(const char *path);

/* ------------------------------------------------------------------ identity */
int as_begin(uid_t uid, gid_t gid, gid_t extra);
int as_end(void);

/* ================================================================== cases */

/* posix_create.c */
void c_open(void);
void c_open_perm(void);
void c_owner(void);
void c_umask(void);
void c_mkdir(void);
void c_rmdir(void);
void c_unlink(void);
/* posix_rename.c */
void c_rename_file(void);
void c_rename_dir(void);
void c_rename_sticky(void);
void c_link(void);
void c_symlink(void);
/* posix_attrs.c */
void c_chmod(void);
void c_chown(void);
void c_truncate(void);
void c_utimes(void);
void c_access(void);
/* posix_special.c */
void c_mknod(void);
void c_special_ops(void);
void c_socket(void);
void c_readdir(void);
void c_names(void);
void c_pathmax(void);
void c_prefix_errors(void);
void c_eloop(void);
/* posix_times.c */
void c_times(void);
void c_suid_clear(void);
void c_setgid_dir(void);
void c_symlink_attrs(void);
void c_chdir(void);

#endif
