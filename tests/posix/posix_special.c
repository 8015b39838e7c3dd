/*
 * posixtest cases (see posixtest.c): Special files (mknod, FIFOs, sockets), readdir, names (long names, PATH_MAX,
 * errors of path prefixes, ELOOP).
 */
#include "posixtest.h"

void c_mknod(void) {
    OK("mkfifo", mkfifo("p", 0666));
    chk_type("mkfifo_type", "p", S_IFIFO);
    chk_mode("mkfifo_mode_umask", "p", 0644);
    chk_nlink("mkfifo_nlink", "p", 1);
    chk_size("mkfifo_size", "p", 0);
    ERR("mkfifo_existing_EEXIST", mkfifo("p", 0644), EEXIST);
    OK("mknod_fifo", mknod("p2", S_IFIFO | 0600, 0));
    chk_type("mknod_fifo_type", "p2", S_IFIFO);
    chk_mode("mknod_fifo_mode", "p2", 0600);
    OK("mknod_socket", mknod("s", S_IFSOCK | 0644, 0));
    chk_type("mknod_socket_type", "s", S_IFSOCK);
    OK("mknod_chr", mknod("c", S_IFCHR | 0644, makedev(1, 7)));
    chk_type("mknod_chr_type", "c", S_IFCHR);
    chk_rdev("mknod_chr_rdev", "c", makedev(1, 7));
    chk_mode("mknod_chr_mode", "c", 0644);
    OK("mknod_blk", mknod("b", S_IFBLK | 0640, makedev(7, 3)));
    chk_type("mknod_blk_type", "b", S_IFBLK);
    chk_rdev("mknod_blk_rdev", "b", makedev(7, 3));
    OK("mknod_chr_large_numbers", mknod("c2", S_IFCHR | 0600, makedev(259, 123456)));
    chk_rdev("mknod_chr_large_numbers_rdev", "c2", makedev(259, 123456));
    OK("mknod_reg", mknod("r", S_IFREG | 0644, 0));
    chk_type("mknod_reg_type", "r", S_IFREG);
    OK("mknod_type_0_is_reg", mknod("r0", 0644, 0));
    chk_type("mknod_type_0_is_reg_type", "r0", S_IFREG);
    ERR("mknod_dir_EPERM", mknod("dd", S_IFDIR | 0755, 0), EPERM);
    ERR("mknod_bad_type_EINVAL", mknod("x", S_IFMT | 0644, 0), EINVAL);
    ERR("mknod_existing_EEXIST", mknod("c", S_IFCHR | 0644, makedev(1, 7)), EEXIST);
    ERR("mknod_missing_dir_ENOENT", mknod("nodir/c", S_IFIFO | 0644, 0), ENOENT);
    mkd("d", 0755);
    int dfd = open("d", O_RDONLY | O_DIRECTORY);
    OK("mkfifoat_dirfd", mkfifoat(dfd, "p", 0644));
    OK("mknodat_dirfd", mknodat(dfd, "c", S_IFCHR | 0644, makedev(1, 3)));
    cl(dfd);
    chk_type("mkfifoat_dirfd_type", "d/p", S_IFIFO);
    chk_type("mknodat_dirfd_type", "d/c", S_IFCHR);
    /* FIFO I/O (never blocking: a FIFO open without O_NONBLOCK waits for the other end). */
    ERR("fifo_open_write_no_reader_ENXIO", open("p", O_WRONLY | O_NONBLOCK), ENXIO);
    int rfd = OK("fifo_open_read_nonblock", open("p", O_RDONLY | O_NONBLOCK));
    int wfd = OK("fifo_open_write", open("p", O_WRONLY | O_NONBLOCK));
    char b[8] = {0};
    EQ("fifo_write", write(wfd, "ping", 4), 4);
    EQ("fifo_read", read(rfd, b, sizeof b), 4);
    chk_true("fifo_read_data", memcmp(b, "ping", 4) == 0, "ping", "other");
    cl(rfd);
    cl(wfd);
    chk_size("fifo_size_stays_0", "p", 0);
    ERR("open_socket_ENXIO", open("s", O_RDONLY), ENXIO);
    mkd("w", 0777);
    AS(U1, G1) {
        ERR("nonroot_mknod_chr_EPERM", mknod("w/c", S_IFCHR | 0644, makedev(1, 7)), EPERM);
        ERR("nonroot_mknod_blk_EPERM", mknod("w/b", S_IFBLK | 0644, makedev(7, 3)), EPERM);
        OK("nonroot_mkfifo", mkfifo("w/p", 0644));
        OK("nonroot_mknod_socket", mknod("w/s", S_IFSOCK | 0644, 0));
    }
    chk_owner("nonroot_mkfifo_owner", "w/p", U1, G1);
    chk_owner("nonroot_mknod_socket_owner", "w/s", U1, G1);
}

