/*
 * posixtest cases (see posixtest.c): Renames (files, directories, sticky directories), hard links and symbolic links.
 */
#include "posixtest.h"

void c_rename_file(void) {
    char b[8] = {0};
    mkf("a", 0644, "A");
    mkf("b", 0644, "B");
    mkd("d", 0755);
    if (link("b", "b2") < 0) setup_failed("link", "b2");
    ino_t ia = ino_of("a", 0);
    struct snap a0 = snap("a"), p0 = snap(".");
    int fd = open("a", O_RDONLY);
    tick();
    OK("rename", rename("a", "c"));
    chk_absent("rename_old_gone", "a");
    chk_true("rename_same_inode", ino_of("c", 0) == ia, "same inode", "different inode");
    chk_content("rename_content", "c", "A");
    chk_later("renamed_file_ctime", a0, snap("c"), CTIME);
    chk_kept("renamed_file_mtime", a0, snap("c"), MTIME);
    struct snap p1 = snap(".");
    chk_later("parent_mtime", p0, p1, MTIME);
    chk_later("parent_ctime", p0, p1, CTIME);
    if (fd >= 0) EQ("open_fd_survives", pread(fd, b, 1, 0) == 1 && b[0] == 'A', 1);
    cl(fd);
    OK("over_existing", rename("c", "b"));
    chk_true("over_existing_same_inode", ino_of("b", 0) == ia, "same inode", "different inode");
    chk_content("over_existing_content", "b", "A");
    chk_absent("over_existing_old_gone", "c");
    chk_nlink("replaced_file_nlink_drops", "b2", 1);
    OK("onto_itself", rename("b", "b"));
    chk_exists("onto_itself_kept", "b");
    if (link("b", "b3") < 0) setup_failed("link", "b3");
    OK("hard_links_same_inode", rename("b", "b3"));
    chk_exists("hard_links_same_inode_source_kept", "b");
    chk_exists("hard_links_same_inode_target_kept", "b3");
    ERR("over_dir_EISDIR", rename("b", "d"), EISDIR);
    ERR("missing_ENOENT", rename("missing", "z"), ENOENT);
    ERR("into_missing_dir_ENOENT", rename("b", "nodir/z"), ENOENT);
    ERR("to_trailing_slash_ENOTDIR", rename("b", "z/"), ENOTDIR);
    ERR("from_trailing_slash_ENOTDIR", rename("b/", "z"), ENOTDIR);
    ERR("empty_ENOENT", rename("", "z"), ENOENT);
    struct snap d0 = snap("d");
    p0 = snap(".");
    tick();
    OK("into_subdir", rename("b3", "d/b3"));
    chk_later("into_subdir_target_dir_mtime", d0, snap("d"), MTIME);
    chk_later("into_subdir_source_dir_mtime", p0, snap("."), MTIME);
    mkl("d", "ld");
    OK("symlink", rename("ld", "ld2"));
    chk_type("symlink_renamed_itself", "ld2", S_IFLNK);
    chk_type("symlink_target_untouched", "d", S_IFDIR);
    int dfd = open("d", O_RDONLY | O_DIRECTORY);
    OK("renameat_dirfd", renameat(dfd, "b3", AT_FDCWD, "b4"));
    chk_content("renameat_dirfd_moved", "b4", "A");
    cl(dfd);
    mkf("x", 0644, "X");
    mkf("y", 0644, "Y");
    ERR("RENAME_NOREPLACE_EEXIST", renameat2(AT_FDCWD, "x", AT_FDCWD, "y", RENAME_NOREPLACE), EEXIST);
    chk_content("RENAME_NOREPLACE_target_kept", "y", "Y");
    OK("RENAME_NOREPLACE", renameat2(AT_FDCWD, "x", AT_FDCWD, "x2", RENAME_NOREPLACE));
    OK("RENAME_EXCHANGE", renameat2(AT_FDCWD, "x2", AT_FDCWD, "y", RENAME_EXCHANGE));
    chk_content("RENAME_EXCHANGE_swapped_a", "y", "X");
    chk_content("RENAME_EXCHANGE_swapped_b", "x2", "Y");
    ERR("RENAME_EXCHANGE_missing_ENOENT", renameat2(AT_FDCWD, "y", AT_FDCWD, "none", RENAME_EXCHANGE),
        ENOENT);
}

