/*
 * posixtest cases (see posixtest.c): Attributes and permissions: chmod, chown, truncate, utimes, access.
 */
#include "posixtest.h"

void c_chmod(void) {
    mkf("f", 0644, "x");
    mkd("d", 0755);
    mkl("f", "l");
    OK("chmod_0", chmod("f", 0));
    chk_mode("chmod_0_mode", "f", 0);
    OK("chmod_0777", chmod("f", 0777));
    chk_mode("chmod_0777_mode", "f", 0777);
    OK("chmod_07777", chmod("f", 07777));
    chk_mode("chmod_07777_mode", "f", 07777);
    OK("chmod_04755", chmod("f", 04755));
    chk_mode("chmod_04755_mode", "f", 04755);
    OK("chmod_type_bits_ignored", chmod("f", S_IFDIR | 0640));
    chk_type("chmod_type_bits_ignored_type", "f", S_IFREG);
    chk_mode("chmod_type_bits_ignored_mode", "f", 0640);
    OK("dir_01777", chmod("d", 01777));
    chk_mode("dir_01777_mode", "d", 01777);
    OK("dir_02755", chmod("d", 02755));
    chk_mode("dir_02755_mode", "d", 02755);
    OK("via_symlink", chmod("l", 0600));
    chk_mode("via_symlink_target_changed", "f", 0600);
    chk_mode("via_symlink_link_unchanged", "l", 0777);
    int fd = open("f", O_RDONLY);
    OK("fchmod", fchmod(fd, 0640));
    chk_mode("fchmod_mode", "f", 0640);
    cl(fd);
    OK("fchmodat", fchmodat(AT_FDCWD, "f", 0604, 0));
    chk_mode("fchmodat_mode", "f", 0604);
    OK("fchmodat_NOFOLLOW_file", fchmodat(AT_FDCWD, "f", 0644, AT_SYMLINK_NOFOLLOW));
    chk_mode("fchmodat_NOFOLLOW_file_mode", "f", 0644);
    ERR("fchmodat_NOFOLLOW_symlink_EOPNOTSUPP", fchmodat(AT_FDCWD, "l", 0600, AT_SYMLINK_NOFOLLOW),
        EOPNOTSUPP);
    chk_mode("fchmodat_NOFOLLOW_symlink_target_kept", "f", 0644);
    ERR("missing_ENOENT", chmod("missing", 0644), ENOENT);
    ERR("fchmod_bad_fd_EBADF", fchmod(987, 0644), EBADF);
    mkfo("mine", 0644, U1, G1, "x");
    mkfo("mine_g0", 0644, U1, 0, "x");
    mkf("rootf", 0644, "x");
    AS(U1, G1) {
        ERR("other_EPERM", chmod("rootf", 0777), EPERM);
        int rfd = open("rootf", O_RDONLY);
        ERR("fchmod_other_EPERM", fchmod(rfd, 0777), EPERM);
        cl(rfd);
        OK("owner", chmod("mine", 0600));
        OK("owner_setgid_member", chmod("mine", 02755));
        OK("owner_setgid_not_member", chmod("mine_g0", 02755));
        OK("owner_setuid", chmod("mine_g0", 04755));
    }
    chk_mode("other_EPERM_mode_kept", "rootf", 0644);
    chk_mode("owner_setgid_member_mode", "mine", 02755);
    chk_mode("owner_setuid_mode", "mine_g0", 04755);
    mkfo("mine2", 0644, U1, 0, "x");
    AS(U1, G1) {
        OK("owner_setgid_not_member_cleared", chmod("mine2", 02755));
    }
    chk_mode("owner_setgid_not_member_cleared_mode", "mine2", 0755);
}

