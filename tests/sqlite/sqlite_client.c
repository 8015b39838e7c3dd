/*
 * Test client of the dafs SQLite VFS: a C program that loads libdafs_sqlite.so with
 * sqlite3_load_extension and works on one database (scripts/test-sqlite.sh runs it).
 *
 *   sqlite_client EXT URI init                 create tables c(n) = 0 and log(who, n)
 *   sqlite_client EXT URI counter WHO N        N read-modify-write transactions:
 *        BEGIN; SELECT n; UPDATE c SET n = old + 1; INSERT INTO log; COMMIT, retried on
 *        SQLITE_BUSY (busy_timeout 10 s; a deferred transaction that cannot upgrade is
 *        rolled back and run again). Without working locks updates get lost.
 *   sqlite_client EXT URI twoconn              two connections of this process: while
 *        the first holds RESERVED, the second reads but gets SQLITE_BUSY for a write
 *   sqlite_client EXT URI threads N            two threads, each with its own connection,
 *        run N counter transactions each (as "counter")
 *   sqlite_client EXT URI fill ROWS            insert ROWS rows (v = 1, 1000 zero bytes)
 *        into big, committed
 *   sqlite_client EXT URI hang                 BEGIN, rewrite every row of big (v = 2, 1000
 *        random bytes) and set c.n = -1 with a 10-page cache (so changed pages are written
 *        into the database file before COMMIT), print "in-transaction", wait to be killed
 *   sqlite_client EXT URI check                integrity_check, then print
 *        "ok n=<c.n> log=<rows of log> big=<rows of big> v=<sum of big.v>"
 * Exit status 0 on success; errors go to stderr with SQLite's message.
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static sqlite3 *db;
static const char *uri;

static int die(const char *what) {
    fprintf(stderr, "sqlite_client: %s: %s (%d)\n", what, db ? sqlite3_errmsg(db) : "-",
            db ? sqlite3_extended_errcode(db) : 0);
    exit(1);
}

static void exec(const char *sql) {
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "sqlite_client: %s: %s\n", sql, err ? err : "?");
        exit(1);
    }
}

static sqlite3_int64 one(const char *sql) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) die(sql);
    if (sqlite3_step(st) != SQLITE_ROW) die(sql);
    sqlite3_int64 v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* One read-modify-write transaction; SQLITE_BUSY (also from COMMIT) -> rolled back,
 * returns 0 so the caller retries. */
static int increment(const char *who) {
    sqlite3_stmt *st;
    exec("BEGIN");
    int rc = sqlite3_prepare_v2(db, "SELECT n FROM c", -1, &st, NULL);
    if (rc != SQLITE_OK) die("prepare select");
    rc = sqlite3_step(st);
    sqlite3_int64 n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (rc == SQLITE_BUSY) goto busy;
    if (rc != SQLITE_ROW) die("select n");
    char sql[256];
    snprintf(sql, sizeof sql, "UPDATE c SET n = %lld; INSERT INTO log VALUES ('%s', %lld);",
             (long long)n + 1, who, (long long)n + 1);
    rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (rc == SQLITE_OK) return 1;
    if ((rc & 0xff) != SQLITE_BUSY) die("update/commit");
busy:
    if (!sqlite3_get_autocommit(db)) exec("ROLLBACK");
    return 0;
}

static sqlite3 *open_db(void) {
    sqlite3 *d;
    int fl = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(uri, &d, fl, NULL) != SQLITE_OK) {
        fprintf(stderr, "sqlite_client: open %s: %s\n", uri, sqlite3_errmsg(d));
        exit(1);
    }
    sqlite3_busy_timeout(d, 10000);
    return d;
}

