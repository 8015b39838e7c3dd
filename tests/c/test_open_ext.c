/*
 * C tests of the "Open modes" section of include/dafs.h (dafs_open_ex, dafs_publish)
 * against a real dafsd, with two clients (the visibility checks need a second
 * session) and the export directory on the local disk (what the server really wrote).
 *
 * Environment:
 *   DAFS_TARGET      host:port of a dafsd (required)
 *   DAFS_EXPORT_DIR  that dafsd's export directory (required: files are checked there)
 *
 * Prints one line per test and "N passed, N failed".
 */
#define _GNU_SOURCE
#include <dafs.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(sizeof(dafs_open_ex_t) == 48, "dafs_open_ex_t layout");

static const char *target, *export_dir;
static char dir[64];

#include "check.h"

static char *path(const char *name) {
    static char buf[8][256];
    static int i;
    char *p = buf[i++ % 8];
    snprintf(p, 256, "%s/%s", dir, name);
    return p;
}

/* The file as the server's disk holds it: 1 if it exists (size into *size). */
static int on_disk(const char *name, off_t *size) {
    char p[512];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s/%s", export_dir, dir, name);
    if (stat(p, &st) != 0) return 0;
    if (size) *size = st.st_size;
    return 1;
}

static dafs_client_t *connect(void) {
    dafs_client_t *c = NULL;
    int r = dafs_connect(target, NULL, &c);
    if (r != 0) fprintf(stderr, "    connect %s: %s\n", target, dafs_strerror(r));
    return c;
}

static int t_unlinked_invisible_until_publish(void) {
    dafs_client_t *a = connect(), *b = connect();
    CHECK(a && b);
    dafs_open_ex_t ex = {0};
    ex.flags = DAFS_OX_UNLINKED;
    dafs_file_t *f = NULL, *g = NULL;
    OK(dafs_open_ex(a, path("u1"), DAFS_O_RDWR, 0600, &ex, &f));
    CHECK_EQ(dafs_pwrite(a, f, "committed", 9, 0), 9);
    dafs_attr_t at;
    CHECK_EQ(dafs_stat(b, path("u1"), &at), -ENOENT);
    CHECK(!on_disk("u1", NULL));
    OK(dafs_publish(a, f));
    CHECK_EQ(dafs_publish(a, f), -EINVAL); /* published already */
    OK(dafs_open(b, path("u1"), DAFS_O_RDONLY, 0, &g));
    char buf[16] = {0};
    CHECK_EQ(dafs_pread(b, g, buf, sizeof buf, 0), 9);
    CHECK(memcmp(buf, "committed", 9) == 0);
    /* The open goes on as an ordinary open of the named file. */
    CHECK_EQ(dafs_pwrite(a, f, "!", 1, 9), 1);
    off_t sz = 0;
    CHECK(on_disk("u1", &sz));
    CHECK_EQ(sz, 10);
    OK(dafs_close(b, g));
    OK(dafs_close(a, f));
    dafs_disconnect(a);
    dafs_disconnect(b);
    return 0;
}

static int t_unlinked_close_discards(void) {
    dafs_client_t *a = connect();
    CHECK(a);
    dafs_open_ex_t ex = {0};
    ex.flags = DAFS_OX_UNLINKED;
    dafs_file_t *f = NULL;
    OK(dafs_open_ex(a, path("u2"), DAFS_O_RDWR, 0600, &ex, &f));
    CHECK_EQ(dafs_pwrite(a, f, "gone", 4, 0), 4);
    OK(dafs_close(a, f));
    dafs_attr_t at;
    CHECK_EQ(dafs_stat(a, path("u2"), &at), -ENOENT);
    CHECK(!on_disk("u2", NULL));
    /* Publishing never replaces a name. */
    dafs_file_t *x = NULL;
    OK(dafs_open(a, path("u3"), DAFS_O_RDWR | DAFS_O_CREAT, 0600, &x));
    CHECK_EQ(dafs_pwrite(a, x, "first", 5, 0), 5);
    OK(dafs_open_ex(a, path("u3"), DAFS_O_RDWR, 0600, &ex, &f));
    CHECK_EQ(dafs_pwrite(a, f, "second!", 7, 0), 7);
    CHECK_EQ(dafs_publish(a, f), -EEXIST);
    off_t sz = 0;
    CHECK(on_disk("u3", &sz));
    CHECK_EQ(sz, 5);
    OK(dafs_close(a, f));
    OK(dafs_close(a, x));
    /* A plain file cannot be published. */
    OK(dafs_open(a, path("u3"), DAFS_O_RDWR, 0, &x));
    CHECK_EQ(dafs_publish(a, x), -EINVAL);
    OK(dafs_close(a, x));
    dafs_disconnect(a);
    return 0;
}

