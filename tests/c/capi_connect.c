/*
 * C tests of libdafs (see test_capi.c): Connecting (options, errors, queries, providers), misuse from two threads, a lost
 * connection, and session recovery after fencing.
 */
#include "capi_test.h"

int t_version_and_strerror(void) {
    CHECK(strcmp(dafs_version(), DAFS_VERSION) == 0);
    CHECK(strcmp(dafs_strerror(-ENOENT), "No such file or directory") == 0);
    CHECK(dafs_strerror(ENOENT) == dafs_strerror(-ENOENT));
    CHECK(strcmp(dafs_strerror(0), "Success") == 0);
    CHECK(strcmp(dafs_strerror(123456), "unknown error") == 0);
    CHECK(DAFS_API_VERSION >= 1);
    return 0;
}

int t_connect_errors(void) {
    dafs_client_t *c = (dafs_client_t *)1;
    CHECK_EQ(dafs_connect(NULL, NULL, &c), -EINVAL);
    CHECK(c == NULL);
    CHECK_EQ(dafs_connect(tcp_target, NULL, NULL), -EINVAL);
    c = (dafs_client_t *)1;
    int r = dafs_connect("127.0.0.1:1", NULL, &c);
    CHECK(r < 0);
    CHECK(c == NULL);
    dafs_options_t o = {0};
    o.provider = 7;
    CHECK_EQ(dafs_connect(tcp_target, &o, &c), -EINVAL);
    o.provider = DAFS_PROVIDER_TCP;
    o.reserved[2] = 1;
    CHECK_EQ(dafs_connect(tcp_target, &o, &c), -EINVAL);
    o.reserved[2] = 0;
    o.secret_file = "/nonexistent/dafs-secret";
    CHECK_EQ(dafs_connect(tcp_target, &o, &c), -ENOENT);
    /* A secret the server does not ask for: the client refuses the server. */
    char sf[] = "/tmp/dafs-capi-secret-XXXXXX";
    int fd = mkstemp(sf);
    CHECK(fd >= 0);
    CHECK(write(fd, "short\n", 6) == 6);
    close(fd);
    o.secret_file = sf;
    CHECK_EQ(dafs_connect(tcp_target, &o, &c), -EINVAL); /* shorter than 8 bytes */
    fd = open(sf, O_WRONLY | O_TRUNC);
    CHECK(fd >= 0);
    CHECK(write(fd, "a-long-enough-secret\n", 21) == 21);
    close(fd);
    CHECK_EQ(dafs_connect(tcp_target, &o, &c), -EACCES);
    unlink(sf);
    o.secret_file = NULL;
    o.export_name = "no-such-export";
    CHECK(dafs_connect(tcp_target, &o, &c) < 0);
    CHECK(c == NULL);
    CHECK_EQ(dafs_disconnect(NULL), 0);
    return 0;
}

int t_connect_tcp_and_queries(void) {
    dafs_options_t o = {0};
    o.provider = DAFS_PROVIDER_TCP;
    o.client_id = "test_capi";
    o.slots = 8;
    o.connect_timeout_ms = 2000;
    dafs_client_t *c = NULL;
    OK(dafs_connect(tcp_target, &o, &c));
    CHECK(c != NULL);
    CHECK(strcmp(dafs_provider(c), "tcp") == 0);
    CHECK(dafs_inline_threshold(c) > 0);
    CHECK(dafs_max_io_size(c) >= dafs_inline_threshold(c));
    /* Unregistered memory stays inline up to at least 16 KiB (and the threshold). */
    CHECK(dafs_inline_threshold_unregistered(c) >= dafs_inline_threshold(c));
    CHECK(dafs_inline_threshold_unregistered(c) >= 16384);
    CHECK(dafs_slots(c) >= 1 && dafs_slots(c) <= 8);
    OK(dafs_null(c));
    dafs_stats_t s;
    OK(dafs_stats(c, &s));
    CHECK(s.requests >= 1 && s.msgs_sent >= 1 && s.msgs_received >= 1);
    CHECK_EQ(dafs_stats(c, NULL), -EINVAL);
    CHECK(strcmp(dafs_provider(NULL), "") == 0);
    CHECK_EQ(dafs_inline_threshold(NULL), 0);
    CHECK_EQ(dafs_inline_threshold_unregistered(NULL), 0);
    CHECK_EQ(dafs_max_io_size(NULL), 0);
    CHECK_EQ(dafs_slots(NULL), 0);
    OK(dafs_disconnect(c));
    return 0;
}

