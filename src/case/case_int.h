/* SPDX-License-Identifier: MIT */
/* case_int.h: what the files of the case loader share. Not a public header:
 * only the .c files of src/case include it (the public one is case.h).
 *
 *   names.c         the name tables of case.h
 *   diag.c          collecting errors, quoting, "did you mean"
 *   get.c           typed getters of table keys, unknown and missing keys
 *   load_model.c    [model] and [model.weights]
 *   load_engines.c  [engines] and [readout]
 *   load_xform.c    [[transforms]]
 *   load_gates.c    [[gates]] (and the metric names a gate may use)
 *   sweep.c         [sweep] and the checks of each sweep point
 *   memory.c        the memory estimate
 *   block.c         what depends on the block kind (for block descriptors)
 *   load.c          the entry points: file or string to a checked cic_case
 *
 * The loader reports every error of a file (up to CIC_DIAG_MAX are kept),
 * not only the first: a section goes on with its next key after a bad one,
 * [[transforms]] and [[gates]] with their next entry. Checks that combine
 * keys run only when those keys loaded (the *_ok flags), so one mistake is
 * reported once, not again as the consequences downstream. */
#ifndef CIC_CASE_INT_H
#define CIC_CASE_INT_H

#include "case.h"
#include "toml_capi.h"

#include "../model/model.h"
#include "../xform/kinds.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CIC_CASE_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- diagnostics (diag.c) ---------------------------------------------- */

typedef struct {
    int line, col;
    char msg[sizeof(((cic_diag *)0)->msg)];
} cic_case_err;

typedef struct {
    cic_diag *d;
    const char *file; /* for messages */
    int n_err;        /* errors reported so far (the first CIC_DIAG_MAX kept) */
    cic_case_err err[CIC_DIAG_MAX];
    bool block_ok;    /* [model] block loaded: transforms can be checked */
    bool samples_ok;  /* [model] samples loaded: calibration can be checked */
    bool engines_ok;  /* [engines] f32 loaded: gates' engines can be checked */
    /* Unknown keys that look like typos of an allowed key (table, key): that
     * key is then not also reported as missing. */
    int n_typo;
    const cic_toml_node *typo_tbl[16];
    const char *typo_key[16];
} cic_case_ctx;

/* Report an error and return CIC_EINPUT. A position the parser did not
 * know (0) becomes 1:1 so every message keeps the file:line:column form. */
