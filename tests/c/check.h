/* The check macros of the C tests: a test function returns 0 on success; these print
 * where a check failed (file:line, the expression, and for CHECK_EQ both values and the
 * errno name of a negative one) and return 1. Needs <stdio.h> and <dafs.h> first; a test of
 * another library names its own error-string function in CHECK_STRERROR before including. */
#ifndef DAFS_TESTS_CHECK_H
#define DAFS_TESTS_CHECK_H

#ifndef CHECK_STRERROR
#define CHECK_STRERROR dafs_strerror
#endif

#define FAIL(...)                                                                   \
    do {                                                                            \
        fprintf(stderr, "    %s:%d: ", __FILE__, __LINE__);                         \
        fprintf(stderr, __VA_ARGS__);                                               \
        fprintf(stderr, "\n");                                                      \
        return 1;                                                                   \
    } while (0)
#define CHECK(c)                                                                    \
    do {                                                                            \
        if (!(c)) FAIL("check failed: %s", #c);                                     \
    } while (0)
#define CHECK_EQ(a, b)                                                              \
    do {                                                                            \
        long long _a = (long long)(a), _b = (long long)(b);                         \
        if (_a != _b)                                                               \
            FAIL("%s = %lld (%s), expected %s = %lld", #a, _a,                     \
                 _a < 0 ? CHECK_STRERROR((int)_a) : "", #b, _b);                    \
    } while (0)
#define OK(expr) CHECK_EQ((expr), 0)

#endif
