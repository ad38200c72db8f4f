/* SPDX-License-Identifier: MIT */
/* bench.c: cicheck-bench, the performance benchmark (not a test: it checks
 * nothing and always exits 0 unless it cannot run). One run prints:
 *
 *   (1) the MPFR dot kernel in its real use, the engine's linear op
 *       (cic_mp_linear_rows: y[i,j] = b[j] + sum_p x[i,p] w[j,p], each
 *       correctly rounded), at 64 and at 128 bits, against a plain
 *       mpfr_fma accumulation over the same values: ns per multiply-add and
 *       the ratio (target <= 0.75; at 64 bits with f32 weights, below 3 ns
 *       per multiply-add); then the op as the truth runs it on the
 *       engine's threads (weights packed from float32, 512 rows, the
 *       DiT-XL/2 block's 1152 x 1152 and 1152 x 4608), the row kernel and
 *       the exact dgemm slices (base/mpslice.h) interleaved;
 *   (2) the f32 engine (OpenBLAS) on a DiT-XL/2 block: counted FLOPs / time,
 *       against bare cblas_sgemm on the block's matmul shapes (target ratio
 *       >= 0.7);
 *   (3) the speed-up from 1 to 2 threads: MPFR engine (the model's context, cic_rt)
 *       on a mid-size dit block (target >= 1.8), f32 engine and bare sgemm
 *       (openblas_set_num_threads) on the DiT-XL/2 block;
 *   (5) the truth of cases/dit-xl2.toml, before and proven (bench_truth.c;
 *       run from the source root);
 *   (7) the growth of the truth's bound with depth, in bits per block, for
 *       the elementwise and the norm-wise bound (bench_depth.c).
 *
 * Every timing is the best (minimum wall time) of --reps runs (default 3)
 * after one untimed warm-up; the two sides of a ratio are run interleaved
 * (A B A B ...) so slow drift of the machine's load hits both alike.
 *
 * Also: cicheck-bench --time LOG CMD ARG... runs CMD with stdout and stderr
 * to LOG and prints its wall time and peak RSS (wait4 ru_maxrss): part (4),
 * driven by bench/run.sh.
 *
 * Usage: cicheck-bench [--reps N] [--quick] [--part LIST]
 *        cicheck-bench --time LOG CMD [ARG...]
 * --part LIST runs only the parts named by the digits of LIST (1, 2, 3, 5,
 * 7: "23" is the f32 engine's parts; (3) then also times the MPFR engine);
 * without it, 1, 2, 3 and 5. bench/run.sh runs (7) on its own (--part 7),
 * and parts (4), (6), (8) and (9) are its own. */
#include "bench_int.h"

#include "base/mpslice.h"
#include "base/blasenv.h"
#include "base/mpvec.h"
#include "engine/engine.h"
#include "model/model.h"

#include <cblas.h>
#include <fcntl.h>
#include <math.h>
#include <mpfr.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PREC 128



/* ---- models ---- */

static cic_model_cfg dit_cfg(int d, int heads, int tokens, int samples, int layers,
                             int d_cond, int d_out)
{
    cic_model_cfg c;
    memset(&c, 0, sizeof c);
    c.block = CIC_BLOCK_DIT;
    c.d_model = d;
    c.heads = heads;
    c.mlp_ratio = 4;
    c.d_mlp = 4 * d;
    c.tokens = tokens;
    c.samples = samples;
    c.layers = layers;
    c.eps = 1e-6;
    c.causal = false;
    c.act = CIC_ACT_GELU_TANH;
    c.d_out = d_out;
    c.d_cond = d_cond;
    c.final_layer = true;
    c.seed = 1;
    c.dist = CIC_DIST_NORMAL;
    c.std = 0.02;
    c.outlier_channels = 0;
    c.outlier_scale = 1.0;
    return c;
}

static cic_model *make_model(const cic_model_cfg *c)
{
    cic_model *m = cic_model_create(c, CIC_READOUT_HEAD);
    if (!m) {
        fprintf(stderr, "cicheck-bench: cic_model_create failed\n");
        exit(2);
    }
    return m;
}

/* ---- (2) f32 engine and bare sgemm on the block's matmul shapes ---- */