void c_chown(void) {
    mkf("f", 0644, "x");
    mkl("f", "l");
    OK("root_uid_gid", chown("f", U1, G1));
    chk_owner("root_uid_gid_owner", "f", U1, G1);
    OK("root_minus1", chown("f", (uid_t)-1, (gid_t)-1));
    chk_owner("root_minus1_owner_kept", "f", U1, G1);
    OK("root_uid_only", chown("f", U2, (gid_t)-1));
    chk_owner("root_uid_only_owner", "f", U2, G1);
    OK("root_gid_only", chown("f", (uid_t)-1, G2));
    chk_owner("root_gid_only_owner", "f", U2, G2);
    OK("lchown", lchown("l", U1, G1));
    chk_owner("lchown_link_owner", "l", U1, G1);
    chk_owner("lchown_target_kept", "f", U2, G2);
    OK("via_symlink", chown("l", 0, 0));
    chk_owner("via_symlink_target_owner", "f", 0, 0);
    chk_owner("via_symlink_link_kept", "l", U1, G1);
    OK("fchownat_NOFOLLOW", fchownat(AT_FDCWD, "l", U2, G2, AT_SYMLINK_NOFOLLOW));
    chk_owner("fchownat_NOFOLLOW_link_owner", "l", U2, G2);
    chk_owner("fchownat_NOFOLLOW_target_kept", "f", 0, 0);
    int fd = open("f", O_RDONLY);
    OK("fchown", fchown(fd, U1, G2));
    chk_owner("fchown_owner", "f", U1, G2);
    cl(fd);
    ERR("missing_ENOENT", chown("missing", 0, 0), ENOENT);
    ERR("fchown_bad_fd_EBADF", fchown(987, 0, 0), EBADF);
    mkf("s", 06755, "x");
    OK("root_setid_file", chown("s", U1, (gid_t)-1));
    chk_mode("root_clears_setuid_setgid", "s", 0755);
    mkf("s2", 02745, "x");
    OK("root_setgid_no_group_exec", chown("s2", U1, (gid_t)-1));
    chk_mode("root_keeps_setgid_without_group_exec", "s2", 02745);
    mkd("sd", 06755);
    OK("root_setid_dir", chown("sd", U1, (gid_t)-1));
    chk_mode("root_dir_keeps_setid", "sd", 06755);
    mkfo("mine", 0644, U1, 0, "x");
    mkfo("mine_s", 06755, U1, G1, "x");
    mkf("rootf", 0644, "x");
    mkl("rootf", "rootl");
    AS_G(U1, G1, GX) {
        ERR("nonroot_give_away_EPERM", chown("mine", U2, (gid_t)-1), EPERM);
        ERR("nonroot_other_file_EPERM", chown("rootf", U1, G1), EPERM);
        ERR("nonroot_group_not_member_EPERM", chown("mine", (uid_t)-1, G2), EPERM);
        OK("nonroot_group_primary", chown("mine", (uid_t)-1, G1));
        OK("nonroot_group_supplementary", chown("mine", (uid_t)-1, GX));
        OK("nonroot_same_uid", chown("mine", U1, (gid_t)-1));
        OK("nonroot_setid_file", chown("mine_s", (uid_t)-1, GX));
        ERR("nonroot_lchown_other_EPERM", lchown("rootl", U1, G1), EPERM);
    }
    chk_owner("nonroot_final_owner", "mine", U1, GX);
    chk_mode("nonroot_clears_setuid_setgid", "mine_s", 0755);
    chk_owner("nonroot_other_file_owner_kept", "rootf", 0, 0);
}

