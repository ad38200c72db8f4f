/* SPDX-License-Identifier: MIT */
/* test_quant.c: the scale rules of src/base/quant.c on matrices whose codes
 * and scales are worked out by hand in the comments: int4 and int8,
 * symmetric and asymmetric, per tensor, per row and per group, clipping, a
 * group whose values are all zero; mxfp4 (E8M0 exponent, ties to even,
 * saturation, an all-zero block) and nvfp4 (the per-tensor scale, the E4M3
 * block scale); and the parser's refusals. */
#include "testutil.h"

#include "base/quant.h"

#include <string.h>

static cic_quant rule(const char *text)
{
    cic_quant q;
    char msg[256];
    if (cic_quant_parse(&q, text, msg, sizeof msg) != 0)
        fail_msg("'%s' refused: %s", text, msg);
    return q;
}

/* Quantize and compare codes and dequantized values with the expected. */
static void expect(const char *text, const float *x, int rows, int cols, const int16_t *codes,
                   const float *deq, const float *scales, int n_scales)
{
    cic_quant q = rule(text);
    int16_t c[64];
    float d[64], s[64];
    char msg[256];
    int i, n = rows * cols;
    assert_true(n <= 64 && n_scales <= 64);
    assert_int_equal(cic_quant_groups(&q, rows, cols, msg, sizeof msg), n_scales);
    assert_int_equal(cic_quant_matrix(&q, x, rows, cols, c, s, NULL, NULL, d, msg, sizeof msg), 0);
    for (i = 0; i < n; i++)
        if (c[i] != codes[i] || d[i] != deq[i])
            fail_msg("%s: value %d (%g): code %d, dequantized %g; expected %d, %g", text, i,
                     (double)x[i], c[i], (double)d[i], codes[i], (double)deq[i]);
    for (i = 0; i < n_scales; i++)
        if (s[i] != scales[i])
            fail_msg("%s: scale %d is %g, expected %g", text, i, (double)s[i],
                     (double)scales[i]);
}

static void test_int_symmetric(void **state)
{
    /* int4 per row: qmax 7. Row 0: max|x| 7, s 1; 3.5 is a tie -> 4 (even).
     * Row 1: all zero, s 0, codes 0. */
    const float x[] = {1, -2, 3.5f, -7, 0, 0, 0, 0};
    const int16_t c[] = {1, -2, 4, -7, 0, 0, 0, 0};
    const float d[] = {1, -2, 4, -7, 0, 0, 0, 0}, s[] = {1, 0};
    /* int8 per tensor: qmax 127, s 1; -0.5 -> -0 (code 0), 63.5 -> 64 */
    const float x8[] = {127, -0.5f, 1, 63.5f};
    const int16_t c8[] = {127, 0, 1, 64};
    const float d8[] = {127, 0, 1, 64}, s8[] = {1};
    /* int4, groups of 2: max 7 -> s 1, max 14 -> s 2; 5 / 2 = 2.5 -> 2 */
    const float xg[] = {3, -7, 14, 5};
    const int16_t cg[] = {3, -7, 7, 2};
    const float dg[] = {3, -7, 14, 4}, sg[] = {1, 2};
    /* clip 0.5: r = 7 of max 14, s 1; 14 clamps to 7, -9 to -8 */
    const float xc[] = {14, 1, -3, -9};
    const int16_t cc[] = {7, 1, -3, -8};
    const float dc[] = {7, 1, -3, -8}, sc[] = {1};
    (void)state;
    expect("int4", x, 2, 4, c, d, s, 2);
    expect("int8:tensor", x8, 2, 2, c8, d8, s8, 1);
    expect("int4:group2:sym", xg, 1, 4, cg, dg, sg, 2);
    expect("int4:channel:clip0.5", xc, 1, 4, cc, dc, sc, 1);
}

static void test_int_asymmetric(void **state)
{
    /* int4 asym per row, 15 levels. Row 0: range [0, 15], s 1, z 0.
     * Row 1: [-1, 14], s 1, z 1: codes x + 1. */
    const float x[] = {0, 1, 2, 15, -1, 2, 14, 0};
    const int16_t c[] = {0, 1, 2, 15, 0, 3, 15, 1};
    const float d[] = {0, 1, 2, 15, -1, 2, 14, 0}, s[] = {1, 1};
    cic_quant q = rule("int4:token:asym");
    int32_t z[2];
    float sc[2];
    char msg[128];
    (void)state;
    expect("int4:token:asym", x, 2, 4, c, d, s, 2);
    assert_int_equal(cic_quant_matrix(&q, x, 2, 4, NULL, sc, z, NULL, NULL, msg, sizeof msg), 0);
    assert_int_equal(z[0], 0);
    assert_int_equal(z[1], 1);
    /* all positive: the range still holds 0 ([0, 30], s 2, z 0) */
    {
        const float xp[] = {10, 20, 30, 4};
        const int16_t cp[] = {5, 10, 15, 2};
        const float dp[] = {10, 20, 30, 4}, sp[] = {2};
        expect("int4:asym", xp, 1, 4, cp, dp, sp, 1);
    }
}