void c_rename_dir(void) {
    mkd("a", 0755);
    mkd("a/sub", 0755);
    mkd("b", 0755);
    mkd("b/full", 0755);
    mkf("b/full/x", 0644, "x");
    mkd("e", 0755);
    mkf("file", 0644, "x");
    ino_t ia = ino_of("a", 0);
    struct snap a0 = snap("a");
    tick();
    OK("rename", rename("a", "a2"));
    chk_absent("rename_old_gone", "a");
    chk_true("rename_same_inode", ino_of("a2", 0) == ia, "same inode", "different inode");
    chk_later("renamed_dir_ctime", a0, snap("a2"), CTIME);
    OK("into_other_dir", rename("a2/sub", "b/sub"));
    chk_nlink("into_other_dir_source_parent_nlink", "a2", 2);
    chk_nlink("into_other_dir_target_parent_nlink", "b", 4);
    chk_same("into_other_dir_dotdot_updated", "b/sub/..", "b", 1);
    ino_t isub = ino_of("b/sub", 0);
    OK("over_empty_dir", rename("b/sub", "e"));
    chk_true("over_empty_dir_same_inode", ino_of("e", 0) == isub, "same inode", "different inode");
    chk_nlink("over_empty_dir_parent_nlink", "b", 3);
    ERR2("over_nonempty_ENOTEMPTY", rename("e", "b/full"), ENOTEMPTY, EEXIST);
    ERR("over_file_ENOTDIR", rename("e", "file"), ENOTDIR);
    ERR("file_over_dir_EISDIR", rename("file", "e"), EISDIR);
    ERR("into_own_subdir_EINVAL", rename("b", "b/full/b"), EINVAL);
    ERR("into_itself_EINVAL", rename("b", "b/b"), EINVAL);
    ERR2("onto_ancestor_ENOTEMPTY", rename("b/full", "b"), ENOTEMPTY, EEXIST);
    OK("onto_itself", rename("e", "e"));
    OK("trailing_slashes", rename("e/", "e2/"));
    chk_type("trailing_slashes_moved", "e2", S_IFDIR);
    ERR2("dot_EBUSY", rename(".", "x"), EBUSY, EINVAL);
    ERR2("dotdot_EBUSY", rename("..", "x"), EBUSY, EINVAL);
    ERR2("to_dot_EBUSY", rename("e2", "."), EBUSY, EINVAL);
    ERR("missing_ENOENT", rename("missing", "x"), ENOENT);
    mkd("ro", 0755);
    mkd("w", 0777);
    mkdo("w/sub", 0755, U1, G1);
    AS(U1, G1) {
        ERR("into_unwritable_EACCES", rename("w/sub", "ro/sub"), EACCES);
        OK("own_dir_in_writable", rename("w/sub", "w/sub2"));
    }
}