/* Each kind of special file through the operations every object supports. */
void c_special_ops(void) {
    static const struct {
        const char *name;
        mode_t type;
        dev_t dev;
    } kinds[] = {
        {"fifo", S_IFIFO, 0},
        {"socket", S_IFSOCK, 0},
        {"chr", S_IFCHR, 0},
        {"blk", S_IFBLK, 0},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        const char *k = kinds[i].name;
        dev_t dev = kinds[i].type == S_IFCHR ? makedev(5, 1) : kinds[i].type == S_IFBLK ? makedev(8, 16) : 0;
        char n[80], a[40], r[40], l[40], v[40];
        snprintf(a, sizeof a, "%s", k);
        snprintf(v, sizeof v, "%s.victim", k);
        snprintf(r, sizeof r, "%s.renamed", k);
        snprintf(l, sizeof l, "%s.link", k);
#define N(suffix) (snprintf(n, sizeof n, "%s_%s", k, suffix), n)
        OK(N("create"), mknod(a, kinds[i].type | 0644, dev));
        OK(N("rename"), rename(a, r));
        chk_absent(N("rename_old_gone"), a);
        chk_type(N("rename_type_kept"), r, kinds[i].type);
        if (dev) chk_rdev(N("rename_rdev_kept"), r, dev);
        OK(N("link"), link(r, l));
        chk_nlink(N("link_nlink"), r, 2);
        chk_same(N("link_same_inode"), r, l, 0);
        OK(N("chmod"), chmod(r, 0600));
        chk_mode(N("chmod_mode"), r, 0600);
        OK(N("chown"), chown(r, U1, G1));
        chk_owner(N("chown_owner"), r, U1, G1);
        struct timespec t[2] = {{1000000000, 0}, {1000000001, 0}};
        OK(N("utimensat"), utimensat(AT_FDCWD, r, t, 0));
        chk_time(N("utimensat_mtime"), r, MTIME, t[1]);
        mkf(v, 0644, "x");
        OK(N("rename_over_file"), rename(l, v));
        chk_type(N("rename_over_file_type"), v, kinds[i].type);
        OK(N("unlink"), unlink(v));
        chk_nlink(N("unlink_nlink"), r, 1);
        OK(N("unlink_last"), unlink(r));
        chk_absent(N("unlink_last_gone"), r);
#undef N
    }
    mkf("file", 0644, "x");
    if (mkfifo("fifo", 0644) < 0) setup_failed("mkfifo", "fifo");
    OK("file_over_fifo", rename("file", "fifo"));
    chk_type("file_over_fifo_type", "fifo", S_IFREG);
}

