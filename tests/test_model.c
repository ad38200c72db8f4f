/* SPDX-License-Identifier: MIT */
/* test_model.c: the model builder. SHA-256 against the FIPS 180-4 vectors;
 * weights a pure function of the seed (rebuilt twice, hashed equal; a seed
 * change moves the hash); the weight fingerprints of every shipped case equal
 * reference/weights.sha256, which pins them bit for bit across machines;
 * the checkpoint family table (every descriptor complete, claims that never
 * overlap, which family reads which config.json). */
#include "testutil.h"

#include "case/case.h"
#include "model/checkpoint_int.h"
#include "model/model.h"

#include <string.h>

static void hex_of(char out[65], const void *data, size_t n, size_t repeat)
{
    cic_sha256 s;
    unsigned char d[32];
    size_t i;
    cic_sha256_init(&s);
    for (i = 0; i < repeat; i++)
        cic_sha256_update(&s, data, n);
    cic_sha256_final(&s, d);
    for (i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void test_sha256_vectors(void **state)
{
    char h[65];
    (void)state;
    hex_of(h, "", 0, 1);
    assert_string_equal(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    hex_of(h, "abc", 3, 1);
    assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    hex_of(h, "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, 1);
    assert_string_equal(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    hex_of(h, "a", 1, 1000000);
    assert_string_equal(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static cic_model_cfg small_cfg(enum cic_block_kind b, uint64_t seed)
{
    cic_model_cfg c;
    memset(&c, 0, sizeof c);
    c.block = b;
    c.d_model = 16;
    c.heads = 2;
    c.mlp_ratio = 2;
    c.d_mlp = 32;
    c.tokens = 4;
    c.samples = 2;
    c.layers = 2;
    c.eps = 1e-5;
    c.act = b == CIC_BLOCK_RMSNORM ? CIC_ACT_SILU : CIC_ACT_GELU;
    c.d_out = 8;
    c.seed = seed;
    c.std = 0.1;
    c.outlier_channels = 2;
    c.outlier_scale = 8;
    return c;
}

static void test_weights_deterministic(void **state)
{
    int b;
    (void)state;
    for (b = CIC_BLOCK_PRELN; b <= CIC_BLOCK_RMSNORM; b++) {
        cic_model_cfg c = small_cfg((enum cic_block_kind)b, 42);
        cic_model *m1 = cic_model_create(&c, CIC_READOUT_HEAD);
        cic_model *m2 = cic_model_create(&c, CIC_READOUT_HEAD);
        cic_model *m3, *cl;
        char h1[65], h2[65], h3[65], hc[65];
        assert_non_null(m1);
        assert_non_null(m2);
        cic_model_weights_sha256(h1, m1);
        cic_model_weights_sha256(h2, m2);
        assert_string_equal(h1, h2);
        cl = cic_model_clone(m1);
        assert_non_null(cl);
        cic_model_weights_sha256(hc, cl);
        assert_string_equal(h1, hc);
        c.seed = 43;
        m3 = cic_model_create(&c, CIC_READOUT_HEAD);
        cic_model_weights_sha256(h3, m3);
        assert_string_not_equal(h1, h3);
        /* plant a fault: one flipped bit moves the fingerprint */
        {
            uint32_t u;
            memcpy(&u, &cl->t[cl->input].f32[0], 4);
            u ^= 1u;
            memcpy(&cl->t[cl->input].f32[0], &u, 4);
            cic_model_weights_sha256(hc, cl);
            assert_string_not_equal(h1, hc);
        }
        cic_model_destroy(m1);
        cic_model_destroy(m2);
        cic_model_destroy(m3);
        cic_model_destroy(cl);
    }
}

/* A build reports the drawing of its weights: done grows to the total, and
 * the total is every value drawn; the weights are those of a build without
 * progress, bit for bit. */
typedef struct {
    int calls;
    double last, total;
    bool monotone;
} prog_seen;

static void prog_fn(void *ctx, double done, double total)
{
    prog_seen *p = ctx;
    if (done < p->last || (p->calls > 0 && total != p->total))
        p->monotone = false;
    p->calls++;
    p->last = done;
    p->total = total;
}

static void test_build_progress(void **state)
{
    int b;
    (void)state;
    for (b = CIC_BLOCK_PRELN; b < CIC_BLOCK_COUNT; b++) {
        cic_model_cfg c = small_cfg((enum cic_block_kind)b, 7);
        prog_seen seen = {0, 0, 0, true};
        cic_model_progress p = {prog_fn, &seen, NULL};
        cic_model *m1, *m2;
        char h1[65], h2[65];
        double values = 0;
        int i;
        if (b == CIC_BLOCK_DIT) {
            c.d_cond = 16;
            c.final_layer = true;
            c.act = CIC_ACT_GELU_TANH;
        }
        m1 = cic_model_create(&c, CIC_READOUT_HEAD);
        m2 = cic_model_create_progress(&c, CIC_READOUT_HEAD, &p, NULL);
        assert_non_null(m1);
        assert_non_null(m2);
        cic_model_weights_sha256(h1, m1);
        cic_model_weights_sha256(h2, m2);
        assert_string_equal(h1, h2);
        for (i = 0; i < m2->n_t; i++)
            if (m2->t[i].role != CIC_T_ACT && strcmp(m2->t[i].name, "cond") != 0 &&
                strcmp(m2->t[i].name, "input") != 0)
                values += (double)m2->t[i].rows * m2->t[i].cols;
        assert_true(seen.calls > 3);
        assert_true(seen.monotone);
        assert_true(seen.last == seen.total);
        /* the total covers the weights (and the drawn inputs) */
        assert_true(seen.total >= values);
        cic_model_destroy(m1);
        cic_model_destroy(m2);
    }
}

/* Names follow the PyTorch modules (timm for preln, HF LLaMA for rmsnorm). */
static void test_tensor_names(void **state)
{
    cic_model_cfg c = small_cfg(CIC_BLOCK_PRELN, 1);
    cic_model *m = cic_model_create(&c, CIC_READOUT_HEAD);
    int id;
    (void)state;
    id = cic_model_tensor_find(m, "blocks.1.attn.qkv.weight");
    assert_true(id >= 0);
    assert_int_equal(m->t[id].rows, 48);
    assert_int_equal(m->t[id].cols, 16);
    assert_true(cic_model_tensor_find(m, "blocks.0.mlp.fc2.bias") >= 0);
    assert_true(cic_model_tensor_find(m, "head.weight") >= 0);
    cic_model_destroy(m);
    c = small_cfg(CIC_BLOCK_RMSNORM, 1);
    m = cic_model_create(&c, CIC_READOUT_HEAD);
    assert_true(cic_model_tensor_find(m, "layers.0.self_attn.o_proj.weight") >= 0);
    assert_true(cic_model_tensor_find(m, "layers.1.mlp.gate_proj.weight") >= 0);
    assert_true(cic_model_tensor_find(m, "lm_head.weight") >= 0);
    assert_int_equal(cic_model_tensor_find(m, "blocks.0.attn.qkv.weight"), -1);
    cic_model_destroy(m);
}

/* reference/weights.sha256: "<hex>  <case path>" per line. */
static void test_reference_fingerprints(void **state)
{
    char path[2048], line[4096];
    FILE *f;
    int n = 0;
    (void)state;
    f = fopen(cic_test_path(path, sizeof path, "reference/weights.sha256"), "r");
    if (!f)
        fail_msg("cannot open %s", path);
    while (fgets(line, sizeof line, f)) {
        char want[65], rel[1024], casep[2048], got[65];
        cic_case c;
        cic_diag d;
        cic_model *m;
        if (sscanf(line, "%64s %1023s", want, rel) != 2)
            continue;
        cic_test_path(casep, sizeof casep, rel);
        if (cic_case_load(&c, casep, &d) != CIC_OK)
            fail_msg("%s: %s", casep, d.msg);
        m = cic_model_create(&c.model, c.readout);
        assert_non_null(m);
        cic_model_weights_sha256(got, m);
        if (strcmp(got, want) != 0)
            fail_msg("%s: weights sha256 %s, reference/weights.sha256 says %s", rel, got, want);
        cic_model_destroy(m);
        n++;
    }
    fclose(f);
    assert_true(n >= 7); /* every shipped case is listed */
}

/* Every family descriptor is complete, and no two claim the same folder:
 * the dispatcher asks them in table order, so an overlap would make the
 * order decide. */
static void test_ckpt_families(void **state)
{
    int i, j, bare = 0;
    (void)state;
    for (i = 0; i < CIC_CKPT_FAMILY_COUNT; i++) {
        const cic_ckpt_family *f = _cic_ckpt_families[i];
        assert_non_null(f);
        assert_non_null(f->name);
        assert_true(f->name[0] != '\0');
        assert_non_null(f->config);
        assert_non_null(f->sizes);
        assert_non_null(f->parts);
        assert_non_null(f->model_cfg);
        assert_non_null(f->check_layer);
        assert_non_null(f->check_head);
        if (!((f->model_types && f->model_types[0]) || f->architecture || f->bare))
            fail_msg("family %s claims no folder", f->name);
        if (f->positions && !f->embed)
            fail_msg("family %s: positions without a token embedding", f->name);
        /* verify without a token embedding has hidden states only and, without
         * --q, Q = I: only for a family with a config.json to say so */
        if (f->verify && !f->embed && (f->bare || !f->architecture))
            fail_msg("family %s: verify without a token embedding, not a timm-style "
                     "architecture", f->name);
        bare += f->bare;
        for (j = 0; j < i; j++) {
            const cic_ckpt_family *g = _cic_ckpt_families[j];
            const char *const *t;
            assert_string_not_equal(f->name, g->name);
            for (t = f->model_types; t && *t; t++)
                if (_cic_ckpt_family_find(*t, NULL, false) != f)
                    fail_msg("model_type %s: %s and %s", *t, f->name, g->name);
            if (f->architecture && g->architecture &&
                (!strncmp(f->architecture, g->architecture, strlen(f->architecture)) ||
                 !strncmp(g->architecture, f->architecture, strlen(g->architecture))))
                fail_msg("architecture prefixes %s (%s) and %s (%s) overlap", f->architecture,
                         f->name, g->architecture, g->name);
        }
    }
    assert_int_equal(bare, 1); /* one family reads a folder without config.json */
}

/* Which family reads which config.json (model_type, architecture), and
 * which verify reads. */
static void test_ckpt_family_find(void **state)
{
    static const struct {
        const char *type, *arch;
        bool bare;
        const char *family; /* NULL: refused */
        bool verify;
    } c[] = {
        {"llama", NULL, false, "llama", true},
        {"mistral", "vit_base_patch16_224", false, "llama", true},
        {"qwen2", NULL, false, "llama", true},
        {"opt", NULL, false, "opt", true},
        {NULL, "vit_base_patch16_224", false, "timm", true},
        {"gptj", NULL, false, "gptj", true},
        {"gptj", "vit_base_patch16_224", false, "gptj", true}, /* model_type decides */
        {"gpt-j", NULL, false, NULL, false},
        {"GPTJ", NULL, false, NULL, false},
        {NULL, "DiT-XL/2", false, "dit", false},
        {NULL, NULL, true, "dit", false},
        {"gpt2", NULL, false, NULL, false},
        {"gpt2", "vit_base_patch16_224", false, NULL, false}, /* model_type decides */
        {"Llama", NULL, false, NULL, false},
        {NULL, "resnet50", false, NULL, false},
        {NULL, "vit", false, NULL, false},
        {NULL, NULL, false, NULL, false},
    };
    size_t i;
    (void)state;
    for (i = 0; i < sizeof c / sizeof c[0]; i++) {
        const cic_ckpt_family *f = _cic_ckpt_family_find(c[i].type, c[i].arch, c[i].bare);
        const char *got = f ? f->name : "(none)", *want = c[i].family ? c[i].family : "(none)";
        if (strcmp(got, want) || (f && f->verify != c[i].verify))
            fail_msg("model_type %s, architecture %s, bare %d: %s (verify %d), expected %s "
                     "(verify %d)", c[i].type ? c[i].type : "-", c[i].arch ? c[i].arch : "-",
                     c[i].bare, got, f ? f->verify : 0, want, c[i].verify);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_weights_deterministic),
        cmocka_unit_test(test_build_progress),
        cmocka_unit_test(test_tensor_names),
        cmocka_unit_test(test_reference_fingerprints),
        cmocka_unit_test(test_ckpt_families),
        cmocka_unit_test(test_ckpt_family_find),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
