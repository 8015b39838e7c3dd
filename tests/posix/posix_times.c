/*
 * posixtest cases (see posixtest.c): Times (which calls change atime, mtime, ctime), clearing of set-ID bits, set-group-ID
 * directories, symlink attributes, chdir.
 */
#include "posixtest.h"

void c_times(void) {
    char b[8];
    mkf("f", 0644, "x");
    mkd("d", 0755);
    struct snap s0 = snap("f"), s1;
    tick();
    int fd = open("f", O_WRONLY);
    EQ("write", write(fd, "abc", 3), 3);
    cl(fd);
    s1 = snap("f");
    chk_later("write_mtime", s0, s1, MTIME);
    chk_later("write_ctime", s0, s1, CTIME);
    s0 = s1;
    tick();
    fd = open("f", O_RDONLY);
    EQ("read", read(fd, b, 3), 3);
    cl(fd);
    s1 = snap("f");
    chk_kept("read_mtime", s0, s1, MTIME);
    chk_kept("read_ctime", s0, s1, CTIME);
    s0 = s1;
    tick();
    fd = open("f", O_RDWR);
    EQ("pwrite", pwrite(fd, "z", 1, 10), 1);
    cl(fd);
    s1 = snap("f");
    chk_later("pwrite_mtime", s0, s1, MTIME);
    s0 = s1;
    tick();
    OK("chmod", chmod("f", 0600));
    s1 = snap("f");
    chk_later("chmod_ctime", s0, s1, CTIME);
    chk_kept("chmod_mtime", s0, s1, MTIME);
    s0 = s1;
    tick();
    OK("chown_same_owner", chown("f", 0, 0));
    s1 = snap("f");
    chk_later("chown_ctime", s0, s1, CTIME);
    chk_kept("chown_mtime", s0, s1, MTIME);
    s0 = s1;
    struct snap p0 = snap("."), p1;
    tick();
    OK("link", link("f", "g"));
    s1 = snap("f");
    p1 = snap(".");
    chk_later("link_file_ctime", s0, s1, CTIME);
    chk_kept("link_file_mtime", s0, s1, MTIME);
    chk_later("link_dir_mtime", p0, p1, MTIME);
    chk_later("link_dir_ctime", p0, p1, CTIME);
    s0 = s1;
    p0 = p1;
    tick();
    OK("unlink", unlink("g"));
    s1 = snap("f");
    p1 = snap(".");
    chk_later("unlink_file_ctime", s0, s1, CTIME);
    chk_later("unlink_dir_mtime", p0, p1, MTIME);
    s0 = s1;
    p0 = p1;
    tick();
    OK("rename", rename("f", "f2"));
    s1 = snap("f2");
    p1 = snap(".");
    chk_later("rename_file_ctime", s0, s1, CTIME);
    chk_kept("rename_file_mtime", s0, s1, MTIME);
    chk_later("rename_dir_mtime", p0, p1, MTIME);
    s0 = s1;
    p0 = p1;
    struct snap d0 = snap("d"), d1;
    tick();
    OK("rename_into_dir", rename("f2", "d/f"));
    d1 = snap("d");
    chk_later("rename_into_dir_target_mtime", d0, d1, MTIME);
    chk_later("rename_into_dir_source_mtime", p0, snap("."), MTIME);
    d0 = d1;
    tick();
    cl(OK("create", open("d/new", O_CREAT | O_WRONLY, 0644)));
    d1 = snap("d");
    chk_later("create_dir_mtime", d0, d1, MTIME);
    chk_later("create_dir_ctime", d0, d1, CTIME);
    struct snap n = snap("d/new");
    chk_true("create_mtime_equals_ctime", !n.err && ts_cmp(n.st.st_mtim, n.st.st_ctim) == 0, "equal",
             "different");
    chk_true("create_atime_equals_mtime", !n.err && ts_cmp(n.st.st_atim, n.st.st_mtim) == 0, "equal",
             "different");
    chk_later("create_file_time_after_parent_before", d0, n, MTIME);
    d0 = d1;
    tick();
    OK("mkdir", mkdir("d/sub", 0755));
    d1 = snap("d");
    chk_later("mkdir_parent_mtime", d0, d1, MTIME);
    d0 = d1;
    tick();
    OK("rmdir", rmdir("d/sub"));
    d1 = snap("d");
    chk_later("rmdir_parent_mtime", d0, d1, MTIME);
    d0 = d1;
    tick();
    OK("symlink", symlink("x", "d/l"));
    d1 = snap("d");
    chk_later("symlink_parent_mtime", d0, d1, MTIME);
    d0 = d1;
    tick();
    OK("mkfifo", mkfifo("d/p", 0644));
    d1 = snap("d");
    chk_later("mkfifo_parent_mtime", d0, d1, MTIME);
    s0 = snap("d/f");
    tick();
    OK("truncate", truncate("d/f", 100));
    s1 = snap("d/f");
    chk_later("truncate_mtime", s0, s1, MTIME);
    chk_later("truncate_ctime", s0, s1, CTIME);
    s0 = s1;
    tick();
    fd = open("d/f", O_RDWR);
    OK("ftruncate", ftruncate(fd, 50));
    cl(fd);
    s1 = snap("d/f");
    chk_later("ftruncate_mtime", s0, s1, MTIME);
    chk_later("ftruncate_ctime", s0, s1, CTIME);
    s0 = s1;
    tick();
    cl(OK("O_TRUNC", open("d/f", O_WRONLY | O_TRUNC)));
    s1 = snap("d/f");
    chk_later("O_TRUNC_mtime", s0, s1, MTIME);
    chk_later("O_TRUNC_ctime", s0, s1, CTIME);
    s0 = s1;
    tick();
    cl(OK("O_TRUNC_empty", open("d/f", O_WRONLY | O_TRUNC)));
    s1 = snap("d/f");
    chk_later("O_TRUNC_empty_mtime", s0, s1, MTIME);
    s0 = s1;
    tick();
    struct timespec t[2] = {{1000000000, 0}, {1000000000, 0}};
    OK("utimensat", utimensat(AT_FDCWD, "d/f", t, 0));
    s1 = snap("d/f");
    chk_later("utimensat_ctime", s0, s1, CTIME);
    mkd("a", 0755);
    mkd("a/moved", 0755);
    mkd("b", 0755);
    s0 = snap("a/moved");
    tick();
    OK("rename_dir", rename("a/moved", "b/moved"));
    chk_later("rename_dir_ctime", s0, snap("b/moved"), CTIME);
}