void c_rename_sticky(void) {
    mkd("t", 01777);
    mkfo("t/u2f", 0644, U2, G2, "x");
    mkfo("t/u1f", 0644, U1, G1, "x");
    mkfo("t/u1g", 0644, U1, G1, "x");
    mkdo("t/u2d", 0755, U2, G2);
    mkd("n", 0777);
    mkfo("n/u2f", 0644, U2, G2, "x");
    mkdo("s1", 01777, U1, G1);
    mkfo("s1/u2f", 0644, U2, G2, "x");
    mkd("ro", 0755);
    mkf("ro/f", 0666, "x");
    mkd("mv", 0777);
    mkdo("mv/u2dir", 0755, U2, G2);
    mkdo("mv/u1dir", 0755, U1, G1);
    AS(U1, G1) {
        ERR("unlink_other_EPERM", unlink("t/u2f"), EPERM);
        ERR("rename_other_EPERM", rename("t/u2f", "t/x"), EPERM);
        ERR("rename_over_other_EPERM", rename("t/u1f", "t/u2f"), EPERM);
        ERR("rmdir_other_EPERM", rmdir("t/u2d"), EPERM);
        ERR("rename_other_out_EPERM", rename("t/u2f", "n/x"), EPERM);
        OK("unlink_own", unlink("t/u1g"));
        OK("rename_own", rename("t/u1f", "t/u1f2"));
        OK("dir_owner_unlinks_other", unlink("s1/u2f"));
        OK("not_sticky_unlink_other", unlink("n/u2f"));
        ERR("no_write_unlink_EACCES", unlink("ro/f"), EACCES);
        ERR("no_write_rename_EACCES", rename("ro/f", "n/f"), EACCES);
        ERR("move_others_dir_EACCES", rename("mv/u2dir", "n/u2dir"), EACCES);
        OK("move_own_dir", rename("mv/u1dir", "n/u1dir"));
    }
    chk_exists("other_file_kept", "t/u2f");
    chk_exists("other_dir_kept", "t/u2d");
    chk_absent("own_file_unlinked", "t/u1g");
    chk_absent("not_sticky_other_unlinked", "n/u2f");
    AS(U2, G2) {
        OK("owner_unlinks_own_in_sticky", unlink("t/u2f"));
    }
}

void c_link(void) {
    mkf("f", 0644, "data");
    mkd("d", 0755);
    mkl("f", "l");
    mkl("nowhere", "dangling");
    OK("link", link("f", "g"));
    chk_nlink("link_nlink_source", "f", 2);
    chk_nlink("link_nlink_new", "g", 2);
    chk_same("link_same_inode", "f", "g", 0);
    chk_content("link_content", "g", "data");
    ERR("existing_EEXIST", link("f", "g"), EEXIST);
    ERR("to_dir_EEXIST", link("f", "d"), EEXIST);
    ERR("to_dangling_symlink_EEXIST", link("f", "dangling"), EEXIST);
    ERR("dir_EPERM", link("d", "d2"), EPERM);
    ERR("missing_ENOENT", link("missing", "x"), ENOENT);
    ERR("into_missing_dir_ENOENT", link("f", "nodir/x"), ENOENT);
    ERR("file_prefix_ENOTDIR", link("f/x", "y"), ENOTDIR);
    ERR("to_trailing_slash_ENOENT", link("f", "z/"), ENOENT);
    OK("symlink_not_followed", link("l", "hl"));
    chk_type("symlink_not_followed_type", "hl", S_IFLNK);
    OK("linkat_AT_SYMLINK_FOLLOW", linkat(AT_FDCWD, "l", AT_FDCWD, "hf", AT_SYMLINK_FOLLOW));
    chk_type("linkat_AT_SYMLINK_FOLLOW_type", "hf", S_IFREG);
    chk_same("linkat_AT_SYMLINK_FOLLOW_inode", "hf", "f", 0);
    chk_nlink("three_links", "f", 3);
    OK("dangling_symlink", link("dangling", "hd"));
    chk_type("dangling_symlink_type", "hd", S_IFLNK);
    OK("unlink_one", unlink("g"));
    chk_nlink("unlink_one_nlink", "f", 2);
    int dfd = open("d", O_RDONLY | O_DIRECTORY);
    OK("linkat_dirfd", linkat(AT_FDCWD, "f", dfd, "in", 0));
    chk_same("linkat_dirfd_inode", "d/in", "f", 0);
    cl(dfd);
    mkd("ro", 0755);
    mkd("w", 0777);
    mkfo("w/mine", 0644, U1, G1, "x");
    mkf("r600", 0600, "x");
    FILE *p = fopen("/proc/sys/fs/protected_hardlinks", "r");
    int protected = 0;
    if (p) {
        if (fscanf(p, "%d", &protected) != 1) protected = 0;
        fclose(p);
    }
    AS(U1, G1) {
        ERR("no_write_EACCES", link("w/mine", "ro/x"), EACCES);
        OK("own_file", link("w/mine", "w/mine2"));
        if (protected)
            ERR("protected_hardlinks_EPERM", link("r600", "w/r600"), EPERM);
        else
            OK("protected_hardlinks_EPERM", link("r600", "w/r600"));
    }
}