typedef struct {
    const cic_model_cfg *c;
    const float *cond, *h, *wada, *wfada, *wqkv, *wo, *w1, *w2, *wl; /* the model's */
    float *mod, *fmod, *qkv, *sc, *att, *o, *u, *y, *out;           /* scratch */
} bare_bufs;

static float *rand_buf(size_t n, double sd)
{
    float *p = cic_bench_xmalloc(n * sizeof *p);
    size_t i;
    for (i = 0; i < n; i++)
        p[i] = cic_bench_normal_f(sd);
    return p;
}

static const float *weight(const cic_model *m, const char *name)
{
    int id = cic_model_tensor_find(m, name);
    if (id < 0 || !m->t[id].f32) {
        fprintf(stderr, "cicheck-bench: model has no tensor %s\n", name);
        exit(2);
    }
    return m->t[id].f32;
}

/* Bare sgemm operands: the model's own input, conditioning and weights, and
 * random activations where the block computes them (qkv, scores, MLP). */
static void bare_init(bare_bufs *B, const cic_model *m)
{
    const cic_model_cfg *c = &m->cfg;
    size_t R = (size_t)c->tokens * c->samples, d = c->d_model, f = c->d_mlp,
           N = c->tokens;
    B->c = c;
    B->cond = m->t[m->cond].f32;
    B->h = m->t[m->input].f32;
    B->wada = weight(m, "blocks.0.adaLN_modulation.1.weight");
    B->wfada = weight(m, "final_layer.adaLN_modulation.1.weight");
    B->wqkv = weight(m, "blocks.0.attn.qkv.weight");
    B->wo = weight(m, "blocks.0.attn.proj.weight");
    B->w1 = weight(m, "blocks.0.mlp.fc1.weight");
    B->w2 = weight(m, "blocks.0.mlp.fc2.weight");
    B->wl = weight(m, "final_layer.linear.weight");
    B->mod = rand_buf((size_t)c->samples * 6 * d, 0);
    B->fmod = rand_buf((size_t)c->samples * 2 * d, 0);
    B->qkv = rand_buf(R * 3 * d, 1.0);
    B->sc = rand_buf(N * N, 0.01);
    B->att = rand_buf(R * d, 0);
    B->o = rand_buf(R * d, 0);
    B->u = rand_buf(R * f, 0.1);
    B->y = rand_buf(R * d, 0);
    B->out = rand_buf(R * (size_t)c->d_out, 0);
}

static void bare_free(bare_bufs *B)
{
    free(B->mod); free(B->fmod); free(B->qkv); free(B->sc); free(B->att); free(B->o);
    free(B->u); free(B->y); free(B->out);
}

static double g_bare_flops;

/* C[M,N] = A[M,K] op(B); op(B) = B^T with B [N,K] when tb (a linear's W). */
static void gemm(const float *a, int lda, const float *b, int ldb, float *cc, int ldc,
                 int M, int N, int K, int tb)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K,
                1.0f, a, lda, b, ldb, 0.0f, cc, ldc);
    g_bare_flops += 2.0 * M * N * K;
}

/* The matmuls of one run of the block in the engine's order, with the
 * engine's layouts (row-major activations, W [out, in] transposed, q k v
 * column views of the qkv rows). Returns the time. */
static double bare_block(bare_bufs *B)
{
    const cic_model_cfg *c = B->c;
    int S = c->samples, N = c->tokens, R = S * N, d = c->d_model, f = c->d_mlp,
        dc = c->d_cond, H = c->heads, dh = d / H, s, hh;
    double t0 = cic_bench_now();
    g_bare_flops = 0;
    gemm(B->cond, dc, B->wada, dc, B->mod, 6 * d, S, 6 * d, dc, 1);     /* adaLN */
    gemm(B->h, d, B->wqkv, d, B->qkv, 3 * d, R, 3 * d, d, 1);           /* qkv */
    for (s = 0; s < S; s++)
        for (hh = 0; hh < H; hh++) {
            const float *q = B->qkv + (size_t)s * N * 3 * d + hh * dh;
            gemm(q, 3 * d, q + d, 3 * d, B->sc, N, N, N, dh, 1);        /* q k^T */
            gemm(B->sc, N, q + 2 * d, 3 * d, B->att + (size_t)s * N * d + hh * dh, d,
                 N, dh, N, 0);                                          /* p v */
        }
    gemm(B->att, d, B->wo, d, B->o, d, R, d, d, 1);                     /* proj */
    gemm(B->h, d, B->w1, d, B->u, f, R, f, d, 1);                       /* fc1 */
    gemm(B->u, f, B->w2, f, B->y, d, R, d, f, 1);                       /* fc2 */
    if (c->final_layer) {
        gemm(B->cond, dc, B->wfada, dc, B->fmod, 2 * d, S, 2 * d, dc, 1); /* final adaLN */
        gemm(B->h, d, B->wl, d, B->out, c->d_out, R, c->d_out, d, 1);     /* final */
    }
    return cic_bench_now() - t0;
}