int t_connect_shm(void) {
    if (!shm_target) {
        fprintf(stderr, "    (DAFS_SHM_TARGET unset: only the auto check)\n");
    }
    /* host:port with the default provider switches to shared memory on this host when
     * the server offers it. */
    dafs_client_t *c = NULL;
    OK(dafs_connect(tcp_target, NULL, &c));
    const char *p = dafs_provider(c);
    CHECK(strcmp(p, shm_target ? "shm" : p) == 0);
    OK(dafs_null(c));
    OK(dafs_disconnect(c));
    if (shm_target) {
        OK(dafs_connect(shm_target, NULL, &c));
        CHECK(strcmp(dafs_provider(c), "shm") == 0);
        OK(dafs_null(c));
        OK(dafs_disconnect(c));
    }
    return 0;
}

struct hammer { dafs_client_t *c; int ok, busy, other, other_err; };

static void *hammer_thread(void *arg) {
    struct hammer *h = arg;
    for (int i = 0; i < 300; i++) {
        int r = dafs_null(h->c);
        if (r == 0) h->ok++;
        else if (r == -EBUSY) h->busy++;
        else {
            h->other++;
            h->other_err = r;
        }
    }
    return NULL;
}

int t_concurrent_misuse_is_refused(void) {
    /* Two threads on one client is a caller bug: every call must either work or be
     * refused with -EBUSY, never corrupt the session. */
    dafs_client_t *c = connect_tcp();
    CHECK(c);
    struct hammer h[2] = {{c, 0, 0, 0, 0}, {c, 0, 0, 0, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&t[i], NULL, hammer_thread, &h[i]) == 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    if (h[0].other + h[1].other)
        FAIL("%d calls failed otherwise, the last with %s", h[0].other + h[1].other,
             dafs_strerror(h[0].other ? h[0].other_err : h[1].other_err));
    CHECK_EQ(h[0].ok + h[0].busy + h[1].ok + h[1].busy, 600);
    CHECK(h[0].ok + h[1].ok > 0);
    fprintf(stderr, "    (%d calls ran, %d refused with -EBUSY)\n", h[0].ok + h[1].ok, h[0].busy + h[1].busy);
    OK(dafs_null(c)); /* still healthy */
    OK(dafs_disconnect(c));
    return 0;
}

int t_connection_loss(void) {
    const char *vt = getenv("DAFS_VICTIM_TARGET"), *vp = getenv("DAFS_VICTIM_PID");
    if (!vt || !vp) {
        fprintf(stderr, "    (DAFS_VICTIM_TARGET/DAFS_VICTIM_PID unset: skipped)\n");
        return 0;
    }
    signal(SIGPIPE, SIG_IGN);
    dafs_options_t o = {0};
    o.provider = DAFS_PROVIDER_TCP;
    dafs_client_t *c = NULL;
    OK(dafs_connect(vt, &o, &c));
    dafs_file_t *f;
    OK(dafs_open(c, "victim", DAFS_O_RDWR | DAFS_O_CREAT, 0644, &f));
    void *mem;
    dafs_region_t reg;
    OK(dafs_alloc_registered(c, 1 << 20, &mem, &reg));
    dafs_cg_t cg;
    OK(dafs_cg_create(c, &cg));
    CHECK(kill((pid_t)atoi(vp), SIGKILL) == 0);
    usleep(200 * 1000);
    /* The loss shows up either at submit or as failed completions: -ENOTCONN, or the
     * OS's code for the call that saw it. */
#define LOST(e) ((e) == -ENOTCONN || (e) == -ECONNRESET || (e) == -EPIPE)
    int r = dafs_pwrite_nb(c, f, cg, reg, 0, 1 << 20, 0, 1);
    if (r == 0) {
        dafs_completion_t cq;
        int k = dafs_cg_wait(c, cg, 1, 1, 5000, &cq);
        if (k == 1) CHECK(LOST(cq.result));
        else CHECK(LOST(k));
    } else {
        CHECK(LOST(r));
    }
    CHECK_EQ(dafs_null(c), -ENOTCONN);
    CHECK_EQ(dafs_pwrite(c, f, "x", 1, 0), -ENOTCONN);
    OK(dafs_unregister(c, reg)); /* the memory is ours again */
    OK(dafs_disconnect(c));
    return 0;
}

/* One command on dafsd's admin socket (what `dafs admin` sends); 0 if the answer says ok. */
static int admin_cmd(const char *sock_path, const char *line) {
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s < 0) return -1;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sock_path);
    char buf[4096];
    int n = 0, r = -1;
    if (connect(s, (struct sockaddr *)&a, sizeof a) == 0 && write(s, line, strlen(line)) == (ssize_t)strlen(line) && write(s, "\n", 1) == 1) {
        ssize_t k;
        while (n < (int)sizeof buf - 1 && (k = read(s, buf + n, sizeof buf - 1 - n)) > 0) n += (int)k;
        buf[n] = 0;
        r = strstr(buf, "\"ok\": true") ? 0 : -1;
    }
    close(s);
    return r;
}