static int t_keys(void) {
    dafs_client_t *a = connect(), *b = connect();
    CHECK(a && b);
    dafs_open_ex_t ka = {0}, kb = {0}, none = {0};
    ka.key = "cluster-A";
    ka.key_len = 9;
    kb.key = "cluster-B";
    kb.key_len = 9;
    dafs_file_t *f = NULL, *g = NULL;
    OK(dafs_open_ex(a, path("k1"), DAFS_O_RDWR | DAFS_O_CREAT, 0600, &ka, &f));
    CHECK_EQ(dafs_open_ex(b, path("k1"), DAFS_O_RDWR, 0, &kb, &g), -EACCES);
    CHECK(g == NULL);
    CHECK_EQ(dafs_open_ex(b, path("k1"), DAFS_O_RDONLY, 0, &none, &g), -EACCES);
    CHECK_EQ(dafs_open(b, path("k1"), DAFS_O_RDONLY, 0, &g), -EACCES);
    OK(dafs_open_ex(b, path("k1"), DAFS_O_RDONLY, 0, &ka, &g));
    OK(dafs_close(b, g));
    OK(dafs_close(a, f));
    /* The key lasts while an open lasts: afterwards a new key is set by the next open. */
    OK(dafs_open_ex(b, path("k1"), DAFS_O_RDWR, 0, &kb, &g));
    CHECK_EQ(dafs_open_ex(a, path("k1"), DAFS_O_RDWR, 0, &ka, &f), -EACCES);
    OK(dafs_close(b, g));
    /* Bad arguments are refused before anything is sent. */
    dafs_open_ex_t bad = {0};
    bad.key_len = 65;
    bad.key = "x";
    CHECK_EQ(dafs_open_ex(a, path("k1"), DAFS_O_RDWR, 0, &bad, &f), -EINVAL);
    bad.key_len = 1;
    bad.key = NULL;
    CHECK_EQ(dafs_open_ex(a, path("k1"), DAFS_O_RDWR, 0, &bad, &f), -EINVAL);
    bad.key = "x";
    bad.flags = 8;
    CHECK_EQ(dafs_open_ex(a, path("k1"), DAFS_O_RDWR, 0, &bad, &f), -EINVAL);
    bad.flags = DAFS_OX_UNLINKED | DAFS_OX_DELETE_ON_CLOSE;
    CHECK_EQ(dafs_open_ex(a, path("k1"), DAFS_O_RDWR, 0, &bad, &f), -EINVAL);
    bad.flags = 0;
    bad.reserved[3] = 1;
    CHECK_EQ(dafs_open_ex(a, path("k1"), DAFS_O_RDWR, 0, &bad, &f), -EINVAL);
    CHECK_EQ(dafs_open_ex(a, path("k1"), DAFS_O_RDWR, 0, NULL, NULL), -EINVAL);
    /* NULL ex is dafs_open. */
    OK(dafs_open_ex(a, path("k1"), DAFS_O_RDWR, 0, NULL, &f));
    OK(dafs_close(a, f));
    dafs_disconnect(a);
    dafs_disconnect(b);
    return 0;
}

static int t_delete_on_close(void) {
    dafs_client_t *a = connect(), *b = connect();
    CHECK(a && b);
    dafs_open_ex_t ex = {0};
    ex.flags = DAFS_OX_DELETE_ON_CLOSE;
    dafs_file_t *f = NULL, *g = NULL;
    OK(dafs_open_ex(a, path("d1"), DAFS_O_RDWR | DAFS_O_CREAT, 0600, &ex, &f));
    CHECK_EQ(dafs_pwrite(a, f, "tmp", 3, 0), 3);
    OK(dafs_open(b, path("d1"), DAFS_O_RDONLY, 0, &g));
    OK(dafs_close(a, f));
    CHECK(on_disk("d1", NULL)); /* b still has it open */
    OK(dafs_close(b, g));
    CHECK(!on_disk("d1", NULL));
    dafs_disconnect(a);
    dafs_disconnect(b);
    return 0;
}

struct test { const char *name; int (*fn)(void); };
static const struct test tests[] = {
    {"open_ex_unlinked_invisible_until_publish", t_unlinked_invisible_until_publish},
    {"open_ex_unlinked_close_discards", t_unlinked_close_discards},
    {"open_ex_keys", t_keys},
    {"open_ex_delete_on_close", t_delete_on_close},
};

int main(void) {
    target = getenv("DAFS_TARGET");
    export_dir = getenv("DAFS_EXPORT_DIR");
    if (!target || !export_dir) {
        fprintf(stderr, "test_open_ext: set DAFS_TARGET and DAFS_EXPORT_DIR\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "openex-%d", (int)getpid());
    dafs_client_t *c = connect();
    if (!c || dafs_mkdir(c, dir, 0755) != 0) {
        fprintf(stderr, "test_open_ext: cannot set up %s on %s\n", dir, target);
        return 2;
    }
    dafs_disconnect(c);
    int passed = 0, failed = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        int r = tests[i].fn();
        printf("%s %s\n", r ? "FAIL" : "ok  ", tests[i].name);
        fflush(stdout);
        if (r) failed++;
        else passed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
