/* SPDX-License-Identifier: MIT */
/* verify.c: the `cicheck verify` command (src/pipeline/verify.h). */
#include "run.h"

#include "../engine/engine.h"
#include "../pipeline/verify.h"
#include "../pipeline/verify_dit.h"
#include "../report/report.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char CIC_VERIFY_USAGE[] =
    "usage: cicheck verify ORIGINAL TRANSFORMED [options]\n"
    "  A rewritten checkpoint against its original, layer by layer. Both are\n"
    "  Hugging Face folders of the llama family (llama, mistral, qwen2), OPT or\n"
    "  GPT-J, or timm ViTs (hidden states only; without --q, Q = I), each\n"
    "  config.json and model.safetensors or shards, or DiT (below); the\n"
    "  transformed one may leave its norm weights out (fused: gains 1,\n"
    "  LayerNorm biases 0).\n"
    "  --q FILE             the residual rotation Q the rewrite applied (a\n"
    "                       safetensors [d, d] matrix); without it, Q is recovered\n"
    "                       from the embeddings when they determine it (least\n"
    "                       squares, proven orthogonal), else only the head\n"
    "                       readout is compared, on token ids\n"
    "  --q-tensor NAME      the tensor of FILE (default: its only one)\n"
    "  --online down_proj:hadamard   the online Hadamard before down_proj (R4)\n"
    "  --online qk:hadamard          the online Hadamard of q and k after RoPE (R3)\n"
    "  --layernorm fused    OPT, GPT-J, timm ViT: the rewrite fused each LayerNorm\n"
    "                       (gain and bias) into its readers\n"
    "                       and runs it as RMSNorm on a centred stream (QuaRot,\n"
    "                       SliceGPT); its stream is compared with the original's\n"
    "                       without the row mean (default kept)\n"
    "  --input FILE         the block input as saved: \"input\" hidden states\n"
    "                       [batch, tokens, d] or [rows, d], or \"input_ids\" token\n"
    "                       ids [batch, tokens] or [tokens] (I32, I64); tokens and\n"
    "                       samples (batch) are the file's: a --tokens or --samples\n"
    "                       given must agree, and splits [rows, d] (neither: one\n"
    "                       sample of rows tokens)\n"
    "  --input-kind tokens  seeded token ids through each model's embed_tokens\n"
    "                       (default: seeded hidden states)\n"
    "  --layers N | a-b     the first N layers, or layers a to b (0-based; at most\n"
    "                       1024 at once)\n"
    "  --tokens N           tokens per sample (default 16, or the input file's)\n"
    "  --samples N          samples (default 2, or the input file's)\n"
    "  --seed N             seed of the block input (default 0)\n"
    "  --mpfr-prec P        MPFR precision of both runs (default 128)\n"
    "  --threads N          MPFR threads (default: one per core)\n"
    "  --engine auto|mpfr   which engine decides each verdict: auto (default) f64\n"
    "                       with its proven error bound when the bound leaves ce\n"
    "                       on one side of the thresholds, else MPFR; mpfr: MPFR\n"
    "                       for every layer\n"
    "  --case FILE          also run both models in the f32 and low-precision\n"
    "                       engines of FILE's [engines] (a case file; its other\n"
    "                       tables are read and checked, not used)\n"
    "  --out DIR            write DIR/report.json and DIR/report.md, a Markdown\n"
    "                       summary (DIR checked before the run)\n"
    "  The thresholds follow the fewest significand bits among the tensors the\n"
    "  transformed model reads and Q (F32; BF16 and F16; F64); the output names\n"
    "  the tensor that set them.\n"
    "  The first layer not equivalent is diagnosed: each tensor against the rewrite\n"
    "  rule (from the original's, Q and these options), the ones that differ named\n"
    "  with the nearest known mistake of cases/known-breaks/.\n"
    "  DiT (the reference names; docs/reference/dit-rewrite.md says what a rewrite\n"
    "  stores for each strategy):\n"
    "  --adaln STRATEGY     how the rewrite treats the adaLN modulation:\n"
    "                       static-fold      the modulation of one condition c0\n"
    "                                        folded into every linear (readers\n"
    "                                        W diag(1 + scale) Q, bias + W shift;\n"
    "                                        writers Q^T C diag(gate) W); no\n"
    "                                        modulation left; c0 stored as adaln.c0\n"
    "                       online-unrotate  weights kept; online z = norm Q^T\n"
    "                                        before each modulate, (gate o) C Q\n"
    "                                        after each gate\n"
    "                       per-sample-fold  weights kept; each sample's fold of\n"
    "                                        the above formed at run time\n"
    "                       branch-rotate    stream not rotated; each linear's\n"
    "                                        input x H online, its weight W H (H\n"
    "                                        the Hadamard matrix of its width)\n"
    "                       Q (--q) is the stream's rotation, x C Q (RMSNorm on it;\n"
    "                       --layernorm kept: x Q with a mean-preserving Q, LN)\n"
    "  --input FILE         also \"c\" [samples, d_cond], one condition per sample\n"
    "                       (default seeded; a static fold's sample 0 is adaln.c0)\n"
    "  Verdicts per block and per sample: each block on the original's stream, so\n"
    "  a broken block is named and its tensors diagnosed; the per-block adaLN\n"
    "  FLOPs of the rewrite against the original are printed.\n"
    "  exit 0: every layer and the head equivalent; 1: one is not; 2: bad input\n";

