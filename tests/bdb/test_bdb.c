/*
 * Berkeley DB 5.3 test program for libdafs_bdb: an ordinary Berkeley DB application.
 * Built twice by scripts/test-bdb.sh: plain (dafs only when libdafs_bdb is preloaded
 * with DAFS_BDB_SERVER/DAFS_BDB_PREFIX set) and with -DUSE_SETUP (linked with
 * -ldafs_bdb, calls dafs_bdb_setup(argv[2], argv[3]) first).
 *
 *   test_bdb basic   HOME             create, put, get, cursor scans, delete, rename
 *   test_bdb crash   HOME N           commit N transactions, flush an uncommitted one to
 *                                     the files, print READY, sleep (to be kill -9'd)
 *   test_bdb recover HOME N           DB_RECOVER; committed records present,
 *                                     uncommitted absent
 *   test_bdb open    HOME FILE        open an existing database without DB_CREATE
 *   test_bdb cache   HOME             reads through a small cache; print the hooks'
 *                                     counters (needs libdafs_bdb)
 *   test_bdb threads HOME             4 threads reading and writing one database through
 *                                     a small cache at once (DB_THREAD)
 *   test_bdb register HOME            DB_REGISTER: must end (not supported: error)
 *   test_bdb noenv   FILE             a database without an environment: create, put,
 *                                     close, reopen, get
 * Prints "ok ..." / "FAIL ..." lines and exits 0 only when every check passed.
 */
#define _GNU_SOURCE
#include <db.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dafs_bdb.h"

static int failures;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (cond) {                                                        \
            printf("ok   ");                                               \
        } else {                                                           \
            printf("FAIL ");                                               \
            failures++;                                                    \
        }                                                                  \
        printf(__VA_ARGS__);                                               \
        printf("\n");                                                      \
        fflush(stdout);                                                    \
    } while (0)

#define DIE_IF(rc, what)                                                   \
    do {                                                                   \
        if ((rc) != 0) {                                                   \
            printf("FAIL %s: %s\n", what, db_strerror(rc));                \
            exit(1);                                                       \
        }                                                                  \
    } while (0)

#define NRECS 5000
#define ENV_FLAGS (DB_CREATE | DB_INIT_MPOOL | DB_INIT_LOCK | DB_INIT_LOG | DB_INIT_TXN)

static DB_ENV *env_open(const char *home, u_int32_t extra, u_int32_t cache_bytes)
{
    DB_ENV *env;
    DIE_IF(db_env_create(&env, 0), "db_env_create");
    env->set_errfile(env, stdout);
    env->set_errpfx(env, "bdb");
    if (cache_bytes)
        DIE_IF(env->set_cachesize(env, 0, cache_bytes, 1), "set_cachesize");
    int rc = env->open(env, home, ENV_FLAGS | extra, 0644);
    if (rc != 0) {
        printf("FAIL env open %s: %s\n", home, db_strerror(rc));
        exit(1);
    }
    return env;
}

static DB *db_open(DB_ENV *env, const char *file, DBTYPE type, u_int32_t flags, u_int32_t pagesize)
{
    DB *db;
    DIE_IF(db_create(&db, env, 0), "db_create");
    if (pagesize)
        DIE_IF(db->set_pagesize(db, pagesize), "set_pagesize");
    int rc = db->open(db, NULL, file, NULL, type, flags | DB_AUTO_COMMIT, 0644);
    if (rc != 0) {
        printf("FAIL db open %s: %s\n", file, db_strerror(rc));
        exit(1);
    }
    return db;
}

static void kv(int i, char *k, char *v, const char *tag)
{
    snprintf(k, 32, "%s%06d", tag, i);
    snprintf(v, 128, "value-%s-%d-%0*d", tag, i, 60, i * 7);
}