/* A write or truncate by anyone but root clears set-user-ID, and set-group-ID when the
 * file is group-executable or the writer is not in its group; root's writes keep them. */
void c_suid_clear(void) {
    mkd("w", 0777);
    mkfo("w/a", 06777, U2, G2, "x");
    mkfo("w/b", 06777, U2, G2, "x");
    mkfo("w/c", 02767, U2, G2, "x");
    mkfo("w/m", 02767, U2, G1, "x");
    mkfo("w/o", 04755, U1, G1, "x");
    mkfo("w/t", 06777, U2, G2, "x");
    mkfo("w/r", 06777, U2, G2, "x");
    AS(U1, G1) {
        int fd = open("w/a", O_WRONLY);
        EQ("other_write", write(fd, "y", 1), 1);
        cl(fd);
        fd = open("w/b", O_RDWR);
        EQ("other_pwrite", pwrite(fd, "y", 1, 3), 1);
        cl(fd);
        fd = open("w/c", O_WRONLY);
        EQ("nonmember_write_setgid_no_group_exec", write(fd, "y", 1), 1);
        cl(fd);
        fd = open("w/m", O_WRONLY);
        EQ("member_write_setgid_no_group_exec", write(fd, "y", 1), 1);
        cl(fd);
        fd = open("w/o", O_WRONLY);
        EQ("owner_write", write(fd, "y", 1), 1);
        cl(fd);
        fd = open("w/t", O_WRONLY);
        OK("other_ftruncate", ftruncate(fd, 0));
        cl(fd);
    }
    chk_mode("other_write_clears", "w/a", 0777);
    chk_mode("other_pwrite_clears", "w/b", 0777);
    chk_mode("nonmember_setgid_without_group_exec_clears", "w/c", 0767);
    chk_mode("member_setgid_without_group_exec_kept", "w/m", 02767);
    chk_mode("owner_write_clears", "w/o", 0755);
    chk_mode("other_ftruncate_clears", "w/t", 0777);
    int fd = open("w/r", O_WRONLY);
    EQ("root_write", write(fd, "y", 1), 1);
    cl(fd);
    chk_mode("root_write_keeps", "w/r", 06777);
}

