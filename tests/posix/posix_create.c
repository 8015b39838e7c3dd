/*
 * posixtest cases (see posixtest.c): Creating and removing: open (flags, permissions), the owner of new objects, the
 * umask, mkdir, rmdir, unlink.
 */
#include "posixtest.h"

void c_open(void) {
    int fd;
    char b[8];
    ERR("missing_ENOENT", open("missing", O_RDONLY), ENOENT);
    fd = OK("O_CREAT", open("f", O_CREAT | O_WRONLY, 0666));
    if (fd >= 0) EQ("O_CREAT_write", write(fd, "0123456789", 10), 10);
    cl(fd);
    chk_type("O_CREAT_type", "f", S_IFREG);
    chk_mode("O_CREAT_mode_umask", "f", 0644);
    chk_size("O_CREAT_size", "f", 10);
    chk_nlink("O_CREAT_nlink", "f", 1);
    ERR("O_EXCL_existing_EEXIST", open("f", O_CREAT | O_EXCL | O_WRONLY, 0644), EEXIST);
    mkl("nowhere", "dangling");
    ERR("O_EXCL_dangling_symlink_EEXIST", open("dangling", O_CREAT | O_EXCL | O_WRONLY, 0644), EEXIST);
    chk_absent("O_EXCL_dangling_symlink_no_target", "nowhere");
    cl(OK("O_CREAT_existing", open("f", O_CREAT | O_RDWR, 0600)));
    chk_size("O_CREAT_existing_keeps_data", "f", 10);
    chk_mode("O_CREAT_existing_keeps_mode", "f", 0644);
    cl(OK("O_TRUNC", open("f", O_TRUNC | O_WRONLY)));
    chk_size("O_TRUNC_size", "f", 0);
    cl(OK("O_CREAT_dangling_symlink", open("dangling", O_CREAT | O_WRONLY, 0644)));
    chk_type("O_CREAT_dangling_symlink_creates_target", "nowhere", S_IFREG);
    mkd("d", 0755);
    mkf("d/g", 0644, "g");
    ERR("O_DIRECTORY_file_ENOTDIR", open("f", O_RDONLY | O_DIRECTORY), ENOTDIR);
    cl(OK("O_DIRECTORY_dir", open("d", O_RDONLY | O_DIRECTORY)));
    cl(OK("dir_O_RDONLY", open("d", O_RDONLY)));
    ERR("dir_O_WRONLY_EISDIR", open("d", O_WRONLY), EISDIR);
    ERR("dir_O_RDWR_EISDIR", open("d", O_RDWR), EISDIR);
    ERR("dir_O_CREAT_EISDIR", open("d", O_CREAT | O_WRONLY, 0644), EISDIR);
    ERR("dir_O_CREAT_RDONLY_EISDIR", open("d", O_CREAT | O_RDONLY, 0644), EISDIR);
    ERR("O_CREAT_O_DIRECTORY_EINVAL", open("nd", O_CREAT | O_DIRECTORY | O_RDONLY, 0755), EINVAL);
    mkl("f", "lf");
    mkl("d", "ld");
    ERR("O_NOFOLLOW_symlink_ELOOP", open("lf", O_RDONLY | O_NOFOLLOW), ELOOP);
    cl(OK("O_NOFOLLOW_file", open("f", O_RDONLY | O_NOFOLLOW)));
    cl(OK("O_NOFOLLOW_symlink_in_prefix", open("ld/g", O_RDONLY | O_NOFOLLOW)));
    cl(OK("via_symlink", open("lf", O_RDONLY)));
    cl(OK("O_PATH_O_NOFOLLOW_symlink", open("lf", O_PATH | O_NOFOLLOW)));
    ERR("file_as_dir_ENOTDIR", open("f/x", O_RDONLY), ENOTDIR);
    ERR("file_as_dir_O_CREAT_ENOTDIR", open("f/x", O_CREAT | O_WRONLY, 0644), ENOTDIR);
    ERR("missing_dir_ENOENT", open("nodir/x", O_RDONLY), ENOENT);
    ERR("missing_dir_O_CREAT_ENOENT", open("nodir/x", O_CREAT | O_WRONLY, 0644), ENOENT);
    ERR("file_trailing_slash_ENOTDIR", open("f/", O_RDONLY), ENOTDIR);
    ERR("O_CREAT_trailing_slash_EISDIR", open("new/", O_CREAT | O_WRONLY, 0644), EISDIR);
    ERR("empty_path_ENOENT", open("", O_RDONLY), ENOENT);
    fd = open("f", O_RDONLY);
    ERR("write_O_RDONLY_EBADF", write(fd, "x", 1), EBADF);
    cl(fd);
    fd = open("f", O_WRONLY);
    ERR("read_O_WRONLY_EBADF", read(fd, b, 1), EBADF);
    cl(fd);
    mkf("a", 0644, "ab");
    fd = OK("O_APPEND", open("a", O_WRONLY | O_APPEND));
    if (fd >= 0) {
        lseek(fd, 0, SEEK_SET);
        EQ("O_APPEND_write", write(fd, "c", 1), 1);
        EQ("O_APPEND_offset_at_end", lseek(fd, 0, SEEK_CUR), 3);
    }
    cl(fd);
    chk_content("O_APPEND_appends", "a", "abc");
    fd = OK("creat", creat("c", 0640));
    if (fd >= 0) EQ("creat_is_O_WRONLY", fcntl(fd, F_GETFL) & O_ACCMODE, O_WRONLY);
    cl(fd);
    chk_mode("creat_mode", "c", 0640);
    cl(OK("creat_existing", creat("a", 0600)));
    chk_size("creat_existing_truncates", "a", 0);
    chk_mode("creat_existing_keeps_mode", "a", 0644);
    int dfd = open("d", O_RDONLY | O_DIRECTORY);
    cl(OK("openat_dirfd", openat(dfd, "g", O_RDONLY)));
    cl(OK("openat_dirfd_O_CREAT", openat(dfd, "h", O_CREAT | O_WRONLY, 0644)));
    chk_type("openat_dirfd_O_CREAT_in_dir", "d/h", S_IFREG);
    cl(dfd);
    fd = open("f", O_RDONLY);
    ERR("openat_file_dirfd_ENOTDIR", openat(fd, "x", O_RDONLY), ENOTDIR);
    cl(fd);
    ERR("openat_bad_dirfd_EBADF", openat(987, "x", O_RDONLY), EBADF);
    fd = open("f", O_RDWR);
    if (fd >= 0) {
        EQ("pwrite", pwrite(fd, "xyz", 3, 5), 3);
        chk_size("pwrite_past_end_grows", "f", 8);
        EQ("pread_hole_zero", pread(fd, b, 8, 0) == 8 && b[0] == 0 && b[4] == 0 && b[5] == 'x', 1);
    }
    cl(fd);
}