static int put(DB *db, DB_TXN *t, const char *k, const char *v)
{
    DBT key = {.data = (void *)k, .size = (u_int32_t)strlen(k) + 1};
    DBT val = {.data = (void *)v, .size = (u_int32_t)strlen(v) + 1};
    return db->put(db, t, &key, &val, 0);
}

/* 0 and the value, DB_NOTFOUND, or an error. */
static int get(DB *db, const char *k, char *out, size_t cap)
{
    DBT key = {.data = (void *)k, .size = (u_int32_t)strlen(k) + 1};
    DBT val = {.data = out, .ulen = (u_int32_t)cap, .flags = DB_DBT_USERMEM};
    return db->get(db, NULL, &key, &val, 0);
}

/* Count records of a cursor scan (forward or backward) and check the key order. */
static int scan(DB *db, int backward, int *ordered)
{
    DBC *c;
    DIE_IF(db->cursor(db, NULL, &c, 0), "cursor");
    DBT k = {0}, v = {0};
    char prev[64] = "";
    int n = 0;
    *ordered = 1;
    while (c->get(c, &k, &v, backward ? DB_PREV : DB_NEXT) == 0) {
        if (n > 0 && (backward ? strcmp(k.data, prev) >= 0 : strcmp(k.data, prev) <= 0))
            *ordered = 0;
        snprintf(prev, sizeof prev, "%s", (char *)k.data);
        n++;
    }
    c->close(c);
    return n;
}

static void test_basic(const char *home)
{
    DB_ENV *env = env_open(home, 0, 0);
    /* Log records reach the server at each commit, without an fsync each: the test is
     * about the data path (the crash test keeps synchronous commits). */
    DIE_IF(env->set_flags(env, DB_TXN_WRITE_NOSYNC, 1), "set_flags");
    DB *db = db_open(env, "data.db", DB_BTREE, DB_CREATE, 4096);
    char k[32], v[128], got[128];
    int bad = 0;
    for (int i = 0; i < NRECS; i++) {
        kv(i, k, v, "k");
        bad += put(db, NULL, k, v) != 0;
    }
    CHECK(bad == 0, "basic: put %d records", NRECS);
    bad = 0;
    for (int i = 0; i < NRECS; i += 7) {
        kv(i, k, v, "k");
        bad += get(db, k, got, sizeof got) != 0 || strcmp(got, v) != 0;
    }
    CHECK(bad == 0, "basic: get returns what was put");
    CHECK(get(db, "missing", got, sizeof got) == DB_NOTFOUND, "basic: get of a missing key is DB_NOTFOUND");
    int ordered, n = scan(db, 0, &ordered);
    CHECK(n == NRECS && ordered, "basic: forward cursor scan sees %d records in order (saw %d)", NRECS, n);
    n = scan(db, 1, &ordered);
    CHECK(n == NRECS && ordered, "basic: backward cursor scan in reverse order");
    bad = 0;
    for (int i = 0; i < NRECS; i += 2) {
        kv(i, k, v, "k");
        DBT key = {.data = k, .size = (u_int32_t)strlen(k) + 1};
        bad += db->del(db, NULL, &key, 0) != 0;
    }
    n = scan(db, 0, &ordered);
    CHECK(bad == 0 && n == NRECS / 2, "basic: delete every other record (%d left)", n);
    DIE_IF(db->close(db, 0), "db close");
    /* A hash database, then a rename and a remove through the environment. */
    db = db_open(env, "hash.db", DB_HASH, DB_CREATE, 0);
    bad = 0;
    for (int i = 0; i < 500; i++) {
        kv(i, k, v, "h");
        bad += put(db, NULL, k, v) != 0;
    }
    DIE_IF(db->close(db, 0), "hash close");
    int rc = env->dbrename(env, NULL, "hash.db", NULL, "hash2.db", DB_AUTO_COMMIT);
    CHECK(bad == 0 && rc == 0, "basic: hash database written and renamed (%s)", db_strerror(rc));
    db = db_open(env, "hash2.db", DB_HASH, 0, 0);
    kv(123, k, v, "h");
    CHECK(get(db, k, got, sizeof got) == 0 && strcmp(got, v) == 0, "basic: renamed hash database readable");
    DIE_IF(db->close(db, 0), "hash2 close");
    DIE_IF(env->txn_checkpoint(env, 0, 0, DB_FORCE), "checkpoint");
    env->close(env, 0);
    /* Reopen in a new environment handle: the data is on the server, not in a cache. */
    env = env_open(home, 0, 0);
    db = db_open(env, "data.db", DB_BTREE, 0, 0);
    kv(NRECS - 1, k, v, "k");
    CHECK(get(db, k, got, sizeof got) == 0 && strcmp(got, v) == 0, "basic: data survives closing the environment");
    db->close(db, 0);
    env->close(env, 0);
}