void c_setgid_dir(void) {
    mkdo("sg", 02777, 0, GX);
    mkd("plain", 0777);
    cl(OK("root_create", open("sg/rf", O_CREAT | O_WRONLY, 0644)));
    chk_owner("root_create_group", "sg/rf", 0, GX);
    OK("root_mkdir", mkdir("sg/rd", 0755));
    chk_owner("root_mkdir_group", "sg/rd", 0, GX);
    chk_mode("root_mkdir_inherits_setgid", "sg/rd", 02755);
    OK("root_mkdir_nested", mkdir("sg/rd/deeper", 0700));
    chk_owner("root_mkdir_nested_group", "sg/rd/deeper", 0, GX);
    chk_mode("root_mkdir_nested_setgid", "sg/rd/deeper", 02700);
    AS(U1, G1) {
        cl(OK("create", open("sg/uf", O_CREAT | O_WRONLY, 0644)));
        OK("mkdir", mkdir("sg/ud", 0755));
        OK("symlink", symlink("uf", "sg/ul"));
        OK("mkfifo", mkfifo("sg/up", 0644));
        cl(OK("create_setgid_not_member", open("sg/us", O_CREAT | O_WRONLY, 02755)));
        cl(OK("create_in_plain", open("plain/uf", O_CREAT | O_WRONLY, 0644)));
    }
    chk_owner("create_group", "sg/uf", U1, GX);
    chk_owner("mkdir_group", "sg/ud", U1, GX);
    chk_mode("mkdir_inherits_setgid", "sg/ud", 02755);
    chk_owner("symlink_group", "sg/ul", U1, GX);
    chk_owner("mkfifo_group", "sg/up", U1, GX);
    chk_mode("create_setgid_not_member_cleared", "sg/us", 0755);
    chk_owner("create_in_plain_group", "plain/uf", U1, G1);
    AS_G(U1, G1, GX) {
        cl(OK("create_setgid_member", open("sg/ms", O_CREAT | O_WRONLY, 02755)));
    }
    chk_mode("create_setgid_member_kept", "sg/ms", 02755);
    mkf("moved", 0644, "x");
    OK("rename_into", rename("moved", "sg/moved"));
    chk_gid("rename_into_keeps_group", "sg/moved", 0);
    mkf("linked", 0644, "x");
    OK("link_into", link("linked", "sg/linked"));
    chk_gid("link_into_keeps_group", "sg/linked", 0);
    OK("chmod_keeps_setgid", chmod("sg", 02775));
    chk_mode("chmod_keeps_setgid_mode", "sg", 02775);
}