void c_open_perm(void) {
    mkf("r600", 0600, "x");
    mkf("r604", 0604, "x");
    mkfo("r640g", 0640, 0, G1, "x");
    mkfo("o060", 0060, U1, G1, "x");
    mkf("r000", 0000, "x");
    mkd("d700", 0700);
    mkf("d700/f", 0644, "x");
    mkd("d711", 0711);
    mkf("d711/f", 0644, "x");
    mkd("d755", 0755);
    mkd("d777", 0777);
    cl(OK("root_read_0000", open("r000", O_RDONLY)));
    cl(OK("root_write_0000", open("r000", O_WRONLY)));
    AS(U1, G1) {
        ERR("other_read_0600_EACCES", open("r600", O_RDONLY), EACCES);
        ERR("other_write_0600_EACCES", open("r600", O_WRONLY), EACCES);
        cl(OK("other_read_0604", open("r604", O_RDONLY)));
        ERR("other_write_0604_EACCES", open("r604", O_WRONLY), EACCES);
        ERR("other_rdwr_0604_EACCES", open("r604", O_RDWR), EACCES);
        ERR("other_O_TRUNC_0604_EACCES", open("r604", O_RDONLY | O_TRUNC), EACCES);
        cl(OK("group_read_0640", open("r640g", O_RDONLY)));
        ERR("group_write_0640_EACCES", open("r640g", O_WRONLY), EACCES);
        ERR("owner_class_first_0060_EACCES", open("o060", O_RDONLY), EACCES);
        ERR("other_read_0000_EACCES", open("r000", O_RDONLY), EACCES);
        ERR("no_search_0700_EACCES", open("d700/f", O_RDONLY), EACCES);
        cl(OK("search_only_0711", open("d711/f", O_RDONLY)));
        ERR("list_0711_EACCES", open("d711", O_RDONLY | O_DIRECTORY), EACCES);
        ERR("create_in_0755_EACCES", open("d755/new", O_CREAT | O_WRONLY, 0644), EACCES);
        ERR("O_EXCL_existing_EEXIST", open("r600", O_CREAT | O_EXCL | O_WRONLY, 0644), EEXIST);
        cl(OK("create_in_0777", open("d777/mine", O_CREAT | O_EXCL | O_WRONLY, 0600)));
        cl(OK("owner_reopen_0600", open("d777/mine", O_RDWR)));
    }
    chk_absent("create_in_0755_nothing_created", "d755/new");
    chk_owner("create_in_0777_owner", "d777/mine", U1, G1);
}