static void test_crash(const char *home, int n)
{
    DB_ENV *env = env_open(home, DB_RECOVER, 0);
    DB *db = db_open(env, "txn.db", DB_BTREE, DB_CREATE, 0);
    char k[32], v[128];
    for (int i = 0; i < n; i++) {
        DB_TXN *t;
        DIE_IF(env->txn_begin(env, NULL, &t, 0), "txn_begin");
        kv(i, k, v, "c");
        DIE_IF(put(db, t, k, v), "put committed");
        DIE_IF(t->commit(t, 0), "commit");
    }
    DB_TXN *t;
    DIE_IF(env->txn_begin(env, NULL, &t, 0), "txn_begin");
    for (int i = 0; i < n; i++) {
        kv(i, k, v, "u");
        DIE_IF(put(db, t, k, v), "put uncommitted");
    }
    /* Push the uncommitted pages into the database file (write-ahead logging flushes
     * the log first): recovery must undo them, not just not find them. */
    DIE_IF(env->memp_sync(env, NULL), "memp_sync");
    printf("READY\n");
    fflush(stdout);
    pause();
}

static void test_recover(const char *home, int n)
{
    DB_ENV *env = env_open(home, DB_RECOVER, 0);
    DB *db = db_open(env, "txn.db", DB_BTREE, 0, 0);
    char k[32], v[128], got[128];
    int committed = 0, uncommitted = 0;
    for (int i = 0; i < n; i++) {
        kv(i, k, v, "c");
        committed += get(db, k, got, sizeof got) == 0 && strcmp(got, v) == 0;
        kv(i, k, v, "u");
        uncommitted += get(db, k, got, sizeof got) != DB_NOTFOUND;
    }
    CHECK(committed == n, "recover: %d of %d committed transactions present", committed, n);
    CHECK(uncommitted == 0, "recover: uncommitted records absent (%d found)", uncommitted);
    db->close(db, 0);
    DIE_IF(env->txn_checkpoint(env, 0, 0, DB_FORCE), "checkpoint");
    env->close(env, 0);
}

static void test_open(const char *home, const char *file)
{
    DB_ENV *env = env_open(home, 0, 0);
    DB *db;
    DIE_IF(db_create(&db, env, 0), "db_create");
    int rc = db->open(db, NULL, file, NULL, DB_BTREE, DB_AUTO_COMMIT, 0);
    printf("open %s: %s\n", file, db_strerror(rc));
    db->close(db, 0);
    env->close(env, 0);
    exit(rc == 0 ? 0 : 2);
}

/* Reads through a cache far smaller than the database: every miss is a read into the
 * cache's memory. The counters show whether it was placed there directly. */
