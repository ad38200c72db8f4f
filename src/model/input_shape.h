/* SPDX-License-Identifier: MIT */
/* input_shape.h: the block input of a safetensors file as it was saved,
 * and the tokens and samples it implies (input_shape.c).
 *
 * A file holds hidden states "input" (float: F32, BF16, F16, F64) or token
 * ids "input_ids" (I32, I64); when it holds both, "input" is read. Their
 * shapes, as PyTorch code saves them:
 *
 *   "input"      [batch, tokens, d_model]  a forward hook's hidden states
 *                [rows, d_model]           rows = samples * tokens, split
 *                                          by the tokens or samples given;
 *                                          with neither, one sample of rows
 *                                          tokens (PyTorch's unbatched
 *                                          [tokens, d] sequence)
 *   "input_ids"  [batch, tokens]           a tokenizer's batch
 *                [tokens]                  one sample
 *
 * Sample s owns rows s * tokens .. (s + 1) * tokens - 1 in every form, so
 * the data is read the same way whatever the shape (rows are tokens). This
 * file only reads the header: the callers learn the run's sizes from it
 * before any model is built (cicheck verify, the case loader, a DiT
 * condition's batch), and cic_input_fill (checkpoint.h) reads the values. */
#ifndef CIC_MODEL_INPUT_SHAPE_H
#define CIC_MODEL_INPUT_SHAPE_H

#include "../base/base.h"
#include "../base/safetensors_read.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    const char *name;  /* "input" or "input_ids" (a static string) */
    bool ids;          /* token ids rather than hidden states */
    int ndim;          /* 1 .. 3 */
    int64_t shape[3];
    char dtype[8];     /* as the header spells it */
    /* what the shape says alone: 0 when it does not say (a 2-D "input") */
    int tokens, samples;
    int64_t rows;      /* samples * tokens: every dimension but the width */
    int64_t width;     /* d_model of hidden states; 0 for token ids */
} cic_input_shape;

/* The block input tensor of the open file f (its path for messages), its
 * dtype and shape checked against the forms above. 0, or -1 with d set
 * (no "input" or "input_ids", a dtype or rank not allowed, a zero or huge
 * dimension: the message names the file, the tensor, its shape and what
 * is allowed). */
int cic_input_shape_of(cic_input_shape *s, const cic_stfile *f, const char *path,
                       cic_diag *d);

/* The same for the file at path (opened and closed here). */
int cic_input_shape_read(cic_input_shape *s, const char *path, cic_diag *d);

/* *tokens and *samples of a run on s (the file at path): on entry each is
 * the value given (> 0) or 0 when not given; on return both are set. A
 * value given that disagrees with the shape is an error naming both, each
 * given value named as tok_label / smp_label spell it (e.g. "--tokens" or
 * "[model] tokens ="): "--tokens 16, but the file's "input" is [2, 64,
 * 512] (batch, tokens, d_model): 64 tokens". 0, or -1 with d set (d's file
 * is path). */
int cic_input_shape_fit(int *tokens, int *samples, const cic_input_shape *s, const char *path,
                        const char *tok_label, const char *smp_label, cic_diag *d);

/* The width of hidden states against the model's d_model (token ids pass:
 * their width is the embedding's). 0, or -1 with d set naming the shape. */
int cic_input_shape_check_width(const cic_input_shape *s, const char *path, int d_model,
                                cic_diag *d);

/* Tokens and samples of the input file at path: read and fit in one call
 * (labels "--tokens" and "--samples"); *tokens and *samples as for
 * cic_input_shape_fit. For a caller that needs the batch before any model
 * is built (a DiT condition "c" [batch, d_cond] beside it). 0, or -1 with d
 * set. */
int cic_input_file_dims(int *tokens, int *samples, const char *path, cic_diag *d);

#endif
