/*
 * libdafs_bdb: setup, path mapping and counters. The hooks themselves are in
 * bdb_hooks.c (files) and bdb_regions.c (region memory).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bdb_internal.h"

struct bdb_state bdb = {.mu = PTHREAD_MUTEX_INITIALIZER, .cg = 0};

/* Append the components of `path` to `out` (absolute, no trailing '/'), dropping "."
 * and empty components and resolving ".." lexically (symlinks are not followed: the
 * prefix is compared as text). */
static int append_components(char *out, size_t *n, const char *path)
{
    const char *p = path;
    while (*p) {
        while (*p == '/')
            p++;
        const char *e = p;
        while (*e && *e != '/')
            e++;
        size_t len = (size_t)(e - p);
        if (len == 0 || (len == 1 && p[0] == '.')) {
            /* nothing */
        } else if (len == 2 && p[0] == '.' && p[1] == '.') {
            while (*n > 0 && out[*n - 1] != '/')
                (*n)--;
            if (*n > 0)
                (*n)--; /* the '/' itself */
        } else {
            if (*n + 1 + len + 1 > PATH_MAX)
                return -ENAMETOOLONG;
            out[(*n)++] = '/';
            memcpy(out + *n, p, len);
            *n += len;
        }
        p = e;
    }
    out[*n] = '\0';
    return 0;
}

int bdb_map(const char *path, char local[PATH_MAX], char remote[PATH_MAX])
{
    size_t n = 0;
    if (path == NULL || *path == '\0')
        return -ENOENT;
    if (path[0] != '/') {
        char cwd[PATH_MAX];
        if (getcwd(cwd, sizeof cwd) == NULL)
            return -errno;
        int rc = append_components(local, &n, cwd);
        if (rc < 0)
            return rc;
    }
    int rc = append_components(local, &n, path);
    if (rc < 0)
        return rc;
    if (n == 0) {
        local[0] = '/';
        local[1] = '\0';
        n = 1;
    }
    if (!bdb.installed || strncmp(local, bdb.prefix, bdb.prefix_len) != 0)
        return 0;
    const char *rest = local + bdb.prefix_len;
    if (*rest != '\0' && *rest != '/')
        return 0; /* "/prefix2" is not under "/prefix" */
    snprintf(remote, PATH_MAX, "%s", *rest ? rest : "/");
    return 1;
}

int bdb_mkdir_parent(const char *path)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL || slash == dir)
        return 0;
    *slash = '\0';
    for (char *p = dir + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(dir, 0755) != 0 && errno != EEXIST)
                return -errno;
            *p = c;
            if (c == '\0')
                break;
        }
    }
    return 0;
}

struct bdb_file *bdb_file_of(int fd)
{
    for (size_t i = 0; i < bdb.files_n; i++)
        if (bdb.files[i].fd == fd)
            return &bdb.files[i];
    return NULL;
}

struct bdb_region *bdb_region_of(const void *buf, size_t len)
{
    const char *b = buf;
    for (size_t i = 0; i < bdb.regions_n; i++) {
        struct bdb_region *r = &bdb.regions[i];
        const char *a = r->addr;
        if (r->registered && b >= a && len <= r->len_bytes && (size_t)(b - a) <= r->len_bytes - len)
            return r;
    }
    return NULL;
}

static size_t env_limit(const char *name, size_t dflt)
{
    const char *v = getenv(name);
    if (v == NULL || *v == '\0')
        return dflt;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end != '\0' || x == 0 || x > 1u << 20) {
        fprintf(stderr, "dafs_bdb: ignoring %s=%s (want 1..1048576); using %zu\n", name, v, dflt);
        return dflt;
    }
    return (size_t)x;
}

/* Tables and prefix; no connection yet. 0 or -errno. */
static int init_state(const char *prefix)
{
    if (prefix == NULL || prefix[0] == '\0')
        return -EINVAL;
    size_t n = 0;
    int rc = 0;
    if (prefix[0] != '/') {
        char cwd[PATH_MAX];
        if (getcwd(cwd, sizeof cwd) == NULL)
            return -errno;
        rc = append_components(bdb.prefix, &n, cwd); /* relative to the cwd at setup */
    }
    if (rc == 0)
        rc = append_components(bdb.prefix, &n, prefix);
    if (rc < 0)
        return rc;
    if (n == 0)
        return -EINVAL; /* "/" would send every path to dafs */
    bdb.prefix_len = n;
    if (n + 2 >= PATH_MAX)
        return -ENAMETOOLONG;
    char probe[PATH_MAX];
    memcpy(probe, bdb.prefix, n);
    memcpy(probe + n, "/x", 3);
    if ((rc = bdb_mkdir_parent(probe)) < 0)
        return rc;
    bdb.files_max = env_limit("DAFS_BDB_FILES_MAX", BDB_FILES_MAX_DEFAULT);
    bdb.regions_max = env_limit("DAFS_BDB_REGIONS_MAX", BDB_REGIONS_MAX_DEFAULT);
    bdb.files = calloc(bdb.files_max, sizeof *bdb.files);
    bdb.regions = calloc(bdb.regions_max, sizeof *bdb.regions);
    if (bdb.files == NULL || bdb.regions == NULL) {
        free(bdb.files);
        free(bdb.regions);
        bdb.files = NULL;
        bdb.regions = NULL;
        return -ENOMEM;
    }
    return 0;
}