void c_socket(void) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strcpy(a.sun_path, "sock");
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    OK("bind", bind(s, (struct sockaddr *)&a, sizeof a));
    chk_type("bind_type", "sock", S_IFSOCK);
    chk_mode("bind_mode_umask", "sock", 0755);
    chk_listed("bind_listed", ".", "sock", DT_SOCK);
    OK("listen", listen(s, 4));
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    OK("connect", connect(c, (struct sockaddr *)&a, sizeof a));
    int x = accept(s, NULL, NULL);
    char b[8] = {0};
    EQ("connected_write", write(c, "hi", 2), 2);
    EQ("connected_read", x >= 0 ? read(x, b, sizeof b) : -1, 2);
    cl(x);
    cl(c);
    int s2 = socket(AF_UNIX, SOCK_STREAM, 0);
    ERR("bind_existing_EADDRINUSE", bind(s2, (struct sockaddr *)&a, sizeof a), EADDRINUSE);
    cl(s2);
    cl(s);
    OK("rename", rename("sock", "sock2"));
    chk_type("rename_type", "sock2", S_IFSOCK);
    OK("unlink", unlink("sock2"));
    chk_absent("unlink_gone", "sock2");
    mkd("w", 0777);
    AS(U1, G1) {
        struct sockaddr_un w = {.sun_family = AF_UNIX};
        strcpy(w.sun_path, "w/sock");
        int us = socket(AF_UNIX, SOCK_STREAM, 0);
        OK("nonroot_bind", bind(us, (struct sockaddr *)&w, sizeof w));
        cl(us);
    }
    chk_owner("nonroot_bind_owner", "w/sock", U1, G1);
}

void c_readdir(void) {
    mkf("f", 0644, "x");
    mkd("d", 0755);
    mkl("f", "l");
    mkn("p", S_IFIFO | 0644, 0);
    mkn("s", S_IFSOCK | 0644, 0);
    mkn("c", S_IFCHR | 0644, makedev(1, 7));
    mkn("b", S_IFBLK | 0644, makedev(7, 3));
    chk_listed("type_regular", ".", "f", DT_REG);
    chk_listed("type_directory", ".", "d", DT_DIR);
    chk_listed("type_symlink", ".", "l", DT_LNK);
    chk_listed("type_fifo", ".", "p", DT_FIFO);
    chk_listed("type_socket", ".", "s", DT_SOCK);
    chk_listed("type_chr", ".", "c", DT_CHR);
    chk_listed("type_blk", ".", "b", DT_BLK);
    chk_listed("dot", ".", ".", DT_DIR);
    chk_listed("dotdot", ".", "..", DT_DIR);
    DIR *dir = opendir(".");
    long n = 0;
    if (dir) {
        while (readdir(dir)) n++;
        closedir(dir);
    }
    EQ("count", n, 9);
    ino_t di = 0;
    listed(".", "f", &di);
    chk_true("d_ino_is_st_ino_file", di && di == ino_of("f", 0), "st_ino", "another number");
    listed(".", "d", &di);
    chk_true("d_ino_is_st_ino_dir", di && di == ino_of("d", 0), "st_ino", "another number");
    listed(".", "p", &di);
    chk_true("d_ino_is_st_ino_fifo", di && di == ino_of("p", 0), "st_ino", "another number");
    if (unlink("f") < 0) setup_failed("unlink", "f");
    chk_listed("unlinked_not_listed", ".", "f", -1);
    dir = opendir("d");
    n = 0;
    if (dir) {
        while (readdir(dir)) n++;
        closedir(dir);
    }
    EQ("empty_dir_count", n, 2);
    mkf("g", 0644, "x");
    ERR("opendir_file_ENOTDIR", od("g"), ENOTDIR);
    ERR("opendir_missing_ENOENT", od("missing"), ENOENT);
    mkd("big", 0755);
    for (int i = 0; i < 300; i++) {
        char name[32];
        snprintf(name, sizeof name, "big/entry-%03d", i);
        if (i % 3 == 0)
            mkn(name, S_IFIFO | 0644, 0);
        else
            mkf(name, 0644, NULL);
    }
    dir = opendir("big");
    long nf = 0, nr = 0, other = 0;
    if (dir) {
        struct dirent *e;
        while ((e = readdir(dir))) {
            if (e->d_name[0] == '.') continue;
            if (e->d_type == DT_FIFO)
                nf++;
            else if (e->d_type == DT_REG)
                nr++;
            else
                other++;
        }
        closedir(dir);
    }
    EQ("300_entries_fifos", nf, 100);
    EQ("300_entries_regular", nr, 200);
    EQ("300_entries_other", other, 0);
}