/* CPU time of the process (all its threads, OpenBLAS's workers included). */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double g_f32_cpu; /* CPU time of the last f32_run */

static double f32_run(const cic_model *m, float *out, double *flops)
{
    cic_flop_count fc;
    cic_run_opts o;
    double t0, c0, t;
    memset(&fc, 0, sizeof fc);
    memset(&o, 0, sizeof o);
    o.flops = &fc;
    c0 = cpu_now();
    t0 = cic_bench_now();
    if (cic_engine_f32_run(out, m, CIC_MATMUL_OPENBLAS, &o) < 0) {
        fprintf(stderr, "cicheck-bench: f32 engine out of memory\n");
        exit(2);
    }
    t = cic_bench_now() - t0;
    g_f32_cpu = cpu_now() - c0;
    if (flops)
        *flops = cic_flop_total(&fc);
    return t;
}

/* Best engine and bare times at the current OpenBLAS thread count. */
static void f32_pair(const cic_model *m, float *out, bare_bufs *B, double *te, double *tb,
                     double *fe, double *fb)
{
    int r;
    *te = *tb = 1e300;
    f32_run(m, out, fe);  /* warm-up */
    bare_block(B);
    for (r = 0; r < cic_bench_reps; r++) {
        double a = f32_run(m, out, fe), b = bare_block(B);
        if (a < *te)
            *te = a;
        if (b < *tb)
            *tb = b;
    }
    *fb = g_bare_flops;
}

/* ---- (3) MPFR engine threads ---- */

static double mpfr_run(const cic_model *m, mpfr_t *out, double *flops)
{
    cic_flop_count fc;
    cic_run_opts o;
    double t0, t;
    memset(&fc, 0, sizeof fc);
    memset(&o, 0, sizeof o);
    o.flops = &fc;
    t0 = cic_bench_now();
    if (cic_engine_mpfr_run(out, m, PREC, false, &o) < 0) {
        fprintf(stderr, "cicheck-bench: MPFR engine out of memory\n");
        exit(2);
    }
    t = cic_bench_now() - t0;
    if (flops)
        *flops = cic_flop_total(&fc);
    return t;
}

/* ---- (4) helper: time a child process ---- */