void c_owner(void) {
    mkd("w", 0777);
    AS(U1, G1) {
        cl(OK("create_file", open("w/f", O_CREAT | O_WRONLY, 0644)));
        OK("mkdir", mkdir("w/d", 0755));
        OK("symlink", symlink("f", "w/l"));
        OK("mkfifo", mkfifo("w/p", 0644));
        OK("mknod_socket", mknod("w/s", S_IFSOCK | 0644, 0));
        OK("link", link("w/f", "w/h"));
    }
    chk_owner("file_owner", "w/f", U1, G1);
    chk_owner("dir_owner", "w/d", U1, G1);
    chk_owner("symlink_owner", "w/l", U1, G1);
    chk_owner("fifo_owner", "w/p", U1, G1);
    chk_owner("socket_owner", "w/s", U1, G1);
    chk_owner("hard_link_same_owner", "w/h", U1, G1);
    AS_G(U2, G2, GX) {
        cl(OK("other_user_create_file", open("w/f2", O_CREAT | O_WRONLY, 0644)));
        OK("other_user_mkdir", mkdir("w/d2", 0755));
    }
    chk_owner("primary_gid_not_supplementary_file", "w/f2", U2, G2);
    chk_owner("primary_gid_not_supplementary_dir", "w/d2", U2, G2);
    cl(OK("root_create_file", open("rf", O_CREAT | O_WRONLY, 0644)));
    chk_owner("root_file_owner", "rf", 0, 0);
}