static void test_mxfp4(void **state)
{
    /* Block 0: max 6, floor(log2 6) = 2, e = 0, scale 1: values kept; 7
     * saturates to 6 (pattern 7); -0.25 ties to 0 (-0: pattern 8); 5 ties to
     * 4 (even pattern 6). Block 1: max 12, e = 1, scale 2: 5 / 2 = 2.5 ties
     * to 2 (x' 4), 12 / 2 = 6. */
    float x[64];
    int16_t c[64];
    float d[64], s[2];
    cic_quant q = rule("mxfp4");
    char msg[128];
    (void)state;
    memset(x, 0, sizeof x);
    x[0] = 6;
    x[1] = 7;
    x[2] = -0.25f;
    x[3] = 5;
    x[4] = -1.5f;
    x[32] = 12;
    x[33] = 5;
    assert_int_equal(q.group, 32);
    assert_int_equal(cic_quant_matrix(&q, x, 1, 64, c, s, NULL, NULL, d, msg, sizeof msg), 0);
    assert_true(s[0] == 1.0f && s[1] == 2.0f);
    assert_int_equal(c[0], 7);
    assert_true(d[0] == 6.0f);
    assert_int_equal(c[1], 7);
    assert_true(d[1] == 6.0f);
    assert_int_equal(c[2], 8);
    assert_true(d[2] == 0.0f);
    assert_int_equal(c[3], 6);
    assert_true(d[3] == 4.0f);
    assert_int_equal(c[4], 8 | 3);
    assert_true(d[4] == -1.5f);
    assert_true(d[32] == 12.0f && d[33] == 4.0f);
    /* an all-zero block: the smallest E8M0 scale 2^-127, codes 0 */
    memset(x, 0, sizeof x);
    assert_int_equal(cic_quant_matrix(&q, x, 2, 32, c, s, NULL, NULL, d, msg, sizeof msg), 0);
    assert_true(s[0] == ldexpf(1.0f, -127) && c[0] == 0 && d[0] == 0.0f);
    /* a row not made of whole blocks is refused */
    assert_int_equal(cic_quant_matrix(&q, x, 1, 48, c, s, NULL, NULL, d, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "group of 32 values does not divide a row of 48"));
}

static void test_nvfp4(void **state)
{
    /* max|x| = 2688 = 448 * 6: tensor scale t = 1. Block 0 (max 2688):
     * s = e4m3(448) = 448, values x / 448. Block 1 (max 3): s = 0.5, 1.25
     * / 0.5 = 2.5 ties to 2 (x' 1). Block 2: zero, s 0, codes 0. */
    float x[48], d[48], s[3], t;
    int16_t c[48];
    cic_quant q = rule("nvfp4");
    char msg[128];
    (void)state;
    memset(x, 0, sizeof x);
    x[0] = 2688;
    x[1] = -448;
    x[16] = 3;
    x[17] = 1.25f;
    assert_int_equal(q.group, 16);
    assert_int_equal(cic_quant_matrix(&q, x, 1, 48, c, s, NULL, &t, d, msg, sizeof msg), 0);
    assert_true(t == 1.0f);
    assert_true(s[0] == 448.0f && s[1] == 0.5f && s[2] == 0.0f);
    assert_true(d[0] == 2688.0f && d[1] == -448.0f);
    assert_int_equal(c[1], 8 | 2);
    assert_true(d[16] == 3.0f && d[17] == 1.0f);
    assert_true(c[32] == 0 && d[32] == 0.0f);
    /* a smaller tensor: t = 12 / 2688; the block scale is 2 / t in E4M3 */
    memset(x, 0, sizeof x);
    x[0] = 12;
    assert_int_equal(cic_quant_matrix(&q, x, 1, 16, c, s, NULL, &t, d, msg, sizeof msg), 0);
    assert_true(t == 12.0f / 2688.0f);
    assert_true(s[0] == 448.0f);
    assert_true(fabsf(d[0] - 12.0f) <= 12.0f * 1e-6f);
}

static void test_parse(void **state)
{
    static const char *const bad[] = {"int3", "int4:group0", "int4:groupx", "int4:clip0",
                                      "int4:clip1.5", "int4:per-row", "int4:", "int4::sym", "fp4", "",
                                      "int8:group2000000"};
    cic_quant q;
    char msg[256];
    size_t i;
    (void)state;
    q = rule("int4");
    assert_true(q.scheme == CIC_QS_INT && q.bits == 4 && q.symmetric && q.gran == CIC_QG_ROW);
    q = rule("int8:group:asym:clip0.9");
    assert_true(q.bits == 8 && !q.symmetric && q.gran == CIC_QG_GROUP && q.group == 128);
    assert_true(q.clip == 0.9f);
    q = rule("int4:group64");
    assert_int_equal(q.group, 64);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        msg[0] = '\0';
        if (cic_quant_parse(&q, bad[i], msg, sizeof msg) == 0)
            fail_msg("'%s' accepted", bad[i]);
        assert_true(msg[0] != '\0');
        print_message("'%s': %s\n", bad[i], msg);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_int_symmetric), cmocka_unit_test(test_int_asymmetric),
        cmocka_unit_test(test_mxfp4),         cmocka_unit_test(test_nvfp4),
        cmocka_unit_test(test_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
