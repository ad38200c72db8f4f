/* SPDX-License-Identifier: MIT */
/* test_quant.c: the scale rules of src/base/quant.c on matrices whose codes
 * and scales are worked out by hand in the comments: int4 and int8,
 * symmetric and asymmetric, per tensor, per row and per group, clipping, a
 * group whose values are all zero; mxfp4 (E8M0 exponent, ties to even,
 * saturation, an all-zero block) and nvfp4 (the per-tensor scale, the E4M3
 * block scale); fp8-e4m3 and fp8-e5m2 per row, tensor and group (OCP FP8
 * patterns, ties, E4M3 saturation, the clamp that keeps E5M2 finite, -0,
 * NaN, a zero group); and the parser's acceptances and refusals. */
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

/* FP8 patterns below: sign, then the exponent field E - emin + 1 (E4M3: 4
 * bits, E + 7; E5M2: 5 bits, E + 15) and the significand bits. */
static void test_fp8_channel(void **state)
{
    /* E4M3 per row (the default), fmax 448. Row 0: max 448, s 1. 448 =
     * 1.75 2^8: 0.1111.110 = 126; -224 = -1.75 2^7: 1.1110.110 = 246; 100
     * = 1.5625 2^6 is a tie of 96 (1.100) and 104 (1.101): even 96,
     * 0.1101.100 = 108; 0.5: 0.0110.000 = 48. Row 1: all zero, s 0, codes
     * 0. Row 2: max 896, s 2. 448: 126; 3 / 2 = 1.5: 0.0111.100 = 60; -0.01
     * / 2 = -0.005 = -2.56 2^-9, a subnormal: -3 2^-9 (1.0000.011 = 131),
     * x' = -3 2^-8; 10 / 2 = 5 = 1.25 2^2: 0.1001.010 = 74. */
    const float x[] = {448, -224, 100, 0.5f, 0, 0, 0, 0, 896, 3, -0.01f, 10};
    const int16_t c[] = {126, 246, 108, 48, 0, 0, 0, 0, 126, 60, 131, 74};
    const float d[] = {448, -224, 96, 0.5f, 0, 0, 0, 0, 896, 3, -3 * 0x1p-8f, 10};
    const float s[] = {1, 0, 2};
    /* E5M2 per token, fmax 57344. Row 0: max 56, s = 56 / 57344 = 2^-10:
     * 56 / s = 57344 = 1.75 2^15: 0.11110.11 = 123; -0 stays -0 (pattern
     * 128). Row 1: zero, s 0. */
    const float x5[] = {56, -0.0f, 0, 0};
    const int16_t c5[] = {123, 128, 0, 0};
    const float d5[] = {56, 0, 0, 0}, s5[] = {0x1p-10f, 0};
    cic_quant q = rule("fp8-e5m2:token");
    int16_t cc[4];
    float dd[4];
    char msg[128];
    (void)state;
    expect("fp8-e4m3", x, 3, 4, c, d, s, 3);
    expect("fp8-e5m2:token", x5, 2, 2, c5, d5, s5, 2);
    assert_int_equal(cic_quant_matrix(&q, x5, 2, 2, cc, NULL, NULL, NULL, dd, msg, sizeof msg), 0);
    assert_true(signbit(dd[1]) && !signbit(dd[2])); /* -0 kept, the zero group +0 */
}

static void test_fp8_tensor(void **state)
{
    /* E4M3 per tensor: max 28, s = 28 / 448 = 2^-4. 28 / s = 448: 126;
     * -7 / s = -112 = -1.75 2^6: 1.1101.110 = 238; 1.1 / s = 17.6 lies
     * between 16 and 18 (spacing 2): 18 = 1.125 2^4, 0.1011.001 = 89, x'
     * 1.125; 0: 0. */
    const float x[] = {28, -7, 1.1f, 0};
    const int16_t c[] = {126, 238, 89, 0};
    const float d[] = {28, -7, 1.125f, 0}, s[] = {0x1p-4f};
    /* saturation: clip 0.5 of max 896, s 1. 896 saturates to 448 (126),
     * -896 to -448 (254); 300 lies between 288 and 320 (spacing 32): 288 =
     * 1.125 2^8, 0.1111.001 = 121; 1: 0.0111.000 = 56; 464 is a tie of 448
     * (1.110) and 480 (1.111, E4M3's NaN): even 448; 470 rounds to 480,
     * beyond the largest finite: saturates to 448. */
    const float xs[] = {896, 300, -896, 1, 464, 470};
    const int16_t cs[] = {126, 121, 254, 56, 126, 126};
    const float ds[] = {448, 288, -448, 1, 448, 448}, ss[] = {1};
    /* E5M2 clipped: clip 0.5 of max 114688, s 1. 114688 = 1.75 2^16 is
     * past E5M2's range (Inf) and 61440, halfway between 57344 and 2^16,
     * rounds to Inf too: both clamped to 57344 (123); -1: 1.01111.00 =
     * 188; 3 = 1.5 2^1: 0.10000.10 = 66. */
    const float x5[] = {114688, -1, 3, 61440};
    const int16_t c5[] = {123, 188, 66, 123};
    const float d5[] = {57344, -1, 3, 57344}, s5[] = {1};
    (void)state;
    expect("fp8-e4m3:tensor", x, 2, 2, c, d, s, 1);
    expect("fp8-e4m3:tensor:clip0.5", xs, 2, 3, cs, ds, ss, 1);
    expect("fp8-e5m2:tensor:clip0.5", x5, 1, 4, c5, d5, s5, 1);
}

