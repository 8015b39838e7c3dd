/*
 * Seed 000 Fig. 7 for Berkeley DB 5.3: read-only transactions, each reading one small
 * record chosen uniformly at random from a B-tree of 16 KiB pages, through a fixed
 * cache, as the database grows past the cache. An ordinary Berkeley DB program: it runs
 * on dafs when libdafs_bdb is preloaded (DAFS_BDB_SERVER/DAFS_BDB_PREFIX), locally, or
 * on a FUSE mount, depending only on the paths it is given.
 *
 *   bdb_bench load FILE RECORDS
 *       create FILE (B-tree, 16 KiB pages) with RECORDS records (8-byte keys, 100-byte
 *       values), sorted inserts so pages are full
 *   bdb_bench read HOME FILE RECORDS CACHE_MIB SECONDS
 *       environment HOME (cache only: single-threaded and read-only, so no locking or
 *       logging, as in the seed), warm with a cursor scan, then random single-record
 *       reads until every record was touched twice on average (at least 500,000
 *       reads) or SECONDS pass;
 *       prints one JSON object
 */
#define _GNU_SOURCE
#include <db.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PAGE_BYTES 16384
#define VALUE_BYTES 100
#define READS_MIN 500000

static void die(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "bdb_bench: %s: %s\n", what, db_strerror(rc));
        exit(1);
    }
}

static void key_of(uint64_t i, unsigned char k[8])
{
    for (int b = 7; b >= 0; b--, i >>= 8)
        k[b] = (unsigned char)(i & 0xff); /* big-endian: key order = insertion order */
}

static void load(const char *file, uint64_t records)
{
    DB *db;
    die(db_create(&db, NULL, 0), "db_create");
    die(db->set_pagesize(db, PAGE_BYTES), "set_pagesize");
    die(db->set_cachesize(db, 0, 64u << 20, 1), "set_cachesize");
    die(db->open(db, NULL, file, NULL, DB_BTREE, DB_CREATE | DB_TRUNCATE, 0644), "open");
    unsigned char k[8], v[VALUE_BYTES];
    memset(v, 'v', sizeof v);
    for (uint64_t i = 0; i < records; i++) {
        key_of(i, k);
        memcpy(v, k, sizeof k);
        DBT key = {.data = k, .size = sizeof k}, val = {.data = v, .size = sizeof v};
        die(db->put(db, NULL, &key, &val, DB_NOOVERWRITE), "put");
    }
    die(db->close(db, 0), "close");
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void bench_read(const char *home, const char *file, uint64_t records, uint32_t cache_mib, double seconds)
{
    DB_ENV *env;
    die(db_env_create(&env, 0), "db_env_create");
    env->set_errfile(env, stderr);
    die(env->set_cachesize(env, cache_mib / 1024, (cache_mib % 1024) << 20, 1), "set_cachesize");
    /* No mmap of the read-only database in any mode (mp_mmapsize 0 would mean the
     * 10 MB default): every page goes through the cache, as on dafs. */
    die(env->set_flags(env, DB_NOMMAP, 1), "set_flags(DB_NOMMAP)");
    die(env->open(env, home, DB_CREATE | DB_INIT_MPOOL, 0644), "env open");
    DB *db;
    die(db_create(&db, env, 0), "db_create");
    die(db->open(db, NULL, file, NULL, DB_BTREE, DB_RDONLY, 0), "db open");
    /* Warm: one scan brings every page through the server's (or the page) cache and
     * leaves the db cache full. */
    DBC *c;
    die(db->cursor(db, NULL, &c, 0), "cursor");
    DBT k = {0}, v = {0};
    uint64_t scanned = 0;
    while (c->get(c, &k, &v, DB_NEXT) == 0)
        scanned++;
    c->close(c);
    if (scanned != records) {
        fprintf(stderr, "bdb_bench: %s holds %llu records, expected %llu\n", file,
                (unsigned long long)scanned, (unsigned long long)records);
        exit(1);
    }
    DB_MPOOL_STAT *before;
    die(env->memp_stat(env, &before, NULL, DB_STAT_CLEAR), "memp_stat");
    free(before);
    /* Every record touched twice on average (the seed), but at least READS_MIN reads so
     * that small, fully cached databases still run long enough to time. */
    uint64_t seed = 0x9e3779b97f4a7c15ull, reads = 0;
    uint64_t target = 2 * records > READS_MIN ? 2 * records : READS_MIN;
    unsigned char kb[8], vb[VALUE_BYTES];
    double t0 = now_s(), t = t0;
    while (reads < target && t - t0 < seconds) {
        for (int i = 0; i < 256 && reads < target; i++, reads++) {
            key_of(xorshift(&seed) % records, kb);
            DBT key = {.data = kb, .size = sizeof kb};
            DBT val = {.data = vb, .ulen = sizeof vb, .flags = DB_DBT_USERMEM};
            die(db->get(db, NULL, &key, &val, 0), "get");
            if (memcmp(vb, kb, sizeof kb) != 0) {
                fprintf(stderr, "bdb_bench: wrong record\n");
                exit(1);
            }
        }
        t = now_s();
    }
    DB_MPOOL_STAT *st;
    die(env->memp_stat(env, &st, NULL, 0), "memp_stat");
    u_int32_t pages;
    die(db->get_pagesize(db, &pages), "get_pagesize");
    printf("{\"records\": %llu, \"page_bytes\": %u, \"cache_mib\": %u, \"reads\": %llu, "
           "\"seconds\": %.3f, \"reads_per_s\": %.0f, \"cache_hits\": %lu, \"cache_misses\": %lu}\n",
           (unsigned long long)records, pages, cache_mib, (unsigned long long)reads, t - t0,
           (double)reads / (t - t0), (unsigned long)st->st_cache_hit, (unsigned long)st->st_cache_miss);
    free(st);
    die(db->close(db, 0), "db close");
    die(env->close(env, 0), "env close");
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "load") == 0) {
        load(argv[2], strtoull(argv[3], NULL, 10));
        return 0;
    }
    if (argc == 7 && strcmp(argv[1], "read") == 0) {
        bench_read(argv[2], argv[3], strtoull(argv[4], NULL, 10), (uint32_t)atoi(argv[5]), atof(argv[6]));
        return 0;
    }
    fprintf(stderr, "usage: bdb_bench load FILE RECORDS | read HOME FILE RECORDS CACHE_MIB SECONDS\n");
    return 64;
}