void c_truncate(void) {
    char b[16];
    mkf("f", 0644, "hello");
    mkd("d", 0755);
    mkl("f", "l");
    OK("grow", truncate("f", 1000));
    chk_size("grow_size", "f", 1000);
    int fd = open("f", O_RDONLY);
    memset(b, 1, sizeof b);
    EQ("grow_zero_filled", fd >= 0 && pread(fd, b, 8, 5) == 8 && b[0] == 0 && b[7] == 0, 1);
    cl(fd);
    OK("shrink", truncate("f", 3));
    chk_size("shrink_size", "f", 3);
    chk_content("shrink_content", "f", "hel");
    OK("via_symlink", truncate("l", 7));
    chk_size("via_symlink_size", "f", 7);
    chk_type("via_symlink_link_kept", "l", S_IFLNK);
    OK("zero", truncate("f", 0));
    chk_size("zero_size", "f", 0);
    ERR("dir_EISDIR", truncate("d", 0), EISDIR);
    ERR("negative_EINVAL", truncate("f", -1), EINVAL);
    ERR("missing_ENOENT", truncate("missing", 0), ENOENT);
    if (mkfifo("p", 0644) < 0) setup_failed("mkfifo", "p");
    ERR("fifo_EINVAL", truncate("p", 0), EINVAL);
    fd = open("f", O_RDONLY);
    ERR("ftruncate_O_RDONLY_EINVAL", ftruncate(fd, 0), EINVAL);
    cl(fd);
    fd = open("d", O_RDONLY | O_DIRECTORY);
    ERR("ftruncate_dir_EINVAL", ftruncate(fd, 0), EINVAL);
    cl(fd);
    fd = open("f", O_RDWR);
    OK("ftruncate_grow", ftruncate(fd, 4096));
    chk_size("ftruncate_grow_size", "f", 4096);
    struct stat st;
    EQ("ftruncate_grow_fstat_size", fd >= 0 && fstat(fd, &st) == 0 ? (long)st.st_size : -1, 4096);
    ERR("ftruncate_negative_EINVAL", ftruncate(fd, -5), EINVAL);
    OK("ftruncate_shrink", ftruncate(fd, 10));
    chk_size("ftruncate_shrink_size", "f", 10);
    cl(fd);
    ERR("ftruncate_bad_fd_EBADF", ftruncate(987, 0), EBADF);
    mkf("w666", 0666, "x");
    AS(U1, G1) {
        ERR("other_0644_EACCES", truncate("f", 0), EACCES);
        OK("other_0666", truncate("w666", 3));
    }
    chk_size("other_0644_size_kept", "f", 10);
    chk_size("other_0666_size", "w666", 3);
}