static void test_fp8_group(void **state)
{
    /* E5M2, groups of 2. Group 0: max 57344, s 1: 57344 = 123; 1000 lies
     * between 896 and 1024 (spacing 128): 1024 = 2^10, 0.11001.00 = 100.
     * Group 1: max 7, s = 7 / 57344 = 2^-13: -7 / s = -57344 (251); 0.5 /
     * s = 2^12: 0.11011.00 = 108. */
    const float x[] = {57344, 1000, -7, 0.5f};
    const int16_t c[] = {123, 100, 251, 108};
    const float d[] = {57344, 1024, -7, 0.5f}, s[] = {1, 0x1p-13f};
    /* E4M3, groups of 4 with clip 0.5 over two rows: group 0 max 8, s =
     * 4 / 448 (not a power of two: only the codes are hand-checked); 8 / s
     * = 896 saturates (126), -2 / s = -224 (246), 1 / s = 112 (0.1101.110
     * = 110), 0. Group 1: zero. */
    const float xg[] = {8, -2, 1, 0, 0, 0, 0, 0};
    cic_quant q = rule("fp8-e4m3:group4:clip0.5");
    int16_t cg[8];
    float dg[8], sg[2];
    char msg[128];
    int i;
    (void)state;
    expect("fp8-e5m2:group2", x, 1, 4, c, d, s, 2);
    assert_int_equal(cic_quant_matrix(&q, xg, 2, 4, cg, sg, NULL, NULL, dg, msg, sizeof msg), 0);
    assert_true(sg[0] == 0.5f * 8.0f / 448.0f && sg[1] == 0.0f);
    assert_true(cg[0] == 126 && cg[1] == 246 && cg[2] == 110 && cg[3] == 0);
    assert_true(dg[0] == 448.0f * sg[0] && dg[1] == -224.0f * sg[0] && dg[2] == 112.0f * sg[0]);
    for (i = 4; i < 8; i++)
        assert_true(cg[i] == 0 && dg[i] == 0.0f);
    /* a group that does not divide the row */
    assert_int_equal(cic_quant_matrix(&q, xg, 1, 6, cg, sg, NULL, NULL, dg, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "group of 4 values does not divide a row of 6"));
    /* a NaN stays NaN (pattern S.1111.111), the rest of its group as
     * without it: max 2, 2 / s = 448 */
    {
        const float xn[] = {NAN, 2};
        q = rule("fp8-e4m3");
        assert_int_equal(cic_quant_matrix(&q, xn, 1, 2, cg, sg, NULL, NULL, dg, msg, sizeof msg),
                         0);
        assert_true((cg[0] & 0x7f) == 0x7f && isnan(dg[0]));
        assert_true(cg[1] == 126 && sg[0] == 2.0f / 448.0f);
    }
}

static void test_parse(void **state)
{
    static const char *const bad[] = {"int3", "int4:group0", "int4:groupx", "int4:clip0",
                                      "int4:clip1.5", "int4:per-row", "int4:", "int4::sym", "fp4", "",
                                      "int8:group2000000", "fp8", "fp8-e4m3:asym",
                                      "fp8-e5m2:group0", "fp8-e4m3:clip2", "fp8-e4m3:",
                                      "fp8-e5m2::tensor", "fp8-e4m3:channel:asym",
                                      "fp4-e2m1", "FP8-E4M3", "mxfp4:tensor"};
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
    assert_true(cic_quant_is_int(&q) && q.fmt == NULL);
    q = rule("fp8-e4m3");
    assert_true(q.scheme == CIC_QS_FLOAT && q.bits == 8 && q.symmetric && q.gran == CIC_QG_ROW);
    assert_true(q.fmt == cic_format_get(CIC_FORMAT_FP8_E4M3) && q.clip == 1.0f);
    assert_false(cic_quant_is_int(&q));
    q = rule("fp8-e4m3:tensor");
    assert_true(q.gran == CIC_QG_TENSOR);
    q = rule("fp8-e5m2:group32:clip0.9");
    assert_true(q.fmt == cic_format_get(CIC_FORMAT_FP8_E5M2) && q.gran == CIC_QG_GROUP);
    assert_true(q.group == 32 && q.clip == 0.9f);
    q = rule("fp8-e5m2:group:sym");
    assert_true(q.group == 128 && q.symmetric);
    q = rule("mxfp4");
    assert_false(cic_quant_is_int(&q));
    /* the messages name what is allowed */
    assert_int_equal(cic_quant_parse(&q, "fp8-e3m4", msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "fp8-e4m3"));
    assert_non_null(strstr(msg, "fp8-e5m2"));
    assert_int_equal(cic_quant_parse(&q, "fp8-e4m3:asym", msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "symmetric only"));
    assert_int_equal(cic_quant_parse(&q, "fp8-e5m2:row", msg, sizeof msg), -1);
    assert_null(strstr(msg, "asym"));
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
        cmocka_unit_test(test_fp8_channel),   cmocka_unit_test(test_fp8_tensor),
        cmocka_unit_test(test_fp8_group),     cmocka_unit_test(test_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