static int verify_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "cicheck verify: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", CIC_VERIFY_USAGE);
    return CIC_EINPUT;
}

/* A decimal integer (digits only) in [lo, hi] into *out; -1 otherwise. */
static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v;
    if (!isdigit((unsigned char)s[0]))
        return -1; /* no sign, no space, no empty value */
    errno = 0;
    v = strtol(s, &end, 10);
    if (*end || errno || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* The first layer of --layers a-b at most this, so that a + the layers
 * compared stays an int; whether the checkpoint has them is checked when it
 * is read. */
#define LAYER0_MAX (INT_MAX - CIC_VERIFY_MAX_LAYERS)

/* --layers N (the first N) or a-b (0-based, at most CIC_VERIFY_MAX_LAYERS). */
static int parse_layers(const char *s, cic_verify_opts *o)
{
    long a, b;
    char buf[64], *dash;
    if (parse_int(s, 1, CIC_VERIFY_MAX_LAYERS, &a) == 0) {
        o->layer0 = 0;
        o->layers = (int)a;
        return 0;
    }
    if (strlen(s) >= sizeof buf || !(dash = strchr(strcpy(buf, s), '-')))
        return -1;
    *dash = '\0';
    if (parse_int(buf, 0, LAYER0_MAX, &a) ||
        parse_int(dash + 1, a, a + (CIC_VERIFY_MAX_LAYERS - 1), &b))
        return -1;
    o->layer0 = (int)a;
    o->layers = (int)(b - a + 1);
    return 0;
}

/* A path (or name) option's value into dst (cap bytes): not empty (an
 * empty --q or --case would otherwise read as not given), not too long. */
static int path_opt(char *dst, size_t cap, const char *k, const char *v)
{
    if (!v[0])
        return verify_usage("%s needs a value (got '')", k);
    if (strlen(v) >= cap) {
        fprintf(stderr, "cicheck verify: %s: too long (at most %zu bytes): %s\n", k, cap - 1, v);
        return CIC_EINPUT;
    }
    cic_strlcpy(dst, v, cap);
    return CIC_OK;
}

static int parse_opt(int argc, char **argv, int *i, cic_verify_opts *o, const char **out,
                     long *threads)
{
    const char *k = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    long n;
    if (!v)
        return verify_usage("%s needs a value", k);
    (*i)++;
    if (!strcmp(k, "--q"))
        return path_opt(o->q_file, sizeof o->q_file, k, v);
    if (!strcmp(k, "--q-tensor"))
        return path_opt(o->q_tensor, sizeof o->q_tensor, k, v);
    if (!strcmp(k, "--online")) {
        if (!strcmp(v, "down_proj:hadamard"))
            o->online_down = true;
        else if (!strcmp(v, "qk:hadamard"))
            o->online_qk = true;
        else
            return verify_usage("--online '%s': allowed down_proj:hadamard, qk:hadamard", v);
        return CIC_OK;
    }
    if (!strcmp(k, "--layernorm")) {
        if (strcmp(v, "fused") && strcmp(v, "kept"))
            return verify_usage("--layernorm '%s': allowed fused, kept", v);
        o->ln_fused = !strcmp(v, "fused");
        o->ln_given = true;
        return CIC_OK;
    }
    if (!strcmp(k, "--adaln")) {
        char allowed[200];
        if (cic_verify_dit_strategy(v, allowed, sizeof allowed) < 0) {
            fprintf(stderr, "cicheck verify: --adaln '%s': allowed %s\n", v, allowed);
            return CIC_EINPUT;
        }
        cic_strlcpy(o->adaln, v, sizeof o->adaln);
        return CIC_OK;
    }
    if (!strcmp(k, "--input")) {
        o->input_kind = CIC_INPUT_FILE;
        return path_opt(o->input_file, sizeof o->input_file, k, v);
    }
    if (!strcmp(k, "--input-kind")) {
        if (!strcmp(v, "tokens"))
            o->input_kind = CIC_INPUT_TOKENS;
        else if (strcmp(v, "random"))
            return verify_usage("--input-kind '%s': allowed random, tokens", v);
        return CIC_OK;
    }
    if (!strcmp(k, "--layers")) {
        if (parse_layers(v, o) == 0)
            return CIC_OK;
        fprintf(stderr, "cicheck verify: --layers '%s': N (1 .. %d) or a-b (0-based, a at most "
                "%d, b from a to a + %d)\n", v, CIC_VERIFY_MAX_LAYERS, LAYER0_MAX,
                CIC_VERIFY_MAX_LAYERS - 1);
        return CIC_EINPUT;
    }
    if (!strcmp(k, "--engine")) {
        if (strcmp(v, "auto") && strcmp(v, "mpfr"))
            return verify_usage("--engine '%s': allowed auto, mpfr", v);
        o->mpfr_only = !strcmp(v, "mpfr");
        return CIC_OK;
    }
    if (!strcmp(k, "--case"))
        return path_opt(o->case_file, sizeof o->case_file, k, v);
    if (!strcmp(k, "--out")) {
        *out = v; /* checked once the arguments are parsed, before any work */
        return CIC_OK;
    }
    if (!strcmp(k, "--tokens") || !strcmp(k, "--samples") || !strcmp(k, "--seed") ||
        !strcmp(k, "--mpfr-prec") || !strcmp(k, "--threads")) {
        bool seed = !strcmp(k, "--seed"), prec = !strcmp(k, "--mpfr-prec");
        if (parse_int(v, seed ? 0 : prec ? 64 : 1, seed ? LONG_MAX : prec ? 4096 : 65536, &n)) {
            char fmt[96]; /* k is one of the names above: no '%' in it */
            snprintf(fmt, sizeof fmt, "%s '%%s': %s", k,
                     seed ? "a whole number, 0 or more" : prec ? "64 .. 4096 bits" : "1 .. 65536");
            return verify_usage(fmt, v);
        }
        if (!strcmp(k, "--tokens"))
            o->tokens = (int)n;
        else if (!strcmp(k, "--samples"))
            o->samples = (int)n;
        else if (seed)
            o->seed = (uint64_t)n;
        else if (prec)
            o->prec = (int)n;
        else
            *threads = n;
        return CIC_OK;
    }
    (*i)--;
    return verify_usage("unknown option '%s'", k);
}

/* What set the thresholds, and why. */
static void print_storage(const cic_verify_opts *o, const cic_verify_result *r)
{
    const cic_ckpt_storage *s = &r->storage;
    if (r->storage_q)
        printf("  set by Q: tensor '%s' of %s is %s, fewer bits than every tensor the "
               "transformed model reads\n", s->tensor, o->q_file, s->dtype);
    else if (s->tensor[0])
        printf("  set by %s tensor '%s' of %s (%d tensor%s at %d bits): the fewest significand "
               "bits among the tensors the transformed model reads%s\n", s->dtype, s->tensor,
               o->trans, s->count, s->count == 1 ? "" : "s", s->bits,
               r->q_src == CIC_VERIFY_Q_FILE ? " and Q" : "");
}

/* What is wrong with the first broken layer (verify_diag.h). */
static void print_diag(const cic_vdiag *g)
{
    int i;
    if (g->layer < 0 && !g->note[0])
        return;
    if (g->layer >= 0 && !g->with_q)
        printf("  diagnosis of layer %d: %s\n", g->layer, g->note);
    else
        printf("  diagnosis: %s\n", g->note);
    for (i = 0; i < g->n; i++) {
        const cic_vdiag_item *it = &g->it[i];
        printf("    %s", it->finding);
        if (it->mistake)
            printf("  [%s]", it->mistake);
        if (it->tensor[0])
            printf("  (%s)", it->tensor);
        printf("\n");
    }
}

static void print_result(const cic_verify_opts *o, const cic_verify_result *r)
{
    int l;
    int nm = 0;
    for (l = 0; r->have_q && l < r->n_layers; l++)
        nm += r->by[l] == CIC_VERIFY_BY_MPFR;
    printf("verify %s against %s: %d layer%s from %d, %d tokens x %d samples, MPFR %d bits\n",
           o->trans, o->orig, r->n_layers, r->n_layers == 1 ? "" : "s", r->layer0, o->tokens,
           o->samples, o->prec);
    printf("streamed layer by layer in %.1f s; verdicts decided by f64 with a proven bound "
           "where it decides, else by MPFR: %d layer%s by MPFR\n", r->seconds, nm,
           nm == 1 ? "" : "s");
    printf("stored at %d bits: equivalent up to %.3g, broken from %.3g\n", r->bits, r->eq,
           r->br);
    print_storage(o, r);
    if (o->ln_fused)
        printf("LayerNorm fused: the rewrite's norms do not centre; the original's stream is "
               "compared without its row mean\n");
    if (r->q_src == CIC_VERIFY_Q_RECOVERED)
        printf("no --q: Q recovered from the embeddings (least squares on %d rows, relative "
               "residual %.3g; ||Q^T Q - I||_2 <= %.3g proven)\n", r->qfit.rows, r->qfit.fit,
               r->qfit.orth_bound);
    if (r->q_src == CIC_VERIFY_Q_IDENTITY)
        printf("no --q, and no token embedding to recover Q from: Q is the identity (a "
               "rewrite that fuses its LayerNorms without rotating)\n");
    if (!r->have_q) {
        printf("no --q, and Q not recovered from the embeddings: %s\n", r->qfit.why);
        printf("no --q: the per-layer view needs the residual rotation Q; only the head "
               "readout is compared\n");
    }
    if (r->tokens_forced)
        printf("the block input is seeded token ids, each model embedding them itself (the "
               "rewrite's hidden states X Q would need Q)\n");
    if (r->f64_why[0])
        printf("the f64 engine has no proven bound here (%s): MPFR decides every verdict\n",
               r->f64_why);
    if (r->q_src == CIC_VERIFY_Q_FILE)
        printf("(residual stream after the layer, mapped back with Q^T; Q max |Q^T Q - I| "
               "%.3g)\n", r->q_orth);
    else if (r->q_src == CIC_VERIFY_Q_IDENTITY)
        printf("(residual stream after the layer, as it is)\n");
    else if (r->have_q)
        printf("(residual stream after the layer, mapped back with the recovered Q^T)\n");
    if (r->have_q)
        printf("layer  ce_residual  verdict\n");
    for (l = 0; r->have_q && l < r->n_layers; l++)
        printf("%5d  %11.3g  %s\n", r->layer0 + l, r->ce[l], CIC_VERDICT_NAME[r->verdict[l]]);
    printf("head   %11.3g  %s   (the logits)\n", r->head_ce, CIC_VERDICT_NAME[r->head_verdict]);
    printf("layer  decided_by  f64_bound  seconds   (f64: ce +- the bound lies on one side "
           "of the thresholds)\n");
    for (l = 0; r->have_q && l < r->n_layers; l++)
        printf("%5d  %-10s  %9.2g  %7.2f\n", r->layer0 + l, CIC_VERIFY_BY_NAME[r->by[l]],
               r->bound[l], r->sec[l]);
    printf("head   %-10s  %9.2g\n", CIC_VERIFY_BY_NAME[r->head_by], r->head_bound);
    for (l = 0; l < r->n_eng; l++)
        printf("%s vs the original's truth (rel_norm2): original %.3g, transformed %.3g\n",
               r->eng[l], r->eng_orig[l], r->eng_trans[l]);
    if (r->first_bad >= 0) {
        printf("first layer not equivalent: %d (%s)\n", r->first_bad,
               CIC_VERDICT_NAME[r->verdict[r->first_bad - r->layer0]]);
        print_diag(&r->diag);
    } else if (r->head_verdict != CIC_VERDICT_EQUIVALENT) {
        printf("the head readout is %s\n", CIC_VERDICT_NAME[r->head_verdict]);
        print_diag(&r->diag);
    } else
        printf("every layer%s equivalent\n", r->have_q ? " and the head" : " (head readout)");
}

/* A DiT's check (verify_dit.h), printed and written. */
static int verify_dit(const cic_verify_opts *o, const char *out)
{
    static cic_verify_dit_result r;
    cic_diag d;
    int rc;
    memset(&d, 0, sizeof d);
    rc = cic_verify_dit(o, &r, &d);
    if (rc == CIC_EINPUT || rc == CIC_EINTERNAL) {
        cic_diag_print(stderr, &d);
        cic_verify_dit_result_clear(&r);
        return rc;
    }
    cic_verify_dit_print(stdout, o, &r);
    if (out) {
        char path[4200];
        snprintf(path, sizeof path, "%s/report.json", out);
        if (cic_mkdir_p(out, &d) < 0 || cic_verify_dit_write_json(o, &r, path, &d) < 0 ||
            (snprintf(path, sizeof path, "%s/report.md", out) > 0 &&
             cic_verify_dit_write_md(o, &r, path, &d) < 0)) {
            cic_diag_print(stderr, &d);
            rc = CIC_EINTERNAL;
        }
    }
    cic_verify_dit_result_clear(&r);
    return rc;
}

int cic_cmd_verify(int argc, char **argv)
{
    cic_verify_opts o;
    static cic_verify_result r;
    const char *out = NULL, *pos[2] = {NULL, NULL};
    long threads = 0;
    cic_diag d;
    int i, np = 0, rc;
    memset(&o, 0, sizeof o);
    memset(&d, 0, sizeof d);
    o.prec = 128; /* tokens and samples 0: not given (cic_verify_input_dims) */
    for (i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(CIC_VERIFY_USAGE, stdout);
            return CIC_OK;
        }
        if (argv[i][0] == '-') {
            if ((rc = parse_opt(argc, argv, &i, &o, &out, &threads)) != CIC_OK)
                return rc;
        } else if (np == 2) {
            return verify_usage("takes two checkpoint folders (got '%s' too)", argv[i]);
        } else {
            pos[np++] = argv[i];
        }
    }
    if (np < 2)
        return verify_usage("needs ORIGINAL and TRANSFORMED checkpoint folders%s", "");
    if (out && cic_out_check(out, NULL, "report.json", &d) != 0) { /* before the run */
        fprintf(stderr, "cicheck verify: --out: %s%s%s\n", d.file, d.file[0] ? ": " : "",
                d.msg);
        return CIC_EINPUT;
    }
    if (strlen(pos[0]) >= sizeof o.orig || strlen(pos[1]) >= sizeof o.trans)
        return verify_usage("a checkpoint path is too long%s", "");
    strcpy(o.orig, pos[0]);
    strcpy(o.trans, pos[1]);
    o.threads = (int)threads;
    if (o.adaln[0] || cic_verify_dit_is(o.orig)) {
        /* the defaults; an input file's sizes are read by the DiT reader,
         * which also holds the conditions "c" */
        if (o.input_kind != CIC_INPUT_FILE)
            (void)cic_verify_input_dims(&o, &d);
        return verify_dit(&o, out);
    }
    rc = cic_verify_input_dims(&o, &d);
    if (rc == CIC_OK)
        rc = cic_verify(&o, &r, &d);
    if (rc == CIC_EINPUT || rc == CIC_EINTERNAL) {
        cic_diag_print(stderr, &d);
        return rc;
    }
    print_result(&o, &r);
    if (out) {
        char path[4200];
        snprintf(path, sizeof path, "%s/report.json", out);
        if (cic_mkdir_p(out, &d) < 0 || cic_verify_write_json(&o, &r, path, &d) < 0 ||
            (snprintf(path, sizeof path, "%s/report.md", out) > 0 &&
             cic_verify_write_md(&o, &r, path, &d) < 0)) {
            cic_diag_print(stderr, &d);
            return CIC_EINTERNAL;
        }
    }
    return rc;
}