/* A lost session (here: the client is fenced) is reported by every call until
 * dafs_reestablish, which re-opens the open files in place. */
int t_session_recovery(void) {
    const char *sock = getenv("DAFS_ADMIN_SOCKET");
    if (!sock) {
        fprintf(stderr, "    (DAFS_ADMIN_SOCKET unset: skipped)\n");
        return 0;
    }
    char id[64], cmd[128];
    snprintf(id, sizeof id, "capi-recover-%d", (int)getpid());
    dafs_options_t o = {0};
    o.client_id = id;
    dafs_client_t *c = NULL;
    OK(dafs_connect(tcp_target, &o, &c));
    OK(dafs_session_lost(c));
    char path[256];
    snprintf(path, sizeof path, "%s/recover", dir);
    dafs_file_t *f;
    OK(dafs_open(c, path, DAFS_O_RDWR | DAFS_O_CREAT | DAFS_O_TRUNC, 0644, &f));
    CHECK_EQ(dafs_pwrite(c, f, "hello, world", 12, 0), 12);
    snprintf(cmd, sizeof cmd, "fence %s", id);
    CHECK_EQ(admin_cmd(sock, cmd), 0);
    CHECK_EQ(dafs_null(c), -EPERM);
    CHECK_EQ(dafs_session_lost(c), -EPERM);
    char b[8] = {0};
    CHECK_EQ(dafs_pread(c, f, b, 5, 7), -EPERM);
    CHECK_EQ(dafs_reestablish(c), -EPERM); /* still fenced */
    snprintf(cmd, sizeof cmd, "unfence %s", id);
    CHECK_EQ(admin_cmd(sock, cmd), 0);
    OK(dafs_reestablish(c));
    OK(dafs_session_lost(c));
    CHECK_EQ(dafs_pread(c, f, b, 5, 7), 5); /* the same handle, re-opened by path */
    CHECK(memcmp(b, "world", 5) == 0);
    dafs_stats_t s;
    OK(dafs_stats(c, &s));
    CHECK(s.reconnects >= 1);
    CHECK_EQ(dafs_session_lost(NULL), -EINVAL);
    CHECK_EQ(dafs_reestablish(NULL), -EINVAL);
    OK(dafs_close(c, f));
    OK(dafs_disconnect(c));
    return 0;
}
