/*
 * Shared by the C tests of libdafs (tests/c/test_capi.c and tests/c/capi_*.c, linked
 * into one program): the CHECK/OK macros, the server targets and scratch directory
 * set up by main(), small helpers, and the test functions of each file.
 */
#ifndef DAFS_CAPI_TEST_H
#define DAFS_CAPI_TEST_H

#define _GNU_SOURCE
#include <dafs.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* Set by main() in test_capi.c. */
extern const char *tcp_target, *shm_target;
extern char dir[64]; /* this run's scratch directory inside the export */

#include "check.h"

/* `name` inside the scratch directory (one of 8 rotating static buffers). */
char *path(const char *name);
/* A TCP client of DAFS_TARGET, or NULL (the error is printed). */
dafs_client_t *connect_tcp(void);
/* Deterministic pseudo-random bytes. */
void fill(unsigned char *p, size_t n, unsigned seed);

/* The tests, by file. */
int t_version_and_strerror(void);
int t_connect_errors(void);
int t_connect_tcp_and_queries(void);
int t_connect_shm(void);
int t_concurrent_misuse_is_refused(void);
int t_connection_loss(void);
int t_session_recovery(void);
int t_blocking_io_tcp(void);
int t_blocking_io_shm(void);
int t_open_flags(void);
int t_bad_file_handles(void);
int t_append_two_clients(void);
int t_registered_async_tcp(void);
int t_registered_async_shm(void);
int t_register_user_memory_tcp(void);
int t_register_user_memory_shm(void);
int t_busy_region_and_group(void);
int t_cg_argument_errors(void);
int t_cg_limit(void);
int t_nb_plain_buffers(void);
int t_eagain_when_slots_run_out(void);
int t_batch_tcp(void);
int t_batch_shm(void);
int t_metadata(void);
int t_rename2(void);
int t_locks_two_sessions(void);

#endif
