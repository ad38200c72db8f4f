/* SPDX-License-Identifier: MIT */
/* testutil.h: helpers shared by the cmocka tests (the small ones inline
 * here, the rest in testutil.c, linked into every test). cmocka 1.1.5 has
 * no assert_double_equal (assert_float_equal casts to float), so closeness
 * is checked here with every input printed on failure. */
#ifndef CIC_TESTUTIL_H
#define CIC_TESTUTIL_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <mpfr.h>

#include "case/case.h"

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

/* ---- test-local random bits and exact comparisons ---- */

/* The next 64 bits of the stream *s (splitmix64): independent of the RNG
 * and the code under test. */
static inline uint64_t cic_test_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, n). */
static inline int cic_test_pick(uint64_t *s, int n)
{
    return (int)(cic_test_rand(s) % (uint64_t)n);
}

/* The bits of a float (exact comparisons: -0 differs from +0). */
static inline uint32_t cic_test_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Index of the first entry where a and b differ in value or in sign (a NaN
 * differs from everything), or -1. */
static inline long cic_test_first_diff_mp(const mpfr_t *a, const mpfr_t *b, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (!mpfr_equal_p(a[i], b[i]) || mpfr_signbit(a[i]) != mpfr_signbit(b[i]))
            return (long)i;
    return -1;
}

/* v with every bit of its precision random, exponent e0 + [-spread,
 * spread], a random sign. */
static inline void cic_test_mp_rand_full(mpfr_ptr v, uint64_t *s, mpfr_exp_t e0, int spread)
{
    mpfr_prec_t p = mpfr_get_prec(v), have;
    mpfr_set_ui(v, 1, MPFR_RNDN);
    for (have = 1; have < p; have += 48) {
        int b = p - have < 48 ? (int)(p - have) : 48; /* exact: p bits in all */
        mpfr_mul_2ui(v, v, (unsigned long)b, MPFR_RNDN);
        mpfr_add_ui(v, v, (unsigned long)(cic_test_rand(s) >> (64 - b)), MPFR_RNDN);
    }
    mpfr_set_exp(v, e0 + (spread ? cic_test_pick(s, 2 * spread + 1) - spread : 0));
    if (cic_test_rand(s) & 1)
        mpfr_neg(v, v, MPFR_RNDN);
}

/* ---- a private temporary folder (testutil.c) ----
 * cic_test_tmp_setup makes $TMPDIR/cic-PROGRAM.XXXXXX (or under /tmp) and
 * names it in cic_test_tmp; cic_test_tmp_teardown removes it with all it
 * holds. Both are cmocka setup/teardown functions, for a group or for one
 * test. */
extern char cic_test_tmp[512];
int cic_test_tmp_setup(void **state);
int cic_test_tmp_teardown(void **state);
/* cic_test_tmp/name into buf. */
const char *cic_test_tmp_path(char *buf, size_t cap, const char *name);
/* A fresh empty folder inside cic_test_tmp, into buf (fails the test). */
const char *cic_test_tmp_subdir(char *buf, size_t cap);
/* Remove path and, for a folder, everything below it (links not followed,
 * folders made writable first). */
void cic_test_rm_rf(const char *path);

/* ---- files (testutil.c; each fails the test when it cannot) ---- */

/* The whole file, NUL-terminated, malloc'ed; its length into *len if len. */
char *cic_test_slurp(const char *path, size_t *len);
/* text as the whole content of path. */
void cic_test_write_text(const char *path, const char *text);
/* j as JSON (indented, reals to 17 digits) into path. */
void cic_test_write_json(const char *path, json_t *j);

/* ---- the files of a folder of test inputs (testutil.c) ----
 * check(path, name, ctx) on every file of the folder rel under the source
 * tree (tests/malformed, tests/fuzz-regressions/...), in name order, but
 * hidden files, README* and subfolders; fails the test when the folder
 * cannot be read. Returns how many files were checked (and prints it). */
int cic_test_each_file(const char *rel, void (*check)(const char *path, const char *name, void *ctx),
                       void *ctx);

/* ---- external tools ---- */

/* tool is on PATH. */
bool cic_test_have(const char *tool);
/* Skip the running test, with a message saying which tool (and why it is
 * needed), when tool is not on PATH. */
void cic_test_need(const char *tool, const char *why);

/* A transform as the engine tests write them: named name, of kind with Q
 * of kind q (seed 3), on the original (after -1), at MPFR precision, no
 * planted mistake, expected equivalent, centered stream, fast as given. */
cic_xform_spec cic_test_xform_spec(const char *name, enum cic_xform_kind kind, enum cic_qkind q,
                                   bool fast);

/* A model of one attention op alone: cfg with tokens T, samples S, heads
 * H and causal set; its input "qkv" (S T rows of 3 d: q, k and v columns,
 * float32 zeros for the caller to fill) read by the op (H heads over kv
 * key/value heads), its output "y" (S T x d). */
struct cic_model_s;
struct cic_model_s *cic_test_attn_model(cic_model_cfg cfg, int S, int T, int d, int H, int kv,
                                        bool causal);

/* The number of kind's mistake called name (cic_xform_spec.mistake); fails
 * the test when kind has no mistake of that name. */
int cic_test_mistake(enum cic_xform_kind kind, const char *name);

#endif
