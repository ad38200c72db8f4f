/* SPDX-License-Identifier: MIT */
/* testutil.h: helpers shared by the cmocka tests. cmocka 1.1.5 has no
 * assert_double_equal (assert_float_equal casts to float), so closeness is
 * checked here with every input printed on failure. */
#ifndef CIC_TESTUTIL_H
#define CIC_TESTUTIL_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

/* |a - b| <= atol + rtol * |b|, else fail with both values. */
#define cic_assert_close(a, b, rtol, atol)                                    \
    do {                                                                      \
        double a_ = (a), b_ = (b), r_ = (rtol), t_ = (atol);                  \
        if (!(fabs(a_ - b_) <= t_ + r_ * fabs(b_)))                           \
            fail_msg("%s = %.17g, expected %s = %.17g (rtol %g, atol %g)",   \
                     #a, a_, #b, b_, r_, t_);                                 \
    } while (0)

/* Iterations multiplier for randomized tests: CIC_TEST_MULTIPLIER (default
 * 1), like FLINT's flint_test_multiplier(). */
static inline int cic_test_multiplier(void)
{
    const char *s = getenv("CIC_TEST_MULTIPLIER");
    int m = s ? atoi(s) : 1;
    return m > 0 ? m : 1;
}

/* Path under the source tree (CIC_SOURCE_ROOT set by meson). */
static inline const char *cic_test_path(char *buf, size_t cap, const char *rel)
{
    const char *root = getenv("CIC_SOURCE_ROOT");
    snprintf(buf, cap, "%s/%s", root ? root : ".", rel);
    return buf;
}

#endif
