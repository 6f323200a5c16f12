/* fuzz_check.h - FUZZ_CHECK, the invariant check of every libFuzzer target: a failed
 * invariant prints its text and place and aborts (the fuzzer keeps the input).
 * runs on: the fuzzer process, one thread. */
#ifndef TESTS_FUZZ_FUZZ_CHECK_H
#define TESTS_FUZZ_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(c)                                                                      \
    do {                                                                                   \
        if (!(c)) {                                                                        \
            fprintf(stderr, "invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);    \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

#endif