/* A symbolic link's own owner and times. */
void c_symlink_attrs(void) {
    mkf("f", 0644, "x");
    mkl("f", "l");
    mkl("f", "l2");
    struct timespec t[2] = {{1000000000, 111}, {1000000001, 222}};
    struct timespec tf[2] = {{1500000000, 0}, {1500000000, 0}};
    if (utimensat(AT_FDCWD, "f", tf, 0) < 0) setup_failed("utimensat", "f");
    OK("lchown", lchown("l", U1, G1));
    chk_owner("lchown_link", "l", U1, G1);
    chk_owner("lchown_target_kept", "f", 0, 0);
    OK("fchownat_NOFOLLOW", fchownat(AT_FDCWD, "l", U2, G2, AT_SYMLINK_NOFOLLOW));
    chk_owner("fchownat_NOFOLLOW_link", "l", U2, G2);
    chk_owner("fchownat_NOFOLLOW_target_kept", "f", 0, 0);
    OK("fchownat_follow", fchownat(AT_FDCWD, "l", U1, G1, 0));
    chk_owner("fchownat_follow_target", "f", U1, G1);
    chk_owner("fchownat_follow_link_kept", "l", U2, G2);
    OK("utimensat_NOFOLLOW", utimensat(AT_FDCWD, "l", t, AT_SYMLINK_NOFOLLOW));
    chk_time("utimensat_NOFOLLOW_link_atime", "l", ATIME, t[0]);
    chk_time("utimensat_NOFOLLOW_link_mtime", "l", MTIME, t[1]);
    chk_time("utimensat_NOFOLLOW_target_kept", "f", MTIME, tf[1]);
    struct timeval tv[2] = {{1200000000, 0}, {1200000001, 0}};
    OK("lutimes", lutimes("l2", tv));
    chk_time("lutimes_link_mtime", "l2", MTIME, (struct timespec){1200000001, 0});
    chk_time("lutimes_target_kept", "f", MTIME, tf[1]);
    OK("utimensat_follow", utimensat(AT_FDCWD, "l2", t, 0));
    chk_time("utimensat_follow_target", "f", MTIME, t[1]);
    chk_time("utimensat_follow_link_kept", "l2", MTIME, (struct timespec){1200000001, 0});
    struct timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
    OK("utimensat_NOFOLLOW_now", utimensat(AT_FDCWD, "l2", now, AT_SYMLINK_NOFOLLOW));
    chk_now("utimensat_NOFOLLOW_now_mtime", "l2", MTIME);
    mkl("f", "rootl");
    mkd("w", 0777);
    AS(U1, G1) {
        ERR("nonroot_lchown_other_EPERM", lchown("rootl", U1, G1), EPERM);
        ERR("nonroot_utimensat_NOFOLLOW_other_EPERM",
            utimensat(AT_FDCWD, "rootl", t, AT_SYMLINK_NOFOLLOW), EPERM);
        OK("nonroot_symlink", symlink("../f", "w/mine"));
        OK("nonroot_utimensat_NOFOLLOW_own", utimensat(AT_FDCWD, "w/mine", t, AT_SYMLINK_NOFOLLOW));
    }
    chk_owner("nonroot_symlink_owner", "w/mine", U1, G1);
    chk_time("nonroot_utimensat_NOFOLLOW_own_mtime", "w/mine", MTIME, t[1]);
}

void c_chdir(void) {
    char cwd[PATH_MAX];
    mkd("d", 0755);
    mkd("d700", 0700);
    mkf("f", 0644, "x");
    OK("chdir", chdir("d"));
    const char *p = getcwd(cwd, sizeof cwd);
    size_t n = p ? strlen(p) : 0;
    chk_true("getcwd", p && n >= 8 && strcmp(p + n - 8, "/chdir/d") == 0, ".../chdir/d",
             p ? "another path" : ename(errno));
    cl(OK("relative_create", open("inner", O_CREAT | O_WRONLY, 0644)));
    OK("chdir_dotdot", chdir(".."));
    chk_type("relative_create_landed", "d/inner", S_IFREG);
    ERR("file_ENOTDIR", chdir("f"), ENOTDIR);
    ERR("missing_ENOENT", chdir("missing"), ENOENT);
    int fd = open("d", O_RDONLY | O_DIRECTORY);
    OK("fchdir", fchdir(fd));
    cl(fd);
    cl(OK("fchdir_relative_create", open("x", O_CREAT | O_WRONLY, 0644)));
    if (chdir("..") < 0) setup_failed("chdir", "..");
    chk_type("fchdir_relative_create_landed", "d/x", S_IFREG);
    fd = open("f", O_RDONLY);
    ERR("fchdir_file_ENOTDIR", fchdir(fd), ENOTDIR);
    cl(fd);
    AS(U1, G1) {
        ERR("no_search_EACCES", chdir("d700"), EACCES);
    }
}
