/* SPDX-License-Identifier: MIT */
/* verify_dit.h: cicheck verify for DiT checkpoints (adaLN blocks): a
 * rewrite stored as docs/reference/dit-rewrite.md says, for one of the
 * adaLN strategies cicheck knows (--adaln), against its original in the
 * DiT reference names (src/model/ckpt_dit.c).
 *
 * The condition is an input: one per sample, seeded (key (seed, "cond"),
 * normal, std 1; a static fold's sample 0 is its stored calibration
 * condition adaln.c0) or the input file's "c" [samples, d_cond]. Each block
 * of the rewrite runs on the original's stream at that block, rotated (so a
 * verdict names the block at fault, not the ones after it), per sample:
 * ce = ||y_b Q^T - y_a||_2 / ||y_a||_2 over that sample's rows (y_a without
 * its row means on a centred stream), judged by the thresholds of the
 * rewrite's storage as verify.h says. The final layer runs end to end on
 * the rewrite's own stream. Both models run in double (dgemm): its rounding
 * (about 1e-13 relative at these sizes) is far below every threshold (2^-12
 * at F32). A broken block is diagnosed tensor by tensor
 * (verify_dit_diag.c). */
#ifndef CIC_VERIFY_DIT_H
#define CIC_VERIFY_DIT_H

#include "verify.h"

#include <stdio.h>

/* One finding of the diagnosis: the tensor ("" the block as a whole) and
 * what is wrong with it. */
typedef struct {
    int layer;          /* checkpoint numbering; -1 the final layer */
    char tensor[160];
    char finding[240];
} cic_vdit_finding;

#define CIC_VDIT_MAX_FINDINGS 64

typedef struct {
    int layer0, n_layers, tokens, samples;
    int d, heads, d_mlp, d_cond, d_out;
    int kind;              /* the strategy: an adaLN cic_xform_kind */
    bool centered;         /* the rotated stream is x C Q (RMS0); else x Q (LN0) */
    bool cond_file;        /* the conditions came from the input file */
    bool hidden_file;      /* the hidden states came from the input file */
    int calib;             /* static fold: the sample whose condition is adaln.c0
                            * bit for bit, -1 none */
    bool have_head;        /* the final layer compared (the last block is in the run) */
    int bits;
    cic_ckpt_storage storage;
    bool storage_q;
    char q_dtype[8];
    double q_orth;         /* --q: max |Q^T Q - I| in double */
    double eq, br;
    double *ce;                  /* n_layers x samples */
    enum cic_verdict *verdict;   /* n_layers x samples */
    enum cic_verdict block[CIC_VERIFY_MAX_LAYERS]; /* the worst over the samples */
    double head_ce[CIC_MAX_SAMPLES];
    enum cic_verdict head_verdict[CIC_MAX_SAMPLES];
    int first_bad;         /* first block not equivalent (checkpoint numbering), -1 */
    bool head_bad;
    /* per block of the run (B samples x N tokens), per site: FLOPs of the
     * original and of the rewrite (cic_flops_dit, one layer, no final layer) */
    double flops_orig[CIC_SITE_COUNT], flops_rw[CIC_SITE_COUNT];
    cic_vdit_finding find[CIC_VDIT_MAX_FINDINGS];
    int n_find;
    double seconds;
} cic_verify_dit_result;

/* The adaLN strategy called name (an adaLN transform kind), or -1 with
 * the allowed names, comma separated, in allowed. */
int cic_verify_dit_strategy(const char *name, char *allowed, size_t cap);

/* Whether folder dir holds a DiT checkpoint (cicheck verify goes this way
 * for it); false when it is another family or cannot be opened (the run
 * that follows says why). */
bool cic_verify_dit_is(const char *dir);

/* Run the check. CIC_OK (every verdict equivalent), CIC_EGATE (one is not),
 * CIC_EINPUT (bad input: d says why), CIC_EINTERNAL (out of memory).
 * Free r with cic_verify_dit_result_clear (also after a failure). */
int cic_verify_dit(const cic_verify_opts *o, cic_verify_dit_result *r, cic_diag *d);
void cic_verify_dit_result_clear(cic_verify_dit_result *r);

/* The findings of block layer (checkpoint numbering; -1 the final layer):
 * how many, and in *first (when first is not NULL) the first of them; the
 * rest follow it in r->find with the same layer. A plug point for a
 * per-family diagnosis of verify (verify_dit_out.c). */
int cic_verify_dit_findings(const cic_verify_dit_result *r, int layer,
                            const cic_vdit_finding **first);

/* What verify prints of r (verify_dit_out.c). */
void cic_verify_dit_print(FILE *f, const cic_verify_opts *o, const cic_verify_dit_result *r);
/* report.json of r into path (atomically). 0, or -1 with d set. */
int cic_verify_dit_write_json(const cic_verify_opts *o, const cic_verify_dit_result *r,
                              const char *path, cic_diag *d);
/* The same run as a Markdown summary at path (report.md beside
 * report.json; written atomically): the verdict, the table per block and
 * sample, the diagnosis, and the terminal's output. 0, or -1 with d set. */
int cic_verify_dit_write_md(const cic_verify_opts *o, const cic_verify_dit_result *r,
                            const char *path, cic_diag *d);

#endif