static int two_connections(void) {
    sqlite3 *a = open_db(), *b = open_db();
    sqlite3_busy_timeout(b, 0);
    int ok = sqlite3_exec(a, "BEGIN IMMEDIATE; UPDATE c SET n = n + 1;", NULL, NULL, NULL) == SQLITE_OK;
    ok = ok && sqlite3_exec(b, "SELECT n FROM c", NULL, NULL, NULL) == SQLITE_OK;
    int busy = sqlite3_exec(b, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    ok = ok && busy == SQLITE_BUSY;
    ok = ok && sqlite3_exec(a, "COMMIT", NULL, NULL, NULL) == SQLITE_OK;
    ok = ok && sqlite3_exec(b, "BEGIN IMMEDIATE; UPDATE c SET n = n + 1; COMMIT;", NULL, NULL, NULL) == SQLITE_OK;
    printf("twoconn: second writer got %d (SQLITE_BUSY is 5), %s\n", busy, ok ? "ok" : "FAILED");
    sqlite3_close(a);
    sqlite3_close(b);
    return ok ? 0 : 1;
}

struct worker { char who[16]; int n, retries; };

/* Each thread has its own connection (SQLITE_OPEN_NOMUTEX: SQLite does not serialise
 * them), so the VFS sees two sessions used from two threads at once. */
static void *thread_main(void *arg) {
    struct worker *w = arg;
    sqlite3 *d = open_db();
    for (int done = 0; done < w->n;) {
        sqlite3_stmt *st;
        sqlite3_exec(d, "BEGIN", NULL, NULL, NULL);
        int rc = sqlite3_prepare_v2(d, "SELECT n FROM c", -1, &st, NULL);
        rc = rc == SQLITE_OK ? sqlite3_step(st) : rc;
        sqlite3_int64 n = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
        sqlite3_finalize(st);
        char sql[160];
        snprintf(sql, sizeof sql, "UPDATE c SET n = %lld; INSERT INTO log VALUES ('%s', %lld); COMMIT;",
                 (long long)n + 1, w->who, (long long)n + 1);
        if (rc == SQLITE_ROW && sqlite3_exec(d, sql, NULL, NULL, NULL) == SQLITE_OK) {
            done++;
        } else if ((sqlite3_errcode(d) & 0xff) == SQLITE_BUSY) {
            w->retries++;
            if (!sqlite3_get_autocommit(d)) sqlite3_exec(d, "ROLLBACK", NULL, NULL, NULL);
        } else {
            fprintf(stderr, "sqlite_client: thread %s: %s\n", w->who, sqlite3_errmsg(d));
            exit(1);
        }
    }
    sqlite3_close(d);
    return NULL;
}

static int threads(int n) {
    pthread_t t[2];
    struct worker w[2] = {{"thread-a", n, 0}, {"thread-b", n, 0}};
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, thread_main, &w[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    printf("threads: %d increments each, %d and %d busy retries\n", n, w[0].retries, w[1].retries);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: sqlite_client EXT URI init|counter WHO N|twoconn|threads N|fill ROWS|hang|check\n");
        return 2;
    }
    /* Load the extension through a first connection; it registers the VFS for good. */
    sqlite3 *boot;
    char *err = NULL;
    if (sqlite3_open(":memory:", &boot) != SQLITE_OK) return 1;
    sqlite3_enable_load_extension(boot, 1);
    if (sqlite3_load_extension(boot, argv[1], NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "sqlite_client: load %s: %s\n", argv[1], err ? err : "?");
        return 1;
    }
    sqlite3_close(boot);
    uri = argv[2];
    const char *cmd = argv[3];
    if (strcmp(cmd, "twoconn") == 0) return two_connections();
    if (strcmp(cmd, "threads") == 0 && argc == 5) return threads(atoi(argv[4]));
    db = open_db();
    if (strcmp(cmd, "init") == 0) {
        exec("CREATE TABLE c(n INTEGER); INSERT INTO c VALUES (0);"
             "CREATE TABLE log(who TEXT, n INTEGER UNIQUE);"
             "CREATE TABLE big(id INTEGER PRIMARY KEY, v INTEGER, pad BLOB);");
    } else if (strcmp(cmd, "counter") == 0 && argc == 6) {
        int want = atoi(argv[5]), done = 0, retries = 0;
        while (done < want) {
            if (increment(argv[4])) done++;
            else retries++;
        }
        printf("%s: %d increments, %d busy retries\n", argv[4], done, retries);
    } else if (strcmp(cmd, "fill") == 0 && argc == 5) {
        char sql[256];
        snprintf(sql, sizeof sql,
                 "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < %d)"
                 " INSERT INTO big(v, pad) SELECT 1, zeroblob(1000) FROM s;", atoi(argv[4]));
        exec(sql);
    } else if (strcmp(cmd, "hang") == 0) {
        exec("PRAGMA cache_size = 10; BEGIN;"
             "UPDATE big SET v = 2, pad = randomblob(1000); UPDATE c SET n = -1;");
        printf("in-transaction\n");
        fflush(stdout);
        for (;;) pause();
    } else if (strcmp(cmd, "check") == 0) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) != SQLITE_OK)
            die("integrity_check");
        int rc = sqlite3_step(st);
        const char *res = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
        if (!res || strcmp(res, "ok") != 0) {
            fprintf(stderr, "sqlite_client: integrity_check: %s\n", res ? res : sqlite3_errmsg(db));
            return 1;
        }
        sqlite3_finalize(st);
        printf("ok n=%lld log=%lld big=%lld v=%lld\n", (long long)one("SELECT n FROM c"),
               (long long)one("SELECT count(*) FROM log"), (long long)one("SELECT count(*) FROM big"),
               (long long)one("SELECT total(v) FROM big"));
    } else {
        fprintf(stderr, "sqlite_client: unknown command %s\n", cmd);
        return 2;
    }
    if (sqlite3_close(db) != SQLITE_OK) die("close");
    return 0;
}
