/*
 * Where a database file lives, and the dafs sessions of the VFS.
 *
 * A name is on dafs when the database URI says `server=HOST:PORT` (or
 * `server=dafs+shm:///path/dafsd.sock`; the name is then a path inside the export), or
 * when it lies under a prefix of DAFS_MOUNT, the preload library's variable
 * (`/dafs=dafs://127.0.0.1:7420/dir`, comma-separated; the same URL forms). With
 * DAFS_MOUNT set, names outside every prefix are local files (like the preload library
 * leaves them alone); with neither, opening fails with SQLITE_CANTOPEN and a message.
 */
#include "dafs_sqlite_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static dsq_file *mains; /* open main databases, under table_mu */

void dsq_log(const char *fmt, ...) {
    char msg[2 * DSQ_PATH_MAX_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* stderr, as the preload library does: sqlite3's own message for a failed open is
     * only "unable to open database file", which would hide the reason. */
    fprintf(stderr, "dafs_sqlite: %s\n", msg);
    sqlite3_log(SQLITE_CANTOPEN, "dafs_sqlite: %s", msg);
}

static int copy(char *dst, size_t cap, const char *src, size_t n) {
    if (n >= cap) return -1;
    memcpy(dst, src, n);
    dst[n] = 0;
    return 0;
}

/* A dafs URL (dafs://host:port/dir, dafs+shm:///x.sock/dir) or plain host:port into a
 * connect target and a directory inside the export (no trailing slash, "" = root). */
static int parse_url(const char *url, dsq_where *w) {
    const char *base;
    if (strncmp(url, "dafs+shm://", 11) == 0) {
        const char *sock = strstr(url, ".sock");
        while (sock && sock[5] != 0 && sock[5] != '/') sock = strstr(sock + 5, ".sock");
        if (!sock || url[11] != '/') return -1;
        base = sock + 5;
        if (copy(w->target, sizeof w->target, url, (size_t)(base - url))) return -1;
    } else {
        const char *hp = strncmp(url, "dafs://", 7) == 0 ? url + 7 : url;
        base = strchr(hp, '/');
        if (!base) base = hp + strlen(hp);
        if (base == hp || !memchr(hp, ':', (size_t)(base - hp))) return -1;
        if (copy(w->target, sizeof w->target, hp, (size_t)(base - hp))) return -1;
    }
    size_t n = strlen(base);
    while (n > 0 && base[n - 1] == '/') n--;
    return copy(w->export_base, sizeof w->export_base, base, n);
}

/* The DAFS_MOUNT entry with the longest prefix that `path` equals or lies below. */
static int match_mount(const char *spec, const char *path, dsq_where *w) {
    size_t best = 0;
    const char *p = spec;
    while (*p) {
        const char *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        if (!eq || *p != '/') {
            dsq_log("DAFS_MOUNT: malformed entry `%.*s` (expected /PREFIX=URL)", (int)(end - p), p);
            return DSQ_NOWHERE;
        }
        size_t plen = (size_t)(eq - p);
        while (plen > 1 && p[plen - 1] == '/') plen--;
        if (plen > best && strncmp(path, p, plen) == 0 && (path[plen] == '/' || path[plen] == 0)) {
            char url[DSQ_PATH_MAX_BYTES];
            dsq_where cand = {0};
            if (copy(url, sizeof url, eq + 1, (size_t)(end - eq - 1)) || parse_url(url, &cand) ||
                copy(cand.local_prefix, sizeof cand.local_prefix, p, plen)) {
                dsq_log("DAFS_MOUNT: bad URL in `%.*s`", (int)(end - p), p);
                return DSQ_NOWHERE;
            }
            cand.tcp = w->tcp;
            *w = cand;
            best = plen;
        }
        p = *end ? end + 1 : end;
    }
    return best ? DSQ_ON_DAFS : DSQ_LOCAL;
}

int dsq_resolve(const char *path, const char *uri_server, const char *uri_provider,
                dsq_where *w) {
    memset(w, 0, sizeof *w);
    const char *prov = uri_provider ? uri_provider : getenv("DAFS_PROVIDER");
    w->tcp = prov && strcmp(prov, "tcp") == 0;
    if (uri_server && *uri_server) {
        if (parse_url(uri_server, w)) {
            dsq_log("%s: bad server=%s (HOST:PORT, dafs://HOST:PORT or dafs+shm:///x.sock)",
                    path, uri_server);
            return DSQ_NOWHERE;
        }
        /* server= names the server only: the database name is the path in the export. */
        w->export_base[0] = 0;
        return DSQ_ON_DAFS;
    }
    const char *mounts = getenv("DAFS_MOUNT");
    if (mounts && *mounts) return match_mount(mounts, path, w);
    dsq_log("%s: no dafs server: add server=HOST:PORT to the URI "
            "(file:%s?vfs=dafs&server=...) or set DAFS_MOUNT", path, path);
    return DSQ_NOWHERE;
}

int dsq_export_path(const dsq_conn *c, const char *path, char *out, size_t out_len) {
    size_t plen = strlen(c->local_prefix);
    if (strncmp(path, c->local_prefix, plen) != 0) return -1;
    const char *rest = path + plen;
    int n = snprintf(out, out_len, "%s%s", c->export_base, rest);
    if (n <= 0 || (size_t)n >= out_len) return -1;
    return 0;
}

dsq_conn *dsq_conn_open(const dsq_where *w, int *err) {
    dsq_conn *c = sqlite3_malloc(sizeof *c);
    if (!c) {
        *err = -ENOMEM;
        return NULL;
    }
    memset(c, 0, sizeof *c);
    dafs_options_t o = {0};
    o.provider = w->tcp ? DAFS_PROVIDER_TCP : DAFS_PROVIDER_AUTO;
    o.secret_file = getenv("DAFS_SECRET_FILE");
    *err = dafs_connect(w->target, &o, &c->client);
    if (*err) {
        sqlite3_free(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    c->refs = 1;
    memcpy(c->target, w->target, sizeof c->target);
    memcpy(c->local_prefix, w->local_prefix, sizeof c->local_prefix);
    memcpy(c->export_base, w->export_base, sizeof c->export_base);
    return c;
}

void dsq_conn_ref(dsq_conn *c) {
    pthread_mutex_lock(&table_mu);
    c->refs++;
    pthread_mutex_unlock(&table_mu);
}

void dsq_conn_release(dsq_conn *c) {
    pthread_mutex_lock(&table_mu);
    int last = --c->refs == 0;
    pthread_mutex_unlock(&table_mu);
    if (!last) return;
    dafs_disconnect(c->client); /* ends the session: any lock left is released */
    pthread_mutex_destroy(&c->mu);
    sqlite3_free(c);
}

void dsq_main_add(dsq_file *f) {
    pthread_mutex_lock(&table_mu);
    f->next = mains;
    mains = f;
    pthread_mutex_unlock(&table_mu);
}

void dsq_main_remove(dsq_file *f) {
    pthread_mutex_lock(&table_mu);
    for (dsq_file **p = &mains; *p; p = &(*p)->next) {
        if (*p == f) {
            *p = f->next;
            break;
        }
    }
    pthread_mutex_unlock(&table_mu);
}

/* The session of the open main database a journal/WAL name belongs to, referenced, or
 * NULL. `db_name` is sqlite3_filename_database() of a name SQLite passed to xOpen: the
 * very pointer the main database was opened with, which tells two connections of one
 * database apart; `path` (xDelete/xAccess get no more) is matched as MAIN or MAIN-...
 * (-journal, -wal, -mjXXXX super-journals), longest first. */
dsq_conn *dsq_main_find(const char *db_name, const char *path) {
    dsq_conn *found = NULL;
    size_t best = 0;
    pthread_mutex_lock(&table_mu);
    for (dsq_file *f = mains; f; f = f->next) {
        if (db_name && f->main_name == db_name) {
            found = f->conn;
            break;
        }
        size_t n = strlen(f->main_name);
        if (path && n > best && strncmp(path, f->main_name, n) == 0 &&
            (path[n] == 0 || path[n] == '-')) {
            found = f->conn;
            best = n;
        }
    }
    if (found) found->refs++;
    pthread_mutex_unlock(&table_mu);
    return found;
}

/* Is `name` open as a main database on a server other than `target`? xDelete and
 * xAccess of its journal get only the name, so one process cannot tell two such
 * databases apart: the second open is refused instead. */
int dsq_main_clash(const char *name, const char *target) {
    int clash = 0;
    pthread_mutex_lock(&table_mu);
    for (dsq_file *f = mains; f && !clash; f = f->next)
        clash = strcmp(f->main_name, name) == 0 && strcmp(f->conn->target, target) != 0;
    pthread_mutex_unlock(&table_mu);
    return clash;
}