void c_umask(void) {
    umask(0);
    cl(OK("umask0_file_0777", open("f777", O_CREAT | O_WRONLY, 0777)));
    chk_mode("umask0_file_mode_0777", "f777", 0777);
    OK("umask0_mkdir_0777", mkdir("d777", 0777));
    chk_mode("umask0_mkdir_mode_0777", "d777", 0777);
    OK("umask0_mkfifo_0777", mkfifo("p777", 0777));
    chk_mode("umask0_mkfifo_mode_0777", "p777", 0777);
    OK("umask0_mknod_0666", mknod("n666", S_IFREG | 0666, 0));
    chk_mode("umask0_mknod_mode_0666", "n666", 0666);
    cl(OK("umask0_file_04755", open("suid", O_CREAT | O_WRONLY, 04755)));
    chk_mode("umask0_file_mode_04755", "suid", 04755);
    OK("umask0_mkdir_sticky", mkdir("dsticky", 01777));
    chk_mode("umask0_mkdir_keeps_sticky", "dsticky", 01777);
    OK("umask0_mkdir_07777", mkdir("d7777", 07777));
    chk_mode("umask0_mkdir_drops_setid", "d7777", 01777);
    umask(022);
    cl(OK("umask022_file", open("f022", O_CREAT | O_WRONLY, 0777)));
    chk_mode("umask022_file_mode", "f022", 0755);
    OK("umask022_mkdir", mkdir("d022", 0777));
    chk_mode("umask022_mkdir_mode", "d022", 0755);
    umask(077);
    cl(OK("umask077_file", open("f077", O_CREAT | O_WRONLY, 0666)));
    chk_mode("umask077_file_mode", "f077", 0600);
    OK("umask077_mkdir", mkdir("d077", 0777));
    chk_mode("umask077_mkdir_mode", "d077", 0700);
    OK("umask077_symlink", symlink("x", "l077"));
    chk_mode("umask077_symlink_mode_0777", "l077", 0777);
    umask(0272);
    cl(OK("umask0272_file", open("f272", O_CREAT | O_WRONLY, 0777)));
    chk_mode("umask0272_file_mode", "f272", 0505);
    EQ("umask_returns_previous", umask(022), 0272);
}

void c_mkdir(void) {
    struct snap p0 = snap(".");
    tick();
    OK("mkdir", mkdir("d", 0755));
    chk_type("mkdir_type", "d", S_IFDIR);
    chk_mode("mkdir_mode", "d", 0755);
    chk_nlink("mkdir_nlink_2", "d", 2);
    chk_nlink("mkdir_parent_nlink_3", ".", 3);
    struct snap p1 = snap(".");
    chk_later("mkdir_parent_mtime", p0, p1, MTIME);
    chk_later("mkdir_parent_ctime", p0, p1, CTIME);
    chk_listed("mkdir_listed", ".", "d", DT_DIR);
    mkf("f", 0644, "x");
    mkl("nowhere", "dangling");
    ERR("existing_dir_EEXIST", mkdir("d", 0755), EEXIST);
    ERR("existing_file_EEXIST", mkdir("f", 0755), EEXIST);
    ERR("dangling_symlink_EEXIST", mkdir("dangling", 0755), EEXIST);
    chk_absent("dangling_symlink_target_not_created", "nowhere");
    ERR("missing_parent_ENOENT", mkdir("nodir/x", 0755), ENOENT);
    ERR("file_parent_ENOTDIR", mkdir("f/x", 0755), ENOTDIR);
    ERR("empty_ENOENT", mkdir("", 0755), ENOENT);
    ERR("dot_EEXIST", mkdir(".", 0755), EEXIST);
    OK("trailing_slash", mkdir("t/", 0755));
    chk_type("trailing_slash_type", "t", S_IFDIR);
    OK("nested", mkdir("d/e", 0700));
    chk_nlink("nested_parent_nlink_3", "d", 3);
    int dfd = open("d", O_RDONLY | O_DIRECTORY);
    OK("mkdirat_dirfd", mkdirat(dfd, "at", 0755));
    chk_type("mkdirat_dirfd_in_dir", "d/at", S_IFDIR);
    cl(dfd);
    int fd = open("f", O_RDONLY);
    ERR("mkdirat_file_dirfd_ENOTDIR", mkdirat(fd, "x", 0755), ENOTDIR);
    cl(fd);
    ERR("mkdirat_bad_dirfd_EBADF", mkdirat(987, "x", 0755), EBADF);
    mkd("ro", 0755);
    AS(U1, G1) {
        ERR("no_write_EACCES", mkdir("ro/x", 0755), EACCES);
    }
}