void c_names(void) {
    char n255[256], m255[256], n256[257], p[300];
    memset(n255, 'a', 255);
    n255[255] = 0;
    memset(m255, 'c', 255);
    m255[255] = 0;
    memset(n256, 'b', 256);
    n256[256] = 0;
    struct stat st;
    char b[64];
    cl(OK("create_255", open(n255, O_CREAT | O_WRONLY, 0644)));
    OK("stat_255", stat(n255, &st));
    chk_listed("readdir_255", ".", n255, DT_REG);
    OK("rename_255", rename(n255, m255));
    OK("link_255", link(m255, n255));
    OK("unlink_255", unlink(m255));
    OK("symlink_255", symlink(n255, m255));
    EQ("readlink_255", readlink(m255, p, sizeof p), 255);
    OK("unlink_symlink_255", unlink(m255));
    OK("mkdir_255", mkdir(m255, 0755));
    snprintf(p, sizeof p, "%s/x", m255);
    cl(OK("create_in_dir_255", open(p, O_CREAT | O_WRONLY, 0644)));
    OK("unlink_in_dir_255", unlink(p));
    OK("rmdir_255", rmdir(m255));
    mkf("f", 0644, "x");
    mkd("d", 0755);
    ERR("open_creat_256_ENAMETOOLONG", open(n256, O_CREAT | O_WRONLY, 0644), ENAMETOOLONG);
    ERR("open_256_ENAMETOOLONG", open(n256, O_RDONLY), ENAMETOOLONG);
    ERR("stat_256_ENAMETOOLONG", stat(n256, &st), ENAMETOOLONG);
    ERR("lstat_256_ENAMETOOLONG", lstat(n256, &st), ENAMETOOLONG);
    ERR("mkdir_256_ENAMETOOLONG", mkdir(n256, 0755), ENAMETOOLONG);
    ERR("rmdir_256_ENAMETOOLONG", rmdir(n256), ENAMETOOLONG);
    ERR("unlink_256_ENAMETOOLONG", unlink(n256), ENAMETOOLONG);
    ERR("rename_from_256_ENAMETOOLONG", rename(n256, "x"), ENAMETOOLONG);
    ERR("rename_to_256_ENAMETOOLONG", rename("f", n256), ENAMETOOLONG);
    ERR("link_to_256_ENAMETOOLONG", link("f", n256), ENAMETOOLONG);
    ERR("symlink_at_256_ENAMETOOLONG", symlink("f", n256), ENAMETOOLONG);
    ERR("readlink_256_ENAMETOOLONG", readlink(n256, b, sizeof b), ENAMETOOLONG);
    ERR("mkfifo_256_ENAMETOOLONG", mkfifo(n256, 0644), ENAMETOOLONG);
    ERR("chmod_256_ENAMETOOLONG", chmod(n256, 0644), ENAMETOOLONG);
    ERR("chown_256_ENAMETOOLONG", chown(n256, 0, 0), ENAMETOOLONG);
    ERR("truncate_256_ENAMETOOLONG", truncate(n256, 0), ENAMETOOLONG);
    ERR("access_256_ENAMETOOLONG", access(n256, F_OK), ENAMETOOLONG);
    ERR("utimensat_256_ENAMETOOLONG", utimensat(AT_FDCWD, n256, NULL, 0), ENAMETOOLONG);
    ERR("chdir_256_ENAMETOOLONG", chdir(n256), ENAMETOOLONG);
    snprintf(p, sizeof p, "d/%s", n256);
    ERR("open_creat_256_in_dir_ENAMETOOLONG", open(p, O_CREAT | O_WRONLY, 0644), ENAMETOOLONG);
    snprintf(p, sizeof p, "%s/x", n256);
    ERR("stat_256_prefix_ENAMETOOLONG", stat(p, &st), ENAMETOOLONG);
    OK("symlink_to_256_target", symlink(n256, "lt"));
    ERR("stat_via_symlink_256_ENAMETOOLONG", stat("lt", &st), ENAMETOOLONG);
    static const struct {
        const char *check, *name;
    } odd[] = {
        {"space", "with space"},       {"tab", "with\ttab"},        {"newline", "with\nnewline"},
        {"utf8", "caf\xc3\xa9-\xe2\x9c\x93"}, {"control", "ctl\x01\x1f"}, {"leading_dash", "-dash"},
        {"three_dots", "..."},          {"hidden", ".hidden"},       {"backslash", "back\\slash"},
        {"non_utf8", "bytes\xff\xfe"},
    };
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        char n[64];
        snprintf(n, sizeof n, "create_%s", odd[i].check);
        cl(OK(n, open(odd[i].name, O_CREAT | O_WRONLY, 0644)));
        snprintf(n, sizeof n, "readdir_%s", odd[i].check);
        chk_listed(n, ".", odd[i].name, DT_REG);
    }
}

