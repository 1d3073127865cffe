/* The C test programs' check: a failed condition is printed with the library's last error and
 * counted in `failures` (each program returns non-zero when it is not 0). */
#ifndef HOSTCALL_TEST_CHECK_H
#define HOSTCALL_TEST_CHECK_H

#include <stdio.h>

#include "hostcall.h"

static int failures = 0;

#define CHECK(cond)                                                                                   \
    do {                                                                                              \
        if (!(cond)) {                                                                                \
            fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
                    hostcall_last_error());                                                          \
            failures++;                                                                               \
        }                                                                                             \
    } while (0)

#endif