void c_rmdir(void) {
    mkd("d", 0755);
    mkd("full", 0755);
    mkf("full/f", 0644, "x");
    mkf("f", 0644, "x");
    mkl("d", "ld");
    struct snap p0 = snap(".");
    tick();
    OK("rmdir", rmdir("d"));
    chk_absent("rmdir_gone", "d");
    struct snap p1 = snap(".");
    chk_nlink("rmdir_parent_nlink", ".", 3);
    chk_later("rmdir_parent_mtime", p0, p1, MTIME);
    chk_later("rmdir_parent_ctime", p0, p1, CTIME);
    ERR2("nonempty_ENOTEMPTY", rmdir("full"), ENOTEMPTY, EEXIST);
    ERR("file_ENOTDIR", rmdir("f"), ENOTDIR);
    mkd("d", 0755);
    ERR("symlink_to_dir_ENOTDIR", rmdir("ld"), ENOTDIR);
    ERR("missing_ENOENT", rmdir("missing"), ENOENT);
    ERR("dot_EINVAL", rmdir("."), EINVAL);
    ERR("sub_dot_EINVAL", rmdir("d/."), EINVAL);
    ERR("dotdot_ENOTEMPTY", rmdir(".."), ENOTEMPTY);
    ERR("file_prefix_ENOTDIR", rmdir("f/x"), ENOTDIR);
    OK("trailing_slash", rmdir("d/"));
    chk_absent("trailing_slash_gone", "d");
    mkd("ro", 0755);
    mkd("ro/sub", 0777);
    AS(U1, G1) {
        ERR("no_write_EACCES", rmdir("ro/sub"), EACCES);
    }
}

void c_unlink(void) {
    mkf("f", 0644, "data");
    mkf("g", 0644, "x");
    mkd("d", 0755);
    if (link("f", "f2") < 0) setup_failed("link", "f2");
    mkl("g", "lg");
    struct snap p0 = snap("."), f0 = snap("f");
    tick();
    OK("unlink", unlink("f2"));
    chk_absent("unlink_gone", "f2");
    chk_nlink("other_link_nlink_1", "f", 1);
    chk_later("other_link_ctime", f0, snap("f"), CTIME);
    struct snap p1 = snap(".");
    chk_later("parent_mtime", p0, p1, MTIME);
    chk_later("parent_ctime", p0, p1, CTIME);
    ERR("dir_EISDIR", unlink("d"), EISDIR);
    ERR("missing_ENOENT", unlink("missing"), ENOENT);
    ERR("file_prefix_ENOTDIR", unlink("f/x"), ENOTDIR);
    ERR("missing_prefix_ENOENT", unlink("nodir/x"), ENOENT);
    ERR("file_trailing_slash_ENOTDIR", unlink("f/"), ENOTDIR);
    OK("symlink", unlink("lg"));
    chk_absent("symlink_gone", "lg");
    chk_exists("symlink_target_kept", "g");
    int fd = open("f", O_RDWR);
    OK("open_file", unlink("f"));
    chk_absent("open_file_gone", "f");
    if (fd >= 0) {
        char b[8] = {0};
        struct stat st;
        EQ("open_file_still_readable", pread(fd, b, 4, 0), 4);
        EQ("open_file_still_writable", pwrite(fd, "more", 4, 4), 4);
        EQ("open_file_fstat_nlink_0", fstat(fd, &st) == 0 ? (long)st.st_nlink : -1, 0);
    }
    cl(fd);
    mkd("e", 0755);
    OK("unlinkat_AT_REMOVEDIR", unlinkat(AT_FDCWD, "e", AT_REMOVEDIR));
    chk_absent("unlinkat_AT_REMOVEDIR_gone", "e");
    ERR("unlinkat_AT_REMOVEDIR_file_ENOTDIR", unlinkat(AT_FDCWD, "g", AT_REMOVEDIR), ENOTDIR);
    ERR("unlinkat_bad_flag_EINVAL", unlinkat(AT_FDCWD, "g", 0x4), EINVAL);
    mkd("ro", 0755);
    mkf("ro/f", 0666, "x");
    AS(U1, G1) {
        ERR("no_write_EACCES", unlink("ro/f"), EACCES);
    }
}