void c_symlink(void) {
    char b[PATH_MAX + 2];
    mkf("f", 0644, "data");
    mkd("d", 0755);
    mkf("d/g", 0644, "g");
    OK("symlink", symlink("target-of-l", "l"));
    chk_type("symlink_type", "l", S_IFLNK);
    chk_mode("symlink_mode_0777", "l", 0777);
    chk_size("symlink_size_is_target_length", "l", 11);
    memset(b, 0, sizeof b);
    EQ("readlink", readlink("l", b, sizeof b), 11);
    chk_true("readlink_content", strcmp(b, "target-of-l") == 0, "target-of-l", "other");
    memset(b, 0, sizeof b);
    EQ("readlink_short_buffer_truncates", readlink("l", b, 4), 4);
    chk_true("readlink_short_buffer_content", memcmp(b, "targ", 4) == 0 && b[4] == 0, "targ", "other");
    ERR("existing_symlink_EEXIST", symlink("x", "l"), EEXIST);
    ERR("existing_file_EEXIST", symlink("x", "f"), EEXIST);
    ERR("existing_dir_EEXIST", symlink("x", "d"), EEXIST);
    ERR("readlink_file_EINVAL", readlink("f", b, sizeof b), EINVAL);
    ERR("readlink_dir_EINVAL", readlink("d", b, sizeof b), EINVAL);
    ERR("readlink_missing_ENOENT", readlink("missing", b, sizeof b), ENOENT);
    ERR("empty_target_ENOENT", symlink("", "e"), ENOENT);
    ERR("missing_dir_ENOENT", symlink("x", "nodir/x"), ENOENT);
    struct stat st;
    ERR("dangling_stat_ENOENT", stat("l", &st), ENOENT);
    OK("dangling_lstat", lstat("l", &st));
    mkl("f", "lf");
    mkl("d", "ld");
    chk_same("stat_follows", "lf", "f", 1);
    chk_true("lstat_does_not_follow", ino_of("lf", 0) != ino_of("f", 0), "different inode", "same inode");
    OK("traverse_in_prefix", stat("ld/g", &st));
    mkl("../f", "d/up");
    chk_same("relative_target_dotdot", "d/up", "f", 1);
    mkl("/", "rootlink");
    chk_same("absolute_target", "rootlink", "/", 1);
    chk_content("read_through", "lf", "data");
    int fd = open("lf", O_WRONLY | O_APPEND);
    if (fd >= 0) EQ("write_through", write(fd, "+", 1), 1);
    cl(fd);
    chk_content("write_through_reaches_target", "f", "data+");
    int dfd = open("d", O_RDONLY | O_DIRECTORY);
    OK("symlinkat_dirfd", symlinkat("g", dfd, "lg"));
    memset(b, 0, sizeof b);
    EQ("readlinkat_dirfd", readlinkat(dfd, "lg", b, sizeof b), 1);
    cl(dfd);
    chk_content("symlinkat_dirfd_resolves", "d/lg", "g");
    static char longt[PATH_MAX + 1];
    memset(longt, 'x', PATH_MAX - 1);
    longt[PATH_MAX - 1] = 0; /* 4095 bytes */
    OK("target_4095_bytes", symlink(longt, "long"));
    EQ("target_4095_bytes_readlink", readlink("long", b, sizeof b), PATH_MAX - 1);
    chk_size("target_4095_bytes_size", "long", PATH_MAX - 1);
    longt[PATH_MAX - 1] = 'x';
    longt[PATH_MAX] = 0; /* 4096 bytes */
    ERR("target_4096_bytes_ENAMETOOLONG", symlink(longt, "long2"), ENAMETOOLONG);
    mkd("ro", 0755);
    mkd("w", 0777);
    AS(U1, G1) {
        ERR("no_write_EACCES", symlink("x", "ro/x"), EACCES);
        OK("nonroot", symlink("x", "w/x"));
    }
    chk_owner("nonroot_owner", "w/x", U1, G1);
}