void c_utimes(void) {
    struct timespec t[2] = {{1000000000, 123456789}, {1100000000, 987654321}};
    mkf("f", 0644, "x");
    OK("explicit", utimensat(AT_FDCWD, "f", t, 0));
    chk_time("explicit_atime", "f", ATIME, t[0]);
    chk_time("explicit_mtime", "f", MTIME, t[1]);
    chk_now("explicit_ctime_now", "f", CTIME);
    struct timespec t2[2] = {{0, UTIME_OMIT}, {1200000000, 5}};
    OK("omit_atime", utimensat(AT_FDCWD, "f", t2, 0));
    chk_time("omit_atime_kept", "f", ATIME, t[0]);
    chk_time("omit_atime_mtime_set", "f", MTIME, t2[1]);
    struct timespec t3[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
    OK("now_atime", utimensat(AT_FDCWD, "f", t3, 0));
    chk_now("now_atime_set", "f", ATIME);
    chk_time("now_atime_mtime_kept", "f", MTIME, t2[1]);
    OK("null_times", utimensat(AT_FDCWD, "f", NULL, 0));
    chk_now("null_times_atime", "f", ATIME);
    chk_now("null_times_mtime", "f", MTIME);
    struct timeval tv[2] = {{1300000000, 250000}, {1300000001, 500000}};
    OK("utimes", utimes("f", tv));
    chk_time("utimes_mtime_usec", "f", MTIME, (struct timespec){1300000001, 500000000});
    int fd = open("f", O_RDONLY);
    OK("futimens", futimens(fd, t));
    chk_time("futimens_mtime", "f", MTIME, t[1]);
    cl(fd);
    struct timespec old[2] = {{-1000, 0}, {-100000, 42}};
    OK("pre_epoch", utimensat(AT_FDCWD, "f", old, 0));
    chk_time("pre_epoch_mtime", "f", MTIME, old[1]);
    struct timespec y2038[2] = {{2200000000LL, 0}, {4000000000LL, 7}};
    OK("after_2038", utimensat(AT_FDCWD, "f", y2038, 0));
    chk_time("after_2038_mtime", "f", MTIME, y2038[1]);
    ERR("missing_ENOENT", utimensat(AT_FDCWD, "missing", NULL, 0), ENOENT);
    struct timespec bad[2] = {{0, 1000000000}, {0, 0}};
    ERR("nsec_1e9_EINVAL", utimensat(AT_FDCWD, "f", bad, 0), EINVAL);
    struct timespec neg[2] = {{0, 0}, {0, -1}};
    ERR("nsec_negative_EINVAL", utimensat(AT_FDCWD, "f", neg, 0), EINVAL);
    ERR("bad_flag_EINVAL", utimensat(AT_FDCWD, "f", NULL, 0x4), EINVAL);
    mkd("d", 0755);
    OK("dir", utimensat(AT_FDCWD, "d", t, 0));
    chk_time("dir_mtime", "d", MTIME, t[1]);
    mkf("w666", 0666, "x");
    mkf("r644", 0644, "x");
    mkfo("own444", 0444, U1, G1, "x");
    AS(U1, G1) {
        OK("writer_null_times", utimensat(AT_FDCWD, "w666", NULL, 0));
        struct timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
        OK("writer_UTIME_NOW", utimensat(AT_FDCWD, "w666", now, 0));
        ERR("writer_explicit_EPERM", utimensat(AT_FDCWD, "w666", t, 0), EPERM);
        ERR("other_null_times_EACCES", utimensat(AT_FDCWD, "r644", NULL, 0), EACCES);
        ERR("other_explicit_EPERM", utimensat(AT_FDCWD, "r644", t, 0), EPERM);
        OK("owner_explicit_readonly_file", utimensat(AT_FDCWD, "own444", t, 0));
        OK("owner_null_times_readonly_file", utimensat(AT_FDCWD, "own444", NULL, 0));
        int wfd = open("w666", O_RDONLY);
        ERR("writer_futimens_explicit_EPERM", futimens(wfd, t), EPERM);
        cl(wfd);
    }
    chk_now("writer_null_times_mtime", "w666", MTIME);
}

void c_access(void) {
    mkf("x755", 0755, "x");
    mkf("r644", 0644, "x");
    mkf("r600", 0600, "x");
    mkf("n000", 0000, "x");
    mkf("x100", 0100, "x");
    mkd("d644", 0644);
    mkd("d700", 0700);
    mkf("d700/f", 0644, "x");
    mkl("nowhere", "dangling");
    mkfo("mine", 0600, U1, G1, "x");
    OK("F_OK", access("r644", F_OK));
    ERR("F_OK_missing_ENOENT", access("missing", F_OK), ENOENT);
    ERR("F_OK_dangling_ENOENT", access("dangling", F_OK), ENOENT);
    OK("faccessat_NOFOLLOW_dangling", faccessat(AT_FDCWD, "dangling", F_OK, AT_SYMLINK_NOFOLLOW));
    OK("root_RW_on_0000", access("n000", R_OK | W_OK));
    ERR("root_X_on_0644_EACCES", access("r644", X_OK), EACCES);
    OK("root_X_on_0755", access("x755", X_OK));
    OK("root_X_on_0100", access("x100", X_OK));
    OK("root_X_on_dir_0644", access("d644", X_OK));
    OK("faccessat_AT_EACCESS", faccessat(AT_FDCWD, "r644", R_OK, AT_EACCESS));
    ERR("bad_mode_EINVAL", access("r644", 0100), EINVAL);
    ERR("file_prefix_ENOTDIR", access("r644/x", F_OK), ENOTDIR);
    AS(U1, G1) {
        ERR("other_R_0600_EACCES", access("r600", R_OK), EACCES);
        ERR("other_W_0644_EACCES", access("r644", W_OK), EACCES);
        OK("other_R_0644", access("r644", R_OK));
        OK("other_X_0755", access("x755", X_OK));
        ERR("other_X_0644_EACCES", access("r644", X_OK), EACCES);
        ERR("other_R_0000_EACCES", access("n000", R_OK), EACCES);
        OK("other_F_OK_0000", access("n000", F_OK));
        ERR("no_search_EACCES", access("d700/f", F_OK), EACCES);
        OK("owner_RW_0600", access("mine", R_OK | W_OK));
        ERR("owner_X_0600_EACCES", access("mine", X_OK), EACCES);
    }
}
