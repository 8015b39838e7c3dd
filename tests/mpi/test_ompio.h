/* test_ompio.h — helpers shared by the MPI-IO test cases (see test_ompio.c). */
#ifndef TEST_OMPIO_H
#define TEST_OMPIO_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

extern int rank, nprocs, failures;

unsigned char pattern(unsigned seed, uint64_t o);
void fill(unsigned char *b, size_t n, unsigned seed, uint64_t off);
long mismatch(const unsigned char *b, size_t n, unsigned seed, uint64_t off);
void check(const char *name, int ok); /* collective over MPI_COMM_WORLD */
int err_class(int rc);
void say(const char *what, int rc);
int count_of(MPI_Status *st);

/* test_ompio_more.c: 1 if `c` named one of its cases (and it ran). */
int run_more_cases(const char *c, const char *file, size_t blk);

#endif