static int connect_client(const char *server)
{
    dafs_options_t o = {0};
    const char *prov = getenv("DAFS_BDB_PROVIDER");
    if (prov != NULL && strcmp(prov, "tcp") == 0)
        o.provider = DAFS_PROVIDER_TCP;
    else if (prov != NULL && *prov && strcmp(prov, "auto") != 0)
        return -EINVAL;
    int rc = dafs_connect(server, &o, &bdb.client);
    if (rc < 0)
        return rc;
    rc = dafs_cg_create(bdb.client, &bdb.cg);
    if (rc < 0) {
        dafs_disconnect(bdb.client);
        bdb.client = NULL;
    }
    return rc;
}

static int install_all(void)
{
    int rc = bdb_install_hooks();
    if (rc == 0)
        rc = bdb_install_region_hooks();
    return rc;
}

/* Set up under bdb.mu. A connection failure with `keep_broken` leaves the state in
 * place with broken_errno set (the environment-variable route); otherwise undone. */
static int setup(const char *server, const char *prefix, int keep_broken)
{
    if (server == NULL || *server == '\0')
        return -EINVAL;
    pthread_mutex_lock(&bdb.mu);
    int rc = bdb.installed ? -EALREADY : init_state(prefix);
    if (rc == 0 && (rc = connect_client(server)) < 0) {
        if (keep_broken) {
            bdb.broken_errno = -rc;
            bdb.installed = 1;
        } else {
            free(bdb.files);
            free(bdb.regions);
            bdb.files = NULL;
            bdb.regions = NULL;
        }
    } else if (rc == 0) {
        bdb.installed = 1;
    }
    pthread_mutex_unlock(&bdb.mu);
    return rc;
}

int dafs_bdb_setup(const char *server, const char *prefix)
{
    int rc = setup(server, prefix, 0);
    return rc == 0 ? install_all() : rc;
}

int dafs_bdb_stats(dafs_bdb_stats_t *out)
{
    if (out == NULL)
        return -EINVAL;
    pthread_mutex_lock(&bdb.mu);
    int rc = -ENOTCONN;
    if (bdb.client != NULL) {
        *out = bdb.stats;
        out->files_open = bdb.files_n;
        rc = dafs_stats(bdb.client, &out->client);
    }
    pthread_mutex_unlock(&bdb.mu);
    return rc;
}

static void print_stats(void)
{
    dafs_bdb_stats_t s;
    if (dafs_bdb_stats(&s) != 0)
        return;
    fprintf(stderr,
            "dafs_bdb: reads registered %llu plain %llu, writes registered %llu plain %llu, "
            "regions registered %llu unregistered %llu; client direct_reads %llu inline_reads %llu "
            "off_direct_path %llu, waits spun %llu slept %llu, zero-filled reads %llu\n",
            (unsigned long long)s.reads_registered, (unsigned long long)s.reads_plain,
            (unsigned long long)s.writes_registered, (unsigned long long)s.writes_plain,
            (unsigned long long)s.regions_registered, (unsigned long long)s.regions_unregistered,
            (unsigned long long)s.client.direct_reads, (unsigned long long)s.client.inline_reads,
            (unsigned long long)s.client.off_direct_path, (unsigned long long)s.client.waits_spun,
            (unsigned long long)s.client.waits_slept, (unsigned long long)s.reads_zero_filled);
}

/* The environment-variable route: DAFS_BDB_SERVER + DAFS_BDB_PREFIX make an unmodified
 * program (linked or preloaded) use dafs. A connection failure is not silent: the hooks
 * are installed anyway and paths under the prefix fail with the connection's errno, so
 * nothing is written to the local placeholders by mistake. */
__attribute__((constructor)) static void bdb_from_env(void)
{
    const char *server = getenv("DAFS_BDB_SERVER");
    if (server == NULL || *server == '\0')
        return;
    const char *prefix = getenv("DAFS_BDB_PREFIX");
    if (prefix == NULL || *prefix == '\0') {
        fprintf(stderr, "dafs_bdb: DAFS_BDB_SERVER is set but DAFS_BDB_PREFIX is not: no hooks installed\n");
        return;
    }
    int rc = setup(server, prefix, 1);
    if (rc == -EALREADY)
        return;
    if (rc < 0 && bdb.broken_errno == 0) {
        fprintf(stderr, "dafs_bdb: DAFS_BDB_PREFIX=%s: %s: no hooks installed\n", prefix, dafs_strerror(rc));
        return;
    }
    if (install_all() < 0) {
        fprintf(stderr, "dafs_bdb: cannot install the Berkeley DB hooks\n");
        return;
    }
    if (rc < 0) {
        fprintf(stderr, "dafs_bdb: cannot connect to %s: %s; paths under %s fail with that error\n",
                server, dafs_strerror(rc), bdb.prefix);
        return;
    }
    const char *st = getenv("DAFS_BDB_STATS");
    if (st != NULL && strcmp(st, "1") == 0)
        atexit(print_stats);
}