static void test_cache(const char *home)
{
    int (*stats)(dafs_bdb_stats_t *) = (int (*)(dafs_bdb_stats_t *))dlsym(RTLD_DEFAULT, "dafs_bdb_stats");
    DB_ENV *env = env_open(home, 0, 256 * 1024);
    DIE_IF(env->set_flags(env, DB_TXN_WRITE_NOSYNC, 1), "set_flags"); /* no fsync per put */
    DB *db = db_open(env, "big.db", DB_BTREE, DB_CREATE, 16384);
    char k[32], v[128], got[128];
    for (int i = 0; i < 4 * NRECS; i++) {
        kv(i, k, v, "b");
        DIE_IF(put(db, NULL, k, v), "put");
    }
    dafs_bdb_stats_t before = {0}, after = {0};
    CHECK(stats != NULL && stats(&before) == 0, "cache: dafs_bdb_stats available");
    int bad = 0;
    unsigned x = 12345;
    for (int i = 0; i < 4 * NRECS; i++) {
        x = x * 1103515245u + 12345u;
        int r = (int)((x >> 8) % (4 * NRECS));
        kv(r, k, v, "b");
        bad += get(db, k, got, sizeof got) != 0 || strcmp(got, v) != 0;
    }
    CHECK(bad == 0, "cache: random reads through a 256 KiB cache return the right records");
    if (stats != NULL && stats(&after) == 0) {
        unsigned long long reg = after.reads_registered - before.reads_registered;
        unsigned long long plain = after.reads_plain - before.reads_plain;
        unsigned long long direct = after.client.direct_reads - before.client.direct_reads;
        unsigned long long staged = after.client.off_direct_path - before.client.off_direct_path;
        printf("cache: reads into registered cache %llu, plain %llu; client direct_reads %llu, "
               "off_direct_path %llu; regions registered %llu unregistered %llu\n",
               reg, plain, direct, staged, (unsigned long long)after.regions_registered,
               (unsigned long long)after.regions_unregistered);
        CHECK(reg > 100 && plain == 0, "cache: page reads land in the registered cache (%llu)", reg);
        CHECK(after.regions_registered > 0 && after.regions_unregistered == 0, "cache: every region is registered memory");
        const char *want_direct = getenv("EXPECT_DIRECT");
        if (want_direct != NULL && strcmp(want_direct, "1") == 0)
            CHECK(direct >= reg && staged == 0,
                  "cache: the server placed every page directly (direct_reads %llu, staged %llu)", direct, staged);
    }
    db->close(db, 0);
    env->close(env, 0);
}

#define THREADS 4
#define THREAD_OPS 1500

struct worker {
    DB *db;
    int id;
    int errors;
};

/* Each thread writes its own keys and reads everybody's first keys: misses in the small
 * cache are reads from dafs issued by several threads at once. */
static void *worker_main(void *arg)
{
    struct worker *w = arg;
    char k[32], v[128], got[128];
    char tag[8];
    snprintf(tag, sizeof tag, "t%d", w->id);
    for (int i = 0; i < THREAD_OPS; i++) {
        kv(i, k, v, tag);
        w->errors += put(w->db, NULL, k, v) != 0;
        kv(i / 2, k, v, tag);
        w->errors += get(w->db, k, got, sizeof got) != 0 || strcmp(got, v) != 0;
        kv((i * 7919) % NRECS, k, v, "k");
        w->errors += get(w->db, k, got, sizeof got) != 0 || strcmp(got, v) != 0;
    }
    return NULL;
}