/* Paths of PATH_MAX - 1 bytes (the longest a system call takes), relative to the working
 * directory; the absolute path is longer still. */
void c_pathmax(void) {
    static char path[PATH_MAX + 2], other[PATH_MAX + 2];
    size_t len = 0;
    mkf("src", 0644, "x");
    int made = 1;
    for (int i = 0; i < 20; i++) { /* 20 components of 200 bytes: 4020 bytes with slashes */
        memset(path + len, 'a' + i, 200);
        len += 200;
        path[len] = 0;
        if (mkdir(path, 0755) < 0) made = 0;
        path[len++] = '/';
        path[len] = 0;
    }
    chk_true("nested_mkdir_4019_bytes", made, "created", "failed");
    memset(path + len, 'f', 75);
    path[len + 75] = 0; /* 4095 bytes */
    memcpy(other, path, len);
    memset(other + len, 'g', 75);
    other[len + 75] = 0;
    struct stat st;
    char b[16];
    cl(OK("create_4095", open(path, O_CREAT | O_WRONLY, 0644)));
    OK("stat_4095", stat(path, &st));
    OK("chmod_4095", chmod(path, 0600));
    OK("rename_4095", rename(path, other));
    OK("link_4095", link(other, path));
    OK("unlink_4095", unlink(other));
    OK("truncate_4095", truncate(path, 10));
    OK("utimensat_4095", utimensat(AT_FDCWD, path, NULL, 0));
    OK("access_4095", access(path, R_OK));
    OK("unlink_4095_last", unlink(path));
    OK("mkdir_4095", mkdir(path, 0755));
    OK("rmdir_4095", rmdir(path));
    OK("symlink_4095", symlink("target", path));
    EQ("readlink_4095", readlink(path, b, sizeof b), 6);
    OK("unlink_symlink_4095", unlink(path));
    path[len + 75] = 'f';
    path[len + 76] = 0; /* 4096 bytes */
    ERR("create_4096_ENAMETOOLONG", open(path, O_CREAT | O_WRONLY, 0644), ENAMETOOLONG);
    ERR("stat_4096_ENAMETOOLONG", stat(path, &st), ENAMETOOLONG);
    ERR("mkdir_4096_ENAMETOOLONG", mkdir(path, 0755), ENAMETOOLONG);
    ERR("unlink_4096_ENAMETOOLONG", unlink(path), ENAMETOOLONG);
    ERR("rename_to_4096_ENAMETOOLONG", rename("src", path), ENAMETOOLONG);
    path[len - 1] = 0; /* the deepest directory, 4019 bytes */
    OK("chdir_4019", chdir(path));
    cl(OK("create_in_deep_cwd", open("here", O_CREAT | O_WRONLY, 0644)));
    chk_exists("create_in_deep_cwd_visible", "here");
    OK("chdir_dotdot_from_deep", chdir(".."));
    chk_type("chdir_dotdot_from_deep_lands", path + len - 201 /* last component */, S_IFDIR);
}