int _cic_fail(cic_case_ctx *x, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Hand the errors to the caller's diagnostic in file order. */
void _cic_flush(cic_case_ctx *x);
/* CIC_EINPUT when errors were reported since `since` (x->n_err then). */
int _cic_status(const cic_case_ctx *x, int since);
/* Escape s[0 .. len) for a message into buf (cap >= 8); returns buf. */
const char *_cic_quote(char *buf, size_t cap, const char *s, size_t len);
/* The closest of names[0 .. n) to s[0 .. len) if a likely typo, else NULL. */
const char *_cic_closest(const char *s, size_t len, const char *const *names,
                         size_t n);
/* "a, b, c" into buf. */
const char *_cic_join(char *buf, size_t cap, const char *const *names, size_t n);
/* "; did you mean 'x'?" or "" into buf. */
const char *_cic_hint(char *buf, size_t cap, const char *s, size_t len,
                      const char *const *names, size_t n);

/* ---- typed getters (get.c) ----------------------------------------------
 * Each returns CIC_OK (value stored, *present set if given) or CIC_EINPUT.
 * An absent key is CIC_OK with *present = false and the output untouched, so
 * callers set defaults first. `where` names the table in messages. */

typedef struct {
    const cic_toml_node *tbl;
    const char *where; /* "[model]", "[[transforms]] entry 2", ... */
} cic_case_tab;

/* Find key; value and the key's position (kl, kc may be NULL). */
const cic_toml_node *_cic_find(const cic_case_tab *t, const char *key, int *kl,
                               int *kc);
void _cic_pos(const cic_toml_node *n, int *l, int *c);
int _cic_wrong_type(cic_case_ctx *x, const cic_case_tab *t, const char *key,
                    const cic_toml_node *v, const char *want);
/* Integer in [lo, hi] (checked as int64 before narrowing). */
int _cic_get_int(cic_case_ctx *x, const cic_case_tab *t, const char *key,
                 int64_t lo, int64_t hi, int64_t *out, bool *present,
                 const cic_toml_node **node);
/* Narrowing wrapper for int fields (hi must fit in int). */
int _cic_get_intf(cic_case_ctx *x, const cic_case_tab *t, const char *key, int lo,
                  int hi, int *out, bool *present, const cic_toml_node **node);
/* Number, finite and > 0 (positive) or >= 0, at most hi (INFINITY: none). */
int _cic_get_num(cic_case_ctx *x, const cic_case_tab *t, const char *key,
                 bool positive, double hi, double *out, bool *present,
                 const cic_toml_node **node);
int _cic_get_bool(cic_case_ctx *x, const cic_case_tab *t, const char *key,
                  bool *out);
/* String of 1 .. cap-1 bytes without NUL or control characters. */
int _cic_get_str(cic_case_ctx *x, const cic_case_tab *t, const char *key,
                 char *out, size_t cap, bool *present, const cic_toml_node **node);
/* One of names[0 .. count) (its index in *out); a bad value lists them. */
int _cic_get_enum(cic_case_ctx *x, const cic_case_tab *t, const char *key,
                  const char *const *names, size_t count, int *out, bool *present,
                  const cic_toml_node **node);
/* Every key of t must be in allowed[]. */
int _cic_check_keys(cic_case_ctx *x, const cic_case_tab *t,
                    const char *const *allowed, size_t n_allowed);
/* A sub-table under key (NULL when absent); anything but a table is an
 * error. */
int _cic_get_table(cic_case_ctx *x, const cic_case_tab *t, const char *key,
                   const char *label, const cic_toml_node **out);
/* An array of [[key]] tables (NULL when absent), at most max entries. */
int _cic_get_aot(cic_case_ctx *x, const cic_case_tab *root, const char *key,
                 size_t max, const cic_toml_node **out);
/* Was key of table tbl reported as a misspelled unknown key? */
bool _cic_typo(const cic_case_ctx *x, const cic_toml_node *tbl, const char *key);
/* "missing required key" (unless reported as a typo); CIC_EINPUT. */
int _cic_missing(cic_case_ctx *x, const cic_case_tab *t, const char *key,
                 const char *extra);
/* Transform and case names: [A-Za-z0-9_.-]+, not starting with '.'. */
bool _cic_name_ok(const char *s);

/* ---- sections -----------------------------------------------------------
 * Each loads its table into c with the defaults of case.h, reporting every
 * error to x; CIC_EINPUT when it reported one. */

int _cic_load_model(cic_case_ctx *x, cic_case *c, const cic_toml_node *mt);
/* Whether axis a is swept; the first swept value of an int axis into *out
 * (and *have true) when it is (load_model.c). */
bool _cic_swept(const cic_case *c, enum cic_sweep_axis a);
void _cic_sweep_first_int(const cic_case *c, enum cic_sweep_axis a, int *out, bool *have);
/* PATH p against the folder of the case file case_path (absolute p as it
 * is) into out; -1 when the result is too long (load_qfile.c). */
int _cic_case_relpath(char *out, size_t cap, const char *case_path, const char *p);
/* [input] (load_input.c), after [model]; it may be NULL. */
int _cic_load_input(cic_case_ctx *x, cic_case *c, const cic_toml_node *it);
/* [model] with checkpoint = "DIR" (load_ckpt.c): the sizes from its
 * config.json, tokens, samples, layers, seed from t. */
int _cic_load_checkpoint(cic_case_ctx *x, cic_case *c, const cic_case_tab *t);
int _cic_load_engines(cic_case_ctx *x, cic_case *c, const cic_toml_node *et);
int _cic_load_readout(cic_case_ctx *x, cic_case *c, const cic_toml_node *rt);
/* q = "file:PATH" (load_qfile.c): is s such a value, and load it into xf
 * (the position l:col is the q key's). */
bool _cic_q_is_file(const char *s, size_t len);
int _cic_xform_q_file(cic_case_ctx *x, const cic_case *c, const cic_case_tab *t,
                      cic_xform_spec *xf, const char *s, size_t len, int l, int col);
/* [[engines.lowp]] inside [engines] (load_lowp.c). */
int _cic_load_lowp(cic_case_ctx *x, cic_case *c, const cic_case_tab *et);
int _cic_load_xforms(cic_case_ctx *x, cic_case *c, const cic_toml_node *arr);
int _cic_load_gates(cic_case_ctx *x, cic_case *c, const cic_toml_node *arr);
/* [sweep] (before [model], whose required keys a list may stand in for). */
int _cic_load_sweep(cic_case_ctx *x, cic_case *c, const cic_toml_node *st);

/* std and outlier_scale of m against the binary32 limits (load_model.c);
 * the position is that of the key (or sweep list) to blame, pd a prefix
 * naming the sweep point ("" for none). */
int _cic_check_scale(cic_case_ctx *x, const cic_model_cfg *m, int l, int col,
                     const char *pd);

/* Point i of c's sweep into *m and *prec, checked as the scalar keys are
 * (sweep.c). */
int _cic_sweep_check(cic_case_ctx *x, const cic_case *c, long i,
                     cic_model_cfg *m, int *prec);
/* Every point of c's sweep (st: the [sweep] table) a valid case; c then
 * holds point 0's model and precision. */
int _cic_sweep_check_all(cic_case_ctx *x, cic_case *c, const cic_toml_node *st);

/* The kinds for which want(descriptor, arg) holds, in list order, as
 * "a, b" with the last joined by last: quoted ("\"a\"") and with their
 * alias ("\"rotate\" (R1)") as style asks (load_xform.c). */
enum { CIC_KINDS_QUOTED = 1u << 0, CIC_KINDS_ALIAS = 1u << 1 };
const char *_cic_xform_kinds(char *buf, size_t cap, bool (*want)(const cic_xform_desc *, unsigned),
                             unsigned arg, unsigned style, const char *last);

/* ---- what depends on the block kind (block.c) ---------------------------
 * Each of these is the block kind's part of a check or default; block
 * descriptors will take them over. */

/* The block takes a conditioning input (d_cond, final_layer). */
bool _cic_block_has_cond(enum cic_block_kind b);
/* The defaults of [model] that differ per block (eps, activation) into m. */
void _cic_block_defaults(cic_model_cfg *m);
/* The [model] keys only some blocks have (d_cond, final_layer), t [model]. */
void _cic_block_keys(cic_case_ctx *x, cic_case *c, const cic_case_tab *t);
/* The LLaMA attention keys (rope, rope_theta, kv_heads), t [model]: refused
 * on blocks without them, defaults into c either way. */
void _cic_block_attn_keys(cic_case_ctx *x, cic_case *c, const cic_case_tab *t);
/* The transform kinds block b allows, for a missing 'kind': " (...)". */
const char *_cic_block_kind_hint(enum cic_block_kind b);
/* A transform kind against the block it is applied to (l:col of 'kind'). */
int _cic_check_kind_block(cic_case_ctx *x, const cic_case *c,
                          const cic_xform_spec *xf, int l, int col);
/* Weight elements per layer and for the readout (memory estimate). */
void _cic_block_weights(const cic_model_cfg *m, uint64_t *layer,
                        uint64_t *readout);

/* ---- memory estimate (memory.c) ---------------------------------------- */

/* Saturating size arithmetic: a product of fuzzed sizes never wraps. */
static inline uint64_t _cic_sat_mul(uint64_t a, uint64_t b)
{
    if (a != 0 && b > UINT64_MAX / a)
        return UINT64_MAX;
    return a * b;
}

static inline uint64_t _cic_sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static inline uint64_t _cic_u(int v)
{
    return v > 0 ? (uint64_t)v : 0;
}

/* Transformed models a run holds at once (without --dump). */
int _cic_xforms_live(const cic_case *c);
/* The transformed models behind a memory estimate. */
typedef struct {
    int n_xf;     /* held at once */
    int n_eager;  /* of them holding MPFR values */
    int n_double; /* holding doubles (products through dgemm); the rest recipes */
    int q_order;  /* the largest Q held as doubles, 0 none */
    bool any_eager; /* some transform makes MPFR values (scratch beside them) */
    bool f64_run; /* the f64 engine runs (a double copy of the weights) */
    bool orig_held; /* the original's float32 weights beside those models
                     * (the last transform of the original takes them) */
} cic_mem_models;

/* Weights (element count), their bytes and the activation bytes behind the
 * estimate of a model m with the transformed models mm (model/lazy.h for
 * recipes). */
void _cic_memory_parts_m(const cic_model_cfg *m, const cic_mem_models *mm, int mpfr_prec,
                         uint64_t *weights, uint64_t *wbytes, uint64_t *abytes);

#endif