static void test_threads(const char *home)
{
    DB_ENV *env = env_open(home, DB_THREAD, 256 * 1024);
    DIE_IF(env->set_flags(env, DB_TXN_WRITE_NOSYNC, 1), "set_flags");
    DB *db;
    DIE_IF(db_create(&db, env, 0), "db_create");
    DIE_IF(db->set_pagesize(db, 8192), "set_pagesize");
    DIE_IF(db->open(db, NULL, "threads.db", NULL, DB_BTREE, DB_CREATE | DB_THREAD | DB_AUTO_COMMIT, 0644), "open");
    char k[32], v[128];
    for (int i = 0; i < NRECS; i++) {
        kv(i, k, v, "k");
        DIE_IF(put(db, NULL, k, v), "put");
    }
    struct worker w[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){.db = db, .id = i};
        pthread_create(&th[i], NULL, worker_main, &w[i]);
    }
    int errors = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        errors += w[i].errors;
    }
    CHECK(errors == 0, "threads: %d threads x %d puts and gets through a 256 KiB cache (%d errors)",
          THREADS, THREAD_OPS, errors);
    int ordered, n = scan(db, 0, &ordered);
    CHECK(n == NRECS + THREADS * THREAD_OPS && ordered, "threads: every record present afterwards (%d)", n);
    DIE_IF(db->close(db, 0), "close");
    DIE_IF(env->txn_checkpoint(env, 0, 0, DB_FORCE), "checkpoint");
    env->close(env, 0);
}

/* DB_REGISTER scans its registry until a short read, which the read hook cannot give:
 * the open must end (with an error), not loop for ever. Exit 0 = ended either way. */
static void test_register(const char *home)
{
    DB_ENV *env;
    DIE_IF(db_env_create(&env, 0), "db_env_create");
    env->set_errfile(env, stdout);
    int rc = env->open(env, home, ENV_FLAGS | DB_REGISTER | DB_RECOVER, 0644);
    printf("register: env open: %s\n", db_strerror(rc));
    env->close(env, 0);
}

/* No DB_ENV: Berkeley DB makes a private environment (heap regions, no region_map),
 * so only the file hooks decide where the file goes. */
static void test_noenv(const char *file)
{
    DB *db;
    DIE_IF(db_create(&db, NULL, 0), "db_create");
    db->set_errfile(db, stdout);
    int rc = db->open(db, NULL, file, NULL, DB_BTREE, DB_CREATE, 0644);
    if (rc != 0) {
        printf("FAIL noenv: open %s: %s\n", file, db_strerror(rc));
        exit(1);
    }
    char k[32], v[128], got[128];
    kv(7, k, v, "n");
    CHECK(put(db, NULL, k, v) == 0, "noenv: put");
    DIE_IF(db->close(db, 0), "close");
    DIE_IF(db_create(&db, NULL, 0), "db_create");
    DIE_IF(db->open(db, NULL, file, NULL, DB_BTREE, 0, 0), "reopen");
    CHECK(get(db, k, got, sizeof got) == 0 && strcmp(got, v) == 0, "noenv: reopened database holds the record");
    db->close(db, 0);
}

int main(int argc, char **argv)
{
    int a = 1;
#ifdef USE_SETUP
    if (argc < 4) {
        fprintf(stderr, "usage: %s SERVER PREFIX MODE HOME [ARG]\n", argv[0]);
        return 64;
    }
    int rc = dafs_bdb_setup(argv[1], argv[2]);
    if (rc < 0) {
        printf("dafs_bdb_setup(%s, %s): %s\n", argv[1], argv[2], strerror(-rc));
        return 3;
    }
    a = 3;
#endif
    if (argc < a + 2) {
        fprintf(stderr, "usage: %s MODE HOME [ARG]\n", argv[0]);
        return 64;
    }
    const char *mode = argv[a], *home = argv[a + 1];
    const char *arg = argc > a + 2 ? argv[a + 2] : "100";
    if (strcmp(mode, "basic") == 0)
        test_basic(home);
    else if (strcmp(mode, "crash") == 0)
        test_crash(home, atoi(arg));
    else if (strcmp(mode, "recover") == 0)
        test_recover(home, atoi(arg));
    else if (strcmp(mode, "open") == 0)
        test_open(home, arg);
    else if (strcmp(mode, "cache") == 0)
        test_cache(home);
    else if (strcmp(mode, "threads") == 0)
        test_threads(home);
    else if (strcmp(mode, "register") == 0)
        test_register(home);
    else if (strcmp(mode, "noenv") == 0)
        test_noenv(home);
    else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 64;
    }
    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
