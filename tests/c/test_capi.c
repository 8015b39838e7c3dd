/*
 * C tests of libdafs (include/dafs.h) against a real dafsd.
 *
 * Environment:
 *   DAFS_TARGET         host:port of a dafsd (required)
 *   DAFS_SHM_TARGET     dafs+shm:///path.sock of the same dafsd (shm tests skipped if unset)
 *   DAFS_VICTIM_TARGET  host:port of a second, disposable dafsd, and
 *   DAFS_VICTIM_PID     its pid: the connection-loss test kills it (skipped if unset)
 *
 * Usage: test_capi [NAME-SUBSTRING]   Prints one line per test and "N passed, N failed".
 * The tests are grouped by area in tests/c/capi_*.c (sharing capi_test.h); this file
 * holds main(), the test table and the shared helpers. Every function declared in
 * dafs.h is called somewhere in the .c files of tests/c (a unit test of the dafs-capi
 * crate checks that).
 */
#include "capi_test.h"

/* The ABI: struct layouts the Rust side mirrors (also asserted there). */
_Static_assert(sizeof(dafs_options_t) == 72, "dafs_options_t layout");
_Static_assert(sizeof(dafs_attr_t) == 88, "dafs_attr_t layout");
_Static_assert(sizeof(dafs_completion_t) == 24, "dafs_completion_t layout");
_Static_assert(sizeof(dafs_stats_t) == 208, "dafs_stats_t layout");
_Static_assert(sizeof(dafs_file_seg_t) == 16, "dafs_file_seg_t layout");
_Static_assert(sizeof(dafs_mem_seg_t) == 24, "dafs_mem_seg_t layout");
_Static_assert(sizeof(dafs_batch_io_t) == 48, "dafs_batch_io_t layout");
_Static_assert(sizeof(dafs_lock_info_t) == 32, "dafs_lock_info_t layout");
_Static_assert(sizeof(dafs_region_t) == 8 && sizeof(dafs_cg_t) == 4, "id types");

const char *tcp_target, *shm_target;
char dir[64]; /* this run's scratch directory inside the export */

char *path(const char *name) {
    static char buf[8][256];
    static int i;
    char *p = buf[i++ % 8];
    snprintf(p, 256, "%s/%s", dir, name);
    return p;
}

dafs_client_t *connect_tcp(void) {
    dafs_options_t o = {0};
    o.provider = DAFS_PROVIDER_TCP;
    dafs_client_t *c = NULL;
    int r = dafs_connect(tcp_target, &o, &c);
    if (r != 0) fprintf(stderr, "    connect %s: %s\n", tcp_target, dafs_strerror(r));
    return c;
}

void fill(unsigned char *p, size_t n, unsigned seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        p[i] = (unsigned char)x;
    }
}

/* ---------------------------------------------------------------------------------- */

struct test { const char *name; int (*fn)(void); };

static const struct test tests[] = {
    {"version_and_strerror", t_version_and_strerror},
    {"connect_errors", t_connect_errors},
    {"connect_tcp_and_queries", t_connect_tcp_and_queries},
    {"connect_shm", t_connect_shm},
    {"blocking_io_tcp", t_blocking_io_tcp},
    {"blocking_io_shm", t_blocking_io_shm},
    {"open_flags", t_open_flags},
    {"registered_async_tcp", t_registered_async_tcp},
    {"registered_async_shm", t_registered_async_shm},
    {"register_user_memory_tcp", t_register_user_memory_tcp},
    {"register_user_memory_shm", t_register_user_memory_shm},
    {"busy_region_and_group", t_busy_region_and_group},
    {"cg_argument_errors", t_cg_argument_errors},
    {"cg_limit", t_cg_limit},
    {"nb_plain_buffers", t_nb_plain_buffers},
    {"eagain_when_slots_run_out", t_eagain_when_slots_run_out},
    {"bad_file_handles", t_bad_file_handles},
    {"metadata", t_metadata},
    {"rename2", t_rename2},
    {"concurrent_misuse_is_refused", t_concurrent_misuse_is_refused},
    {"batch_tcp", t_batch_tcp},
    {"batch_shm", t_batch_shm},
    {"append_two_clients", t_append_two_clients},
    {"connection_loss", t_connection_loss},
    {"session_recovery", t_session_recovery},
    {"locks_two_sessions", t_locks_two_sessions},
};

int main(int argc, char **argv) {
    tcp_target = getenv("DAFS_TARGET");
    shm_target = getenv("DAFS_SHM_TARGET");
    if (!tcp_target) {
        fprintf(stderr, "test_capi: set DAFS_TARGET=host:port of a running dafsd\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "capi-%d", (int)getpid());
    dafs_client_t *c = connect_tcp();
    if (!c || dafs_mkdir(c, dir, 0755) != 0) {
        fprintf(stderr, "test_capi: cannot set up %s on %s\n", dir, tcp_target);
        return 2;
    }
    dafs_disconnect(c);
    int passed = 0, failed = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (argc > 1 && !strstr(tests[i].name, argv[1])) continue;
        int r = tests[i].fn();
        printf("%s %s\n", r ? "FAIL" : "ok  ", tests[i].name);
        fflush(stdout);
        if (r) failed++;
        else passed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
