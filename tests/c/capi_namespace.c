/*
 * C tests of libdafs (see test_capi.c): The namespace: metadata (stat, directories, listing, setattr...) and rename2.
 */
#include "capi_test.h"

struct listing { int n, saw_sub, saw_file; dafs_client_t *c; int reentrant_ok; };

static int count_entry(void *arg, const char *name, uint64_t fileid, uint32_t type) {
    struct listing *l = arg;
    l->n++;
    if (strcmp(name, "sub") == 0 && type == DAFS_TYPE_DIR) l->saw_sub = 1;
    if (strcmp(name, "f2") == 0 && type == DAFS_TYPE_REG && fileid != 0) {
        l->saw_file = 1;
        /* re-entrant: the callback may use the same client */
        dafs_attr_t a;
        char p[300];
        snprintf(p, sizeof p, "%s/meta/f2", dir);
        l->reentrant_ok = dafs_stat(l->c, p, &a) == 0 && a.size == 3;
    }
    return 0;
}

static int stop_early(void *arg, const char *name, uint64_t fileid, uint32_t type) {
    (void)name; (void)fileid; (void)type;
    ++*(int *)arg;
    return 42;
}

int t_metadata(void) {
    dafs_client_t *c = connect_tcp();
    CHECK(c);
    dafs_attr_t a;
    OK(dafs_mkdir(c, path("meta"), 0755));
    CHECK_EQ(dafs_mkdir(c, path("meta"), 0755), -EEXIST);
    OK(dafs_stat(c, path("meta"), &a));
    CHECK_EQ(a.type, DAFS_TYPE_DIR);
    OK(dafs_mkdir(c, path("meta/sub"), 0700));
    dafs_file_t *f;
    OK(dafs_open(c, path("meta/f1"), DAFS_O_RDWR | DAFS_O_CREAT, 0640, &f));
    CHECK_EQ(dafs_pwrite(c, f, "abc", 3, 0), 3);
    OK(dafs_close(c, f));
    OK(dafs_rename(c, path("meta/f1"), path("meta/f2")));
    CHECK_EQ(dafs_stat(c, path("meta/f1"), &a), -ENOENT);
    OK(dafs_lstat(c, path("meta/f2"), &a));
    CHECK_EQ(a.size, 3);
    CHECK_EQ(a.mode, 0640);
    CHECK(a.mtime_ns > 0 && a.nlink == 1);
    struct listing l = {0};
    l.c = c;
    CHECK_EQ(dafs_readdir(c, path("meta"), count_entry, &l), 2);
    CHECK(l.n == 2 && l.saw_sub && l.saw_file && l.reentrant_ok);
    int calls = 0;
    CHECK_EQ(dafs_readdir(c, path("meta"), stop_early, &calls), 42);
    CHECK_EQ(calls, 1);
    CHECK_EQ(dafs_readdir(c, path("meta/f2"), count_entry, &l), -ENOTDIR);
    CHECK_EQ(dafs_readdir(c, path("nope"), count_entry, &l), -ENOENT);
    CHECK_EQ(dafs_readdir(c, path("meta"), NULL, &l), -EINVAL);
    OK(dafs_truncate(c, path("meta/f2"), 1 << 20));
    OK(dafs_stat(c, path("meta/f2"), &a));
    CHECK_EQ(a.size, 1 << 20);
    OK(dafs_truncate(c, path("meta/f2"), 1));
    OK(dafs_stat(c, path("meta/f2"), &a));
    CHECK_EQ(a.size, 1);
    CHECK_EQ(dafs_rmdir(c, path("meta")), -ENOTEMPTY);
    CHECK_EQ(dafs_unlink(c, path("meta/sub")), -EISDIR);
    OK(dafs_unlink(c, path("meta/f2")));
    CHECK_EQ(dafs_unlink(c, path("meta/f2")), -ENOENT);
    OK(dafs_rmdir(c, path("meta/sub")));
    OK(dafs_rmdir(c, path("meta")));
    CHECK_EQ(dafs_stat(c, path("meta"), &a), -ENOENT);
    CHECK_EQ(dafs_stat(c, NULL, &a), -EINVAL);
    CHECK_EQ(dafs_stat(c, path("x"), NULL), -EINVAL);
    CHECK_EQ(dafs_mkdir(c, "\xff\xfe", 0755), -EINVAL); /* not UTF-8 */
    OK(dafs_disconnect(c));
    return 0;
}

/* Write `len` bytes of `data` to a new file `name` in the scratch directory. */
static int put_file(dafs_client_t *c, const char *name, const char *data, size_t len) {
    dafs_file_t *f;
    OK(dafs_open(c, path(name), DAFS_O_WRONLY | DAFS_O_CREAT | DAFS_O_EXCL, 0644, &f));
    CHECK_EQ(dafs_pwrite(c, f, data, len, 0), len);
    OK(dafs_close(c, f));
    return 0;
}

/* dafs_rename2: NOREPLACE and EXCHANGE, told apart by the files' sizes. */
int t_rename2(void) {
    dafs_client_t *c = connect_tcp();
    CHECK(c);
    dafs_attr_t a;
    OK(dafs_mkdir(c, path("ren"), 0755));
    OK(put_file(c, "ren/one", "1", 1));
    OK(put_file(c, "ren/two", "22", 2));
    OK(dafs_mkdir(c, path("ren/d"), 0755));
    CHECK_EQ(dafs_rename2(c, path("ren/one"), path("ren/two"), DAFS_RENAME_NOREPLACE), -EEXIST);
    OK(dafs_stat(c, path("ren/two"), &a));
    CHECK_EQ(a.size, 2);
    OK(dafs_rename2(c, path("ren/one"), path("ren/three"), DAFS_RENAME_NOREPLACE));
    CHECK_EQ(dafs_stat(c, path("ren/one"), &a), -ENOENT);
    OK(dafs_rename2(c, path("ren/three"), path("ren/two"), DAFS_RENAME_EXCHANGE));
    OK(dafs_stat(c, path("ren/three"), &a));
    CHECK_EQ(a.size, 2);
    OK(dafs_stat(c, path("ren/two"), &a));
    CHECK_EQ(a.size, 1);
    OK(dafs_rename2(c, path("ren/two"), path("ren/d"), DAFS_RENAME_EXCHANGE));
    OK(dafs_stat(c, path("ren/two"), &a));
    CHECK_EQ(a.type, DAFS_TYPE_DIR);
    OK(dafs_stat(c, path("ren/d"), &a));
    CHECK_EQ(a.type, DAFS_TYPE_REG);
    CHECK_EQ(dafs_rename2(c, path("ren/d"), path("ren/none"), DAFS_RENAME_EXCHANGE), -ENOENT);
    CHECK_EQ(dafs_rename2(c, path("ren/d"), path("ren/x"),
                          DAFS_RENAME_NOREPLACE | DAFS_RENAME_EXCHANGE), -EINVAL);
    CHECK_EQ(dafs_rename2(c, path("ren/d"), path("ren/x"), 4), -EINVAL);
    CHECK_EQ(dafs_stat(c, path("ren/x"), &a), -ENOENT);
    OK(dafs_rename2(c, path("ren/d"), path("ren/three"), 0)); /* 0 replaces */
    OK(dafs_stat(c, path("ren/three"), &a));
    CHECK_EQ(a.size, 1);
    OK(dafs_unlink(c, path("ren/three")));
    OK(dafs_rmdir(c, path("ren/two")));
    OK(dafs_rmdir(c, path("ren")));
    OK(dafs_disconnect(c));
    return 0;
}
