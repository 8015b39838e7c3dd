/*
 * A speedtest-style SQLite benchmark (in the spirit of SQLite's speedtest1): one
 * database, three phases of small transactions, transactions per second for each.
 *
 *   speedtest [--ext LIB] [--txns N] [--rows R] [--journal MODE] [--label L] URI-OR-PATH
 *
 *   insert  N transactions, each inserting R rows (integer key, indexed random k,
 *           100-byte text)
 *   select  N transactions, each running R indexed range selects on k
 *   update  N transactions, each updating R rows found through the index on k
 *
 * Default journal (DELETE; --journal sets another rollback mode) and synchronous (FULL)
 * settings: every write transaction creates, writes and fsyncs the journal, writes and
 * fsyncs the database, deletes the journal. --ext loads a SQLite extension first (libdafs_sqlite.so for vfs=dafs URIs).
 * Prints one JSON object on stdout: {"label":...,"insert_tps":...,"select_tps":...,
 * "update_tps":...,"total_tps":...,"txns":N,"rows":R}. Exit status 1 on any SQLite error.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static sqlite3 *db;

static void die(const char *what) {
    fprintf(stderr, "speedtest: %s: %s\n", what, sqlite3_errmsg(db));
    exit(1);
}

static void exec(const char *sql) {
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) die(sql);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static unsigned rnd_state = 12345;
static unsigned rnd(void) {
    rnd_state = rnd_state * 1103515245u + 12345u;
    return (rnd_state >> 8) & 0xffffff;
}

static void step_reset(sqlite3_stmt *st, const char *what) {
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    }
    if (rc != SQLITE_DONE) die(what);
    sqlite3_reset(st);
}

/* Run `txns` transactions of `rows` executions of `sql` with random k; seconds taken. */
static double phase(const char *sql, int txns, int rows, int text) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) die(sql);
    char pad[101];
    double t0 = now_s();
    for (int t = 0; t < txns; t++) {
        exec("BEGIN");
        for (int r = 0; r < rows; r++) {
            unsigned k = rnd() % 1000000;
            sqlite3_bind_int(st, 1, (int)k);
            if (text) {
                for (int i = 0; i < 100; i++) pad[i] = (char)('a' + (rnd() % 26));
                pad[100] = 0;
                sqlite3_bind_text(st, 2, pad, 100, SQLITE_TRANSIENT);
            }
            step_reset(st, sql);
        }
        exec("COMMIT");
    }
    double dt = now_s() - t0;
    sqlite3_finalize(st);
    return dt;
}

int main(int argc, char **argv) {
    const char *ext = NULL, *label = "run", *target = NULL, *journal = "delete";
    int txns = 500, rows = 10;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--ext") == 0 && i + 1 < argc) ext = argv[++i];
        else if (strcmp(argv[i], "--txns") == 0 && i + 1 < argc) txns = atoi(argv[++i]);
        else if (strcmp(argv[i], "--rows") == 0 && i + 1 < argc) rows = atoi(argv[++i]);
        else if (strcmp(argv[i], "--label") == 0 && i + 1 < argc) label = argv[++i];
        else if (strcmp(argv[i], "--journal") == 0 && i + 1 < argc) journal = argv[++i];
        else if (!target && argv[i][0] != '-') target = argv[i];
        else {
            fprintf(stderr, "usage: speedtest [--ext LIB] [--txns N] [--rows R] [--journal MODE] [--label L] URI\n");
            return 2;
        }
    }
    if (!target || txns <= 0 || rows <= 0) {
        fprintf(stderr, "speedtest: need a database and positive --txns/--rows\n");
        return 2;
    }
    if (ext) {
        sqlite3 *boot;
        char *err = NULL;
        if (sqlite3_open(":memory:", &boot) != SQLITE_OK) return 1;
        sqlite3_enable_load_extension(boot, 1);
        if (sqlite3_load_extension(boot, ext, NULL, &err) != SQLITE_OK) {
            fprintf(stderr, "speedtest: load %s: %s\n", ext, err ? err : "?");
            return 1;
        }
        sqlite3_close(boot);
    }
    int fl = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI;
    if (sqlite3_open_v2(target, &db, fl, NULL) != SQLITE_OK) die("open");
    char pragma[64];
    snprintf(pragma, sizeof pragma, "PRAGMA journal_mode = %s", journal);
    sqlite3_stmt *jm;
    if (sqlite3_prepare_v2(db, pragma, -1, &jm, NULL) != SQLITE_OK || sqlite3_step(jm) != SQLITE_ROW)
        die(pragma);
    if (sqlite3_stricmp((const char *)sqlite3_column_text(jm, 0), journal) != 0) {
        fprintf(stderr, "speedtest: journal_mode %s refused (got %s)\n", journal, sqlite3_column_text(jm, 0));
        return 1;
    }
    sqlite3_finalize(jm);
    exec("DROP TABLE IF EXISTS t;"
         "CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, v TEXT);"
         "CREATE INDEX tk ON t(k);");
    double ti = phase("INSERT INTO t(k, v) VALUES (?1, ?2)", txns, rows, 1);
    double ts = phase("SELECT count(*), sum(length(v)) FROM t WHERE k BETWEEN ?1 AND ?1 + 2000",
                      txns, rows, 0);
    double tu = phase("UPDATE t SET v = ?2 WHERE k BETWEEN ?1 AND ?1 + 1000", txns, rows, 1);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW || strcmp((const char *)sqlite3_column_text(st, 0), "ok"))
        die("integrity_check after the run");
    sqlite3_finalize(st);
    if (sqlite3_close(db) != SQLITE_OK) die("close");
    printf("{\"label\":\"%s\",\"journal\":\"%s\",\"insert_tps\":%.1f,\"select_tps\":%.1f,\"update_tps\":%.1f,"
           "\"total_tps\":%.1f,\"txns\":%d,\"rows\":%d}\n",
           label, journal, txns / ti, txns / ts, txns / tu, 3.0 * txns / (ti + ts + tu), txns, rows);
    return 0;
}