static int time_child(const char *log, char **argv)
{
    struct rusage ru;
    int status = 0, fd;
    double t0 = cic_bench_now(), t;
    pid_t pid = fork();
    if (pid < 0) {
        perror("cicheck-bench: fork");
        return 2;
    }
    if (pid == 0) {
        fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execvp(argv[0], argv);
        perror("cicheck-bench: exec");
        _exit(127);
    }
    memset(&ru, 0, sizeof ru);
    if (wait4(pid, &status, 0, &ru) < 0) {
        perror("cicheck-bench: wait4");
        return 2;
    }
    t = cic_bench_now() - t0;
    printf("wall %.2f s, peak RSS %.1f MiB (ru_maxrss %ld KiB), user %.2f s, sys %.2f s, exit %d\n",
           t, ru.ru_maxrss / 1024.0, ru.ru_maxrss,
           ru.ru_utime.tv_sec + 1e-6 * ru.ru_utime.tv_usec,
           ru.ru_stime.tv_sec + 1e-6 * ru.ru_stime.tv_usec,
           WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    return 0;
}

/* Part (2): the f32 engine against bare sgemm at the default thread count. */
static void part2(const cic_model *m, float *out, bare_bufs *B)
{
    const cic_model_cfg *c = &m->cfg;
    double te, tb, fe, fb, ratio;
    int R = c->tokens * c->samples, dh = c->d_model / c->heads;
    f32_pair(m, out, B, &te, &tb, &fe, &fb);
    ratio = (fe / te) / (fb / tb);
    printf("  OpenBLAS threads: %d\n", openblas_get_num_threads());
    printf("  f32 engine:  %.4f s, %.4g counted FLOPs (cic_flop_total) -> %7.2f GFLOP/s\n",
           te, fe, 1e-9 * fe / te);
    printf("  bare sgemm:  %.4f s, %.4g matmul FLOPs (2 M N K, %.1f%% of the counted) -> %7.2f GFLOP/s\n",
           tb, fb, 100.0 * fb / fe, 1e-9 * fb / tb);
    printf("  bare shapes (M x N x K, the engine's order): adaLN %dx%dx%d, qkv %dx%dx%d,\n"
           "    attention %d samples x %d heads x (q k^T %dx%dx%d + p v %dx%dx%d), proj %dx%dx%d,\n"
           "    fc1 %dx%dx%d, fc2 %dx%dx%d, final adaLN %dx%dx%d, final %dx%dx%d\n",
           c->samples, 6 * c->d_model, c->d_cond, R, 3 * c->d_model, c->d_model,
           c->samples, c->heads, c->tokens, c->tokens, dh, c->tokens, dh, c->tokens,
           R, c->d_model, c->d_model, R, c->d_mlp, c->d_model, R, c->d_model, c->d_mlp,
           c->samples, 2 * c->d_model, c->d_cond, R, c->d_out, c->d_model);
    printf("  ratio engine / bare = %.3f   (target >= 0.7: %s)\n", ratio,
           ratio >= 0.7 ? "met" : "NOT met");
}

/* A quarter second's pause: an idle OpenBLAS worker spins for a while
 * after a multi-threaded call before it sleeps, and a run timed right after
 * one would share a core with it (pay for the run before). */
static void settle(void)
{
    struct timespec ts = {0, 250000000L};
    nanosleep(&ts, NULL);
}

/* Part (3), f32 side: the engine and bare sgemm at 1 and at 2 OpenBLAS
 * threads, the four interleaved, each after a pause (settle); the thread
 * count is nt0 again after. The
 * engine's CPU time (the least over the runs) shows what the second thread
 * costs whatever the machine's load: about the 1-thread CPU time when the
 * threads only work, more when they spin or wait busily. */
/* Best times at one thread count, over the repetitions. */
typedef struct {
    double engine, bare, cpu;
} f32_best;

/* One timed run of the engine and of bare sgemm at nt OpenBLAS threads,
 * each after a pause, into the best so far. */
static void f32_pair_at(const cic_model *m, float *out, bare_bufs *B, int nt, f32_best *t)
{
    double a, b;
    openblas_set_num_threads(nt);
    settle();
    a = f32_run(m, out, NULL);
    t->cpu = g_f32_cpu < t->cpu ? g_f32_cpu : t->cpu;
    settle();
    b = bare_block(B);
    t->engine = a < t->engine ? a : t->engine;
    t->bare = b < t->bare ? b : t->bare;
}

static void part3_f32(const cic_model *m, float *out, bare_bufs *B, int nt0)
{
    f32_best t1 = {1e300, 1e300, 1e300}, t2 = {1e300, 1e300, 1e300};
    double te1, te2, tb1, tb2, fe = 0, fb, c1, c2;
    int r;
    openblas_set_num_threads(1);
    f32_run(m, out, &fe);
    bare_block(B);
    fb = g_bare_flops;
    openblas_set_num_threads(2);
    f32_run(m, out, NULL);
    bare_block(B);
    for (r = 0; r < cic_bench_reps; r++) {
        f32_pair_at(m, out, B, 1, &t1);
        f32_pair_at(m, out, B, 2, &t2);
    }
    openblas_set_num_threads(nt0);
    te1 = t1.engine, tb1 = t1.bare, c1 = t1.cpu;
    te2 = t2.engine, tb2 = t2.bare, c2 = t2.cpu;
    printf("  f32 engine, same block, openblas_set_num_threads(1) vs (2):\n");
    printf("    1 thread  %.4f s (%7.2f GFLOP/s), 2 threads %.4f s (%7.2f GFLOP/s)"
           " -> speed-up %.2f   (target >= 1.8: %s)\n", te1, 1e-9 * fe / te1, te2,
           1e-9 * fe / te2, te1 / te2, te1 / te2 >= 1.8 ? "met" : "NOT met");
    printf("    CPU time of a run (all threads): 1 thread %.4f s, 2 threads %.4f s (x%.2f)\n", c1,
           c2, c2 / c1);
    printf("  bare sgemm, same shapes:\n");
    printf("    1 thread  %.4f s (%7.2f GFLOP/s), 2 threads %.4f s (%7.2f GFLOP/s)"
           " -> speed-up %.2f\n", tb1, 1e-9 * fb / tb1, tb2, 1e-9 * fb / tb2, tb1 / tb2);
}

/* Parts (2) and (3)'s f32 side on one DiT-XL/2 block (reduced: --quick),
 * those of them asked for. */
static void parts_f32(int quick, bool want2, bool want3, int nt0)
{
    cic_model_cfg c = quick ? dit_cfg(384, 6, 64, 2, 1, 384, 32)
                            : dit_cfg(1152, 16, 256, 2, 1, 1152, 32);
    cic_model *m;
    bare_bufs B;
    float *out;
    double t0;
    printf("\n(2%s) f32 engine (OpenBLAS) and bare cblas_sgemm on a %s block\n",
           want3 ? ", 3" : "", quick ? "reduced DiT" : "DiT-XL/2");
    printf("  d_model %d, heads %d, MLP %d, tokens %d, samples %d, layers %d, d_cond %d,"
           " final layer, d_out %d\n",
           c.d_model, c.heads, c.d_mlp, c.tokens, c.samples, c.layers, c.d_cond, c.d_out);
    t0 = cic_bench_now();
    m = make_model(&c);
    printf("  model construction (not timed below): %.2f s\n", cic_bench_now() - t0);
    out = cic_bench_xmalloc((size_t)c.samples * c.tokens * cic_model_out_cols(m) * sizeof *out);
    bare_init(&B, m);
    if (want2)
        part2(m, out, &B);
    if (want3) {
        printf("\n(3) speed-up from 1 to 2 threads (load average %.2f)\n", cic_bench_loadavg());
        part3_f32(m, out, &B, nt0);
    }
    bare_free(&B);
    free(out);
    cic_model_destroy(m);
}

/* The context of part (3)'s MPFR runs (its model points to it). */
static cic_rt g_rt;

/* n threads for the MPFR engine and for OpenBLAS, then a pause (as before
 * the f32 runs). */
static void mpfr_threads(int n)
{
    g_rt.mpfr_threads = n;
    openblas_set_num_threads(n);
    settle();
}

/* Part (3), MPFR side: the MPFR engine at 1 and at 2 threads. */

static void part3_mpfr(int quick, int nt0)
{
    cic_model_cfg c = quick ? dit_cfg(64, 4, 16, 2, 1, 64, 32)
                            : dit_cfg(256, 4, 64, 2, 1, 256, 32);
    cic_model *m = make_model(&c);
    size_t n = (size_t)c.samples * c.tokens * cic_model_out_cols(m);
    mpfr_t *out = cic_mpvec_create(n, PREC);
    double t1 = 1e300, t2 = 1e300, fl = 0, a;
    int r;
    if (!out) {
        fprintf(stderr, "cicheck-bench: out of memory\n");
        exit(2);
    }
    cic_rt_init(&g_rt, 0);
    m->rt = &g_rt;
    printf("  MPFR engine at %d bits, dit d_model %d, heads %d, MLP %d, tokens %d, samples %d,"
           " layers %d, d_cond %d, final layer, d_out %d:\n",
           PREC, c.d_model, c.heads, c.d_mlp, c.tokens, c.samples, c.layers, c.d_cond,
           c.d_out);
    /* the linear ops' dgemm slices run on OpenBLAS's threads, the rest on
     * the engine's: one thread is one of each */
    mpfr_threads(1);
    mpfr_run(m, out, &fl);
    mpfr_threads(2);
    mpfr_run(m, out, &fl);
    for (r = 0; r < cic_bench_reps; r++) {
        mpfr_threads(1);
        a = mpfr_run(m, out, &fl);
        t1 = a < t1 ? a : t1;
        mpfr_threads(2);
        a = mpfr_run(m, out, &fl);
        t2 = a < t2 ? a : t2;
    }
    g_rt.mpfr_threads = 0;
    openblas_set_num_threads(nt0);
    printf("    engine and OpenBLAS at 1 thread %.3f s, at 2 %.3f s -> speed-up %.2f"
           "   (target >= 1.8: %s)\n", t1, t2, t1 / t2, t1 / t2 >= 1.8 ? "met" : "NOT met");
    printf("    %.4g counted FLOPs: %.1f ns per FLOP-pair (multiply-add) at 1 thread\n", fl,
           1e9 * t1 / (fl / 2));
    cic_mpvec_destroy(out, n);
    cic_model_destroy(m);
}

/* The parts of --part LIST (digits 1, 2, 3, 5, 7 in any order, e.g. "23") as
 * bits 1 << n; 0 when LIST names another. */
static unsigned parse_parts(const char *list)
{
    unsigned bits = 0;
    for (; *list; list++) {
        if (!strchr("12357", *list))
            return 0;
        bits |= 1u << (*list - '0');
    }
    return bits;
}

int main(int argc, char **argv)
{
    int quick = 0, i, nt0;
    unsigned parts = 1u << 1 | 1u << 2 | 1u << 3 | 1u << 5;
    if (argc >= 4 && !strcmp(argv[1], "--time"))
        return time_child(argv[2], argv + 3); /* the child as it runs on its own */
    cic_blas_env_reexec(argv); /* the engines as cicheck runs them (blasenv.h) */
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            cic_bench_reps = atoi(argv[++i]);
            if (cic_bench_reps < 1)
                cic_bench_reps = 1;
        } else if (!strcmp(argv[i], "--quick")) {
            quick = 1;
        } else if (!strcmp(argv[i], "--part") && i + 1 < argc && parse_parts(argv[i + 1])) {
            parts = parse_parts(argv[++i]);
        } else {
            fprintf(stderr, "usage: cicheck-bench [--reps N] [--quick] [--part LIST]\n"
                            "       cicheck-bench --time LOG CMD [ARG...]\n"
                            "  LIST: the parts to run, digits of 1 2 3 5 7 (e.g. 23); default 1235\n");
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    nt0 = openblas_get_num_threads();
    printf("cicheck-bench%s\n", quick ? " (--quick: reduced sizes, not the reference figures)" : "");
    printf("machine: %ld online cores, load average (1 min) %.2f at start\n",
           sysconf(_SC_NPROCESSORS_ONLN), cic_bench_loadavg());
    printf("OpenBLAS: core %s, %d threads by default (%s), config: %s\n",
           openblas_get_corename(), nt0,
           openblas_get_parallel() == 0 ? "sequential build"
           : openblas_get_parallel() == 1 ? "pthreads" : "OpenMP",
           openblas_get_config());
    printf("OpenBLAS idle-thread timeout: 2^%s cycles (OPENBLAS_THREAD_TIMEOUT; blasenv.h)\n",
           getenv("OPENBLAS_THREAD_TIMEOUT") ? getenv("OPENBLAS_THREAD_TIMEOUT")
                                             : "28, the library's default");
    printf("MPFR %s, GMP %s, precision %d bits (part (1): 64 and 128)\n", mpfr_get_version(),
           gmp_version, PREC);
    printf("timing: best (minimum wall time) of %d runs after one warm-up; the two sides\n"
           "of each ratio run interleaved. Other work on the machine makes the numbers noisy.\n",
           cic_bench_reps);
    if (parts & 1u << 1) {
        cic_bench_part1(quick);
        cic_bench_part1_op(quick);
    }
    if (parts & (1u << 2 | 1u << 3))
        parts_f32(quick, parts & 1u << 2, parts & 1u << 3, nt0);
    if (parts & 1u << 3)
        part3_mpfr(quick, nt0);
    if (parts & 1u << 5)
        cic_bench_truth("cases/dit-xl2.toml", quick);
    if (parts & 1u << 7)
        cic_bench_depth("cases/dit-xl2.toml", quick);
    printf("load average (1 min) %.2f at end\n", cic_bench_loadavg());
    mpfr_free_cache();
    return 0;
}
