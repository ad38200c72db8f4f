/* SPDX-License-Identifier: MIT */
/* load_input.c: the [input] table, what the block input is
 * (src/model/checkpoint.h, cic_input_fill):
 *
 *   [input]
 *   kind = "random"        # seeded hidden states (default; massive_* apply)
 *   kind = "tokens"        # seeded token ids through the checkpoint's
 *                          # embed_tokens (needs [model] checkpoint)
 *   file = "calib.safetensors"   # "input" [samples, tokens, d_model] or
 *                          # [samples * tokens, d_model] hidden states, or
 *                          # "input_ids" [samples, tokens] or [tokens] (one
 *                          # sample) I32/I64 (needs a checkpoint)
 *
 * The file (relative to the case file's folder) is opened and its tensor
 * checked here, [model] tokens and samples against its shape (they split a
 * 2-D "input"'s rows); its values are read when the model is built. */
#include "case_int.h"

#include "../model/input_shape.h"

#include <string.h>

static const char *const _cic_input_keys[] = {"kind", "file"};

/* The file's tensor against the model (input_shape.h: the forms allowed,
 * its tokens and samples against the case's): CIC_OK or an error at
 * (l, col). */
static int check_file(cic_case_ctx *x, const cic_model_cfg *m, int l, int col)
{
    cic_diag d;
    cic_input_shape s;
    int tokens = m->tokens, samples = m->samples;
    memset(&d, 0, sizeof d);
    if (cic_input_shape_read(&s, m->input_file, &d) < 0 ||
        cic_input_shape_fit(&tokens, &samples, &s, m->input_file, "[model] tokens =",
                            "[model] samples =", &d) < 0 ||
        cic_input_shape_check_width(&s, m->input_file, m->d_model, &d) < 0)
        return _cic_fail(x, l, col, "[input] file: %s: %s", m->input_file, d.msg);
    if (s.ids && !m->checkpoint[0])
        return _cic_fail(x, l, col, "[input] file '%s': 'input_ids' need [model] checkpoint "
                         "(its embed_tokens)", m->input_file);
    return CIC_OK;
}

int _cic_load_input(cic_case_ctx *x, cic_case *c, const cic_toml_node *it)
{
    cic_case_tab t = {it, "[input]"};
    cic_model_cfg *m = &c->model;
    const cic_toml_node *kn = NULL, *fn = NULL;
    char file[1024];
    bool have_k = false, have_f = false;
    int v = CIC_INPUT_RANDOM, l, col, err0 = x->n_err;
    m->input_kind = CIC_INPUT_RANDOM;
    m->input_file[0] = '\0';
    if (!it)
        return CIC_OK;
    _cic_check_keys(x, &t, _cic_input_keys, CIC_CASE_LEN(_cic_input_keys));
    if (_cic_get_enum(x, &t, "kind", CIC_INPUT_NAME, CIC_INPUT_COUNT, &v, &have_k, &kn) ||
        _cic_get_str(x, &t, "file", file, sizeof file, &have_f, &fn))
        return CIC_EINPUT;
    _cic_pos(have_f ? fn : have_k ? kn : it, &l, &col);
    if (have_f && have_k && v != CIC_INPUT_FILE)
        return _cic_fail(x, l, col, "[input] has file and kind = \"%s\": a file is kind = "
                         "\"file\" (or leave kind out)", CIC_INPUT_NAME[v]);
    if (v == CIC_INPUT_FILE && !have_f)
        return _cic_fail(x, l, col, "[input] kind = \"file\" needs file = \"PATH\"");
    if (have_f)
        v = CIC_INPUT_FILE;
    m->input_kind = (enum cic_input_kind)v;
    if (v == CIC_INPUT_TOKENS && !m->checkpoint[0])
        return _cic_fail(x, l, col, "[input] kind = \"tokens\" needs [model] checkpoint (its "
                         "embed_tokens)");
    if (v != CIC_INPUT_RANDOM && m->massive_channels > 0)
        return _cic_fail(x, l, col, "[model.weights] massive_channels apply to seeded hidden "
                         "states; with [input] kind = \"%s\" remove them", CIC_INPUT_NAME[v]);
    if (v == CIC_INPUT_FILE) {
        if (c->sweep.on && (c->sweep.n[CIC_AXIS_TOKENS] || c->sweep.n[CIC_AXIS_SAMPLES] ||
                            c->sweep.n[CIC_AXIS_D_MODEL]))
            return _cic_fail(x, l, col, "[input] file fixes tokens, samples and d_model; "
                             "they cannot be swept");
        if (!file[0] || _cic_case_relpath(m->input_file, sizeof m->input_file, c->path, file))
            return _cic_fail(x, l, col, "[input] file: a path is needed, of at most %zu bytes",
                             sizeof m->input_file - 1);
        if (x->n_err == err0)
            check_file(x, m, l, col);
    }
    return _cic_status(x, err0);
}
