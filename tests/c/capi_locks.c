/*
 * C tests of libdafs (see test_capi.c): Byte-range locks.
 */
#include "capi_test.h"

/* Byte-range locks between two sessions: conflicts, upgrade/downgrade in place, test,
 * unlock, the waiting variant, and release when the session ends. */
int t_locks_two_sessions(void) {
    dafs_client_t *a = connect_tcp(), *b = connect_tcp();
    CHECK(a && b);
    dafs_file_t *fa = NULL, *fb = NULL;
    OK(dafs_open(a, path("locks"), DAFS_O_RDWR | DAFS_O_CREAT, 0644, &fa));
    OK(dafs_open(b, path("locks"), DAFS_O_RDWR, 0, &fb));
    dafs_lock_info_t li;
    memset(&li, 0xff, sizeof li);
    /* shared + shared coexist; shared blocks exclusive */
    OK(dafs_lock(a, fa, 100, 10, 0));
    OK(dafs_lock(b, fb, 105, 10, 0));
    CHECK_EQ(dafs_lock(b, fb, 100, 1, 1), -EAGAIN);
    CHECK_EQ(dafs_test_lock(b, fb, 100, 1, 1, &li), 1);
    CHECK_EQ(li.offset, 100);
    CHECK_EQ(li.len, 10);
    CHECK_EQ(li.exclusive, 0);
    CHECK(li.owner != 0);
    CHECK_EQ(dafs_test_lock(b, fb, 100, 1, 0, NULL), 0); /* shared would be fine */
    /* a session's own locks never conflict: upgrade over b's shared part fails, own part works */
    CHECK_EQ(dafs_lock(a, fa, 100, 10, 1), -EAGAIN);
    OK(dafs_unlock(b, fb, 105, 10));
    OK(dafs_lock(a, fa, 100, 10, 1)); /* upgrade in place */
    CHECK_EQ(dafs_lock(b, fb, 109, 1, 0), -EAGAIN);
    CHECK_EQ(dafs_test_lock(b, fb, 0, 0, 0, &li), 1);
    CHECK_EQ(li.exclusive, 1);
    OK(dafs_lock(a, fa, 100, 10, 0)); /* downgrade in place */
    OK(dafs_lock(b, fb, 109, 1, 0));
    /* unlock splits: a keeps [100,105) */
    OK(dafs_unlock(b, fb, 0, 0));
    OK(dafs_unlock(a, fa, 105, 5));
    OK(dafs_lock(b, fb, 105, 5, 1));
    CHECK_EQ(dafs_lock(b, fb, 104, 1, 1), -EAGAIN);
    /* waiting: times out while held, succeeds once released */
    CHECK_EQ(dafs_lock_wait(b, fb, 100, 1, 1, 30), -ETIMEDOUT);
    OK(dafs_unlock(a, fa, 0, 0));
    OK(dafs_lock_wait(b, fb, 100, 1, 1, 1000));
    /* the session's end releases its locks */
    OK(dafs_lock(a, fa, 200, 1, 1));
    CHECK_EQ(dafs_lock(b, fb, 200, 1, 0), -EAGAIN);
    OK(dafs_disconnect(a));
    OK(dafs_lock(b, fb, 200, 1, 1));
    /* argument errors */
    CHECK_EQ(dafs_lock(b, NULL, 0, 1, 0), -EBADF);
    CHECK_EQ(dafs_lock(NULL, fb, 0, 1, 0), -EINVAL);
    CHECK_EQ(dafs_unlock(b, NULL, 0, 1), -EBADF);
    CHECK_EQ(dafs_lock(b, fb, UINT64_MAX, 5, 0), -EINVAL); /* range overflows */
    OK(dafs_close(b, fb));
    OK(dafs_disconnect(b));
    return 0;
}