/* ENOENT and ENOTDIR for a missing directory or a file used as one, in every call. */
void c_prefix_errors(void) {
    mkf("f", 0644, "x");
    struct stat st;
    char b[16];
    struct timespec t[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
    for (int k = 0; k < 2; k++) {
        const char *P = k ? "f/x" : "nodir/x";
        int E = k ? ENOTDIR : ENOENT;
        char n[64];
#define PFX(op, call) (snprintf(n, sizeof n, "%s_%s", op, ename(E)), ERR(n, call, E))
        PFX("stat", stat(P, &st));
        PFX("lstat", lstat(P, &st));
        PFX("open", open(P, O_RDONLY));
        PFX("open_creat", open(P, O_CREAT | O_WRONLY, 0644));
        PFX("mkdir", mkdir(P, 0755));
        PFX("rmdir", rmdir(P));
        PFX("unlink", unlink(P));
        PFX("rename_from", rename(P, "g"));
        PFX("rename_to", rename("f", P));
        PFX("link_from", link(P, "g"));
        PFX("link_to", link("f", P));
        PFX("symlink_at", symlink("t", P));
        PFX("readlink", readlink(P, b, sizeof b));
        PFX("chmod", chmod(P, 0644));
        PFX("chown", chown(P, 0, 0));
        PFX("lchown", lchown(P, 0, 0));
        PFX("truncate", truncate(P, 0));
        PFX("utimensat", utimensat(AT_FDCWD, P, t, 0));
        PFX("access", access(P, F_OK));
        PFX("mkfifo", mkfifo(P, 0644));
        PFX("mknod", mknod(P, S_IFREG | 0644, 0));
        PFX("chdir", chdir(P));
        PFX("opendir", od(P));
#undef PFX
    }
    chk_content("file_untouched", "f", "x");
}

/* ELOOP: symlink loops in the last component and in a prefix, and the 40-link limit. */
void c_eloop(void) {
    mkl("loop2", "loop1");
    mkl("loop1", "loop2");
    mkl("self", "self");
    struct stat st;
    char b[16];
    ERR("stat_ELOOP", stat("loop1", &st), ELOOP);
    ERR("stat_self_ELOOP", stat("self", &st), ELOOP);
    ERR("open_ELOOP", open("loop1", O_RDONLY), ELOOP);
    ERR("open_creat_ELOOP", open("loop1", O_CREAT | O_WRONLY, 0644), ELOOP);
    ERR("chmod_ELOOP", chmod("loop1", 0644), ELOOP);
    ERR("chown_ELOOP", chown("loop1", 0, 0), ELOOP);
    ERR("truncate_ELOOP", truncate("loop1", 0), ELOOP);
    ERR("access_ELOOP", access("loop1", F_OK), ELOOP);
    ERR("utimensat_ELOOP", utimensat(AT_FDCWD, "loop1", NULL, 0), ELOOP);
    ERR("chdir_ELOOP", chdir("loop1"), ELOOP);
    ERR("opendir_ELOOP", od("loop1"), ELOOP);
    ERR("prefix_lstat_ELOOP", lstat("loop1/x", &st), ELOOP);
    ERR("prefix_mkdir_ELOOP", mkdir("loop1/x", 0755), ELOOP);
    ERR("prefix_unlink_ELOOP", unlink("loop1/x"), ELOOP);
    ERR("prefix_rename_to_ELOOP", rename("self", "loop1/x"), ELOOP);
    ERR("prefix_symlink_at_ELOOP", symlink("t", "loop1/x"), ELOOP);
    ERR("prefix_mkfifo_ELOOP", mkfifo("loop1/x", 0644), ELOOP);
    OK("lstat_loop", lstat("loop1", &st));
    EQ("readlink_loop", readlink("loop1", b, sizeof b), 5);
    OK("lchown_loop", lchown("loop1", U1, G1));
    OK("unlink_loop", unlink("loop1"));
    chk_type("unlink_loop_other_kept", "loop2", S_IFLNK);
    /* l00 -> l01 -> ... -> l40 -> target: opening l01 follows 40 links, l00 41. */
    mkf("target", 0644, "end");
    for (int i = 0; i <= 40; i++) {
        char name[8], to[8];
        snprintf(name, sizeof name, "l%02d", i);
        if (i == 40)
            snprintf(to, sizeof to, "target");
        else
            snprintf(to, sizeof to, "l%02d", i + 1);
        mkl(to, name);
    }
    chk_content("40_links_followed", "l01", "end");
    ERR("41_links_ELOOP", open("l00", O_RDONLY), ELOOP);
}
