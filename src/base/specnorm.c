/* SPDX-License-Identifier: MIT */
/* specnorm.c: proven upper bounds on ||W||_2 (specnorm.h), for weights up
 * to a few thousand on a side: a 1152 x 4608 weight costs one dsyrk of its
 * Gram matrix and a Cholesky factorisation of 1152 x 1152, about 6.6
 * GFLOP (0.12 s on 2 cores); and the Gram matrix of one side kept to bound
 * the weight under many column or row scalings.
 *
 * W = 2^e (D + E): D the double images of the entries scaled so the
 * largest is in [1, 2], E what the rounding to double left (zero for
 * float32 and double weights, bar underflow). ||W||_2 <= 2^e (||D||_2 +
 * ||E||_F). ||D||_2^2 is the largest eigenvalue of the Gram matrix M (the
 * smaller of D^T D and D D^T); its computed image S (dsyrk, one triangle
 * mirrored, so exactly symmetric) has its largest eigenvalue certified by
 * a shifted Cholesky factorisation (specnorm_cert.c), or, where no shift
 * is certified, is squared m times, T_{j+1} = fl(T_j^2)
 * scaled by a power of two, and ||T_m||_2 <= ||T_m||_F unwinds through
 * ||T_j||_2^2 <= ||T_{j+1}||_2 + (the rounding of T_j^2 in the Frobenius
 * norm). Every rounding of dsyrk is bounded independently of its summation
 * order (gamma_k), every scalar step is rounded up by up(); docs/design.md
 * section 10, "Spectral norm bounds", has the derivation. Nothing here
 * relies on a rounding mode: OpenBLAS and the scalar code run in
 * round-to-nearest. */
#include "specnorm.h"

#include "base.h"
#include "specnorm_int.h"
#include "par.h"
#include "sha256.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

/* v 2^e: ldexp's value (C's scalbn: exact, or correctly rounded where the
 * result is subnormal), through a product by 2^e where 2^e is a normal
 * double, which is the same correctly rounded value and some ten times
 * cheaper. */
static double pow2_mul(double v, int e, double p)
{
    return e >= -1022 && e <= 1023 ? v * p : ldexp(v, e);
}

/* x 2^e rounded up; x >= 0 is at most 2^64 here (a bound of D's norm). */
static double scale_up(double x, long e)
{
    double r;
    if (x == 0 || isinf(x))
        return x;
    if (e > 2000)
        return INFINITY;
    if (e < -2000)
        return 0x1p-1074; /* x 2^e < 2^-1900 */
    r = ldexp(x, (int)e);
    /* below DBL_MIN ldexp rounds to a subnormal: less than one of its
     * units away */
    return r < DBL_MIN ? nextafter(r, INFINITY) : r;
}

/* ---- the double image of W ---- */

typedef struct {
    double *d;      /* rows x cols, row-major: W = 2^e (D + E) */
    size_t rows, cols;
    long e;
    size_t inexact; /* entries with E != 0: each |E_ij| <= 2^-53 |D_ij| + 2^-1074 */
    bool nonfinite; /* a NaN or infinite entry: no bound */
    bool zero;      /* every entry zero */
} image;

/* D = 2^-e buf in place, e so that the largest |entry| is in [1, 2); buf
 * holds the values exactly (float32 or double). */
static void image_scale_real(image *im)
{
    size_t n = im->rows * im->cols, i;
    double mx = 0;
    int ex;
    for (i = 0; i < n; i++) {
        if (!isfinite(im->d[i])) {
            im->nonfinite = true;
            return;
        }
        mx = fmax(mx, fabs(im->d[i]));
    }
    if (mx == 0) {
        im->zero = true;
        return;
    }
    frexp(mx, &ex); /* mx in [2^(ex-1), 2^ex) */
    im->e = ex - 1;
    {
        double down = ldexp(1.0, -(ex - 1)), back = ldexp(1.0, ex - 1);
        for (i = 0; i < n; i++) {
            double v = im->d[i], s = pow2_mul(v, -(ex - 1), down);
            /* scaling down can push a double below DBL_MIN: rounded there */
            if (pow2_mul(s, ex - 1, back) != v)
                im->inexact++;
            im->d[i] = s;
        }
    }
}

static int image_alloc(image *im, size_t rows, size_t cols)
{
    memset(im, 0, sizeof *im);
    im->rows = rows;
    im->cols = cols;
    /* cic_calloc checks n * 8; n = SIZE_MAX (rows * cols overflows) fails */
    im->d = cic_calloc(rows && cols ? cic_mul_size(rows, cols) : 1, sizeof *im->d);
    return im->d ? 0 : -1;
}

/* The image of float32 values (exact in double), scaled: 0, or -1 when
 * memory runs out. */
static int image_f32(image *im, const float *w, size_t rows, size_t cols)
{
    size_t i;
    if (image_alloc(im, rows, cols) < 0)
        return -1;
    for (i = 0; i < rows * cols; i++)
        im->d[i] = w[i];
    image_scale_real(im);
    return 0;
}

typedef struct {
    const mpfr_t *w;
    double *d;
    long shift;
    size_t inexact[CIC_PAR_MAX];
} mp_conv;

/* D_ij: the value rounded to 53 bits (|error| <= 2^-53 |d|, d in [0.5,
 * 1)), scaled by 2^(ex - shift) <= 2 (exact unless below DBL_MIN, where
 * ldexp rounds: at most 2^-1075 more). Exact when the value has at most
 * 53 significant bits and its image is normal. */
static void mp_conv_range(void *ctx, size_t lo, size_t hi, int t)
{
    mp_conv *c = ctx;
    size_t i, inexact = 0;
    for (i = lo; i < hi; i++) {
        long ex, sh;
        double m;
        if (mpfr_zero_p(c->w[i])) {
            c->d[i] = 0;
            continue;
        }
        m = mpfr_get_d_2exp(&ex, c->w[i], MPFR_RNDN);
        sh = ex - c->shift;
        c->d[i] = sh < -1100 ? 0 : ldexp(m, (int)sh);
        if (mpfr_min_prec(c->w[i]) > 53 || sh < -1021)
            inexact++;
    }
    c->inexact[t] = inexact;
}

static int image_mp(image *im, const mpfr_t *w, size_t rows, size_t cols, int threads)
{
    size_t n = rows * cols, i;
    mpfr_exp_t emax = 0;
    mp_conv c = {.w = w};
    int t;
    if (image_alloc(im, rows, cols) < 0)
        return -1;
    im->zero = true;
    for (i = 0; i < n; i++) {
        if (!mpfr_number_p(w[i])) {
            im->nonfinite = true;
            return 0;
        }
        if (!mpfr_zero_p(w[i]) && (im->zero || mpfr_get_exp(w[i]) > emax)) {
            emax = mpfr_get_exp(w[i]);
            im->zero = false;
        }
    }
    if (im->zero)
        return 0;
    /* the largest |value| is in [2^(emax-1), 2^emax) */
    im->e = c.shift = (long)emax - 1;
    c.d = im->d;
    cic_par_ranges(n, threads, mp_conv_range, &c);
    for (t = 0; t < CIC_PAR_MAX; t++)
        im->inexact += c.inexact[t];
    return 0;
}

/* ---- the bounds of ||D||_2 ---- */

/* Copy the upper triangle of the n x n a to the lower: exactly symmetric. */
static void mirror(double *a, size_t n)
{
    size_t i, j;
    for (i = 0; i < n; i++)
        for (j = i + 1; j < n; j++)
            a[j * n + i] = a[i * n + j];
}

/* a = 2^-s a with s = ilogb of its largest |entry| (in [1, 2) after); an
 * entry pushed below DBL_MIN is rounded (2^-1075 each: TINY covers their
 * Frobenius norm). a is not all zero. */
static int normalise(double *a, size_t nn)
{
    double mx = 0;
    size_t i;
    int s;
    for (i = 0; i < nn; i++)
        mx = fmax(mx, fabs(a[i]));
    s = ilogb(mx);
    if (s != 0) {
        double p = ldexp(1.0, -s);
        for (i = 0; i < nn; i++)
            a[i] = pow2_mul(a[i], -s, p);
    }
    return s;
}

/* sqrt(||D||_1 ||D||_inf): column and row sums of |D_ij| (exact values),
 * each bounded by grow. */
static int rowcol_bound(double *rb, const image *im)
{
    double *col = cic_calloc(im->cols, sizeof *col), c1 = 0, cinf = 0;
    size_t i, j;
    if (!col)
        return -1;
    for (i = 0; i < im->rows; i++) {
        const double *r = im->d + i * im->cols;
        double s = 0;
        for (j = 0; j < im->cols; j++) {
            s += fabs(r[j]);
            col[j] += fabs(r[j]);
        }
        cinf = fmax(cinf, grow(s, im->cols));
    }
    for (j = 0; j < im->cols; j++)
        c1 = fmax(c1, grow(col[j], im->rows));
    free(col);
    *rb = sqrt_up(up(c1 * cinf));
    return 0;
}

/* T_{j+1} = 2^-s[j+1] fl(T_j^2) for j < levels in a (b scratch), r[j+1]
 * the Frobenius bound of the rounding of T_j^2: gamma_n ||T_j||_F^2 +
 * TINY, gamma_n <= n 2^-52 (n u <= 1/2). Leaves T_levels in a. */
static double **square_levels(double **a, double **b, size_t n, int levels, int *s, double *r)
{
    int j;
    for (j = 0; j < levels; j++) {
        double fj = frob2_up(*a, n * n), *t;
        /* T_j is symmetric: T_j^T T_j = T_j^2 */
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)n, (int)n, 1.0, *a, (int)n, 0.0,
                    *b, (int)n);
        mirror(*b, n);
        r[j + 1] = up(up((double)n * 0x1p-52 * fj) + TINY);
        s[j + 1] = normalise(*b, n * n);
        t = *a;
        *a = *b;
        *b = t;
    }
    return a;
}

/* S (n x n) = fl of the Gram matrix of im's columns (cols: D^T D, inner
 * dimension the rows) or rows (D D^T), one triangle by dsyrk, mirrored so
 * that it is exactly symmetric (step 2 bounds its rounding). */
static void image_gram(double *S, const image *im, bool cols)
{
    size_t n = cols ? im->cols : im->rows, k = cols ? im->rows : im->cols;
    cblas_dsyrk(CblasRowMajor, CblasUpper, cols ? CblasTrans : CblasNoTrans, (int)n, (int)k, 1.0,
                im->d, (int)im->cols, 0.0, S, (int)n);
    mirror(S, n);
}

/* Up to this side the squarings also run beside a certified bound (they
 * cost little there, and on a Gram matrix of rank one or two they are
 * tighter than the certificate's margin). */
#define SQUARE_TOO 128

/* *x >= sqrt(2^s0 (lambda_max(T_0) + TINY) + r0) for the normalised T_0
 * in *a (b: scratch; both n x n): with levels < 0 by the certificate
 * (specnorm_cert.c), or CIC_SPECNORM_LEVELS squarings when it fails (the
 * smaller of both up to SQUARE_TOO); with levels >= 0 by that many
 * squarings. 0, or -1 out of memory. */
static int top_bound(double *x, double **a, double **b, size_t n, int s0, double r0, int levels)
{
    double r[CIC_SPECNORM_MAX_LEVELS + 1], lam = INFINITY, cert = INFINITY;
    int s[CIC_SPECNORM_MAX_LEVELS + 1], j;
    s[0] = s0;
    r[0] = r0;
    if (levels < 0) {
        if (_cic_sn_lmax_cert(&lam, *a, n) < 0)
            return -1;
        if (lam < INFINITY)
            cert = sqrt_up(up(up(ldexp(up(lam + TINY), s0)) + r0));
        if (cert < INFINITY && n > SQUARE_TOO) {
            *x = cert;
            return 0;
        }
        levels = CIC_SPECNORM_LEVELS;
    }
    square_levels(a, b, n, levels, s, r);
    /* ||T_m||_2 <= ||T_m||_F; then ||T_j||_2 <= sqrt(2^s[j+1] (||T_{j+1}||_2
     * + TINY) + r[j+1]) and ||D||_2 <= sqrt(2^s[0] (||T_0||_2 + TINY) + r[0]) */
    *x = sqrt_up(frob2_up(*a, n * n));
    for (j = levels; j >= 0; j--)
        *x = sqrt_up(up(up(ldexp(up(*x + TINY), s[j])) + r[j]));
    *x = fmin(*x, cert);
    return 0;
}

/* The Gram bound of ||D||_2 (f2 >= ||D||_F^2), D not all zero; levels as
 * top_bound's. */
static int gram_bound(double *gb, const image *im, double f2, int levels)
{
    bool tall = im->rows >= im->cols;
    size_t n = tall ? im->cols : im->rows, k = tall ? im->rows : im->cols;
    double *a, *b, x = INFINITY;
    int rc;
    if (k > DIM_MAX) {
        *gb = INFINITY;
        return 0;
    }
    a = cic_calloc(cic_mul_size(n, n), sizeof *a);
    b = cic_calloc(cic_mul_size(n, n), sizeof *b);
    if (!a || !b) {
        free(a);
        free(b);
        return -1;
    }
    /* S = fl(M), M = D^T D (tall) or D D^T: |S - M| <= gamma_k |D|^T |D|
     * + 2 k 2^-1074 elementwise, || |D|^T |D| ||_F <= ||D||_F^2 */
    image_gram(a, im, tall);
    {
        double r0 = up(up((double)k * 0x1p-52 * f2) + TINY);
        int s0 = normalise(a, n * n);
        rc = top_bound(&x, &a, &b, n, s0, r0, levels);
    }
    free(a);
    free(b);
    *gb = x;
    return rc;
}

/* Both bounds of ||W||_2: each of ||D||_2 plus ||E||_F <= 2^-53 ||D||_F +
 * TINY (when any entry was rounded), times 2^e rounded up. */
static int image_bounds(double *gram, double *rowcol, const image *im, int levels)
{
    double f2, eb, gb, rb;
    CIC_ASSERT(levels >= -1 && levels <= CIC_SPECNORM_MAX_LEVELS);
    if (im->nonfinite) {
        *gram = *rowcol = INFINITY;
        return 0;
    }
    if (im->zero || im->rows == 0 || im->cols == 0) {
        *gram = *rowcol = 0;
        return 0;
    }
    f2 = frob2_up(im->d, im->rows * im->cols);
    eb = im->inexact ? up(up(0x1p-53 * sqrt_up(f2)) + TINY) : 0;
    if (rowcol_bound(&rb, im) < 0 || gram_bound(&gb, im, f2, levels) < 0)
        return -1;
    *gram = scale_up(up(gb + eb), im->e);
    *rowcol = scale_up(up(rb + eb), im->e);
    return 0;
}

/* ---- one weight, many scalings ---- */

struct cic_specnorm_gram {
    size_t n, k; /* the side scaled, the other */
    long e;      /* W = 2^e D_W, every image exact */
    double *S;   /* fl(D_W^T D_W) (columns) or fl(D_W D_W^T), mirrored */
    double *c;   /* per index of the side: >= its sum of D_W^2 */
};

void cic_specnorm_gram_destroy(cic_specnorm_gram *g)
{
    if (!g)
        return;
    free(g->S);
    free(g->c);
    free(g);
}

cic_specnorm_gram *cic_specnorm_gram_f(const float *w, size_t rows, size_t cols,
                                       bool cols_side)
{
    size_t n = cols_side ? cols : rows, k = cols_side ? rows : cols, i, j;
    cic_specnorm_gram *g = NULL;
    image im;
    if (!rows || !cols || n > k || k > DIM_MAX || image_f32(&im, w, rows, cols) < 0)
        return NULL;
    if (im.nonfinite || im.zero || im.inexact || !(g = cic_calloc(1, sizeof *g)) ||
        !(g->S = cic_calloc(cic_mul_size(n, n), sizeof *g->S)) ||
        !(g->c = cic_calloc(n, sizeof *g->c))) {
        cic_specnorm_gram_destroy(g);
        free(im.d);
        return NULL;
    }
    g->n = n;
    g->k = k;
    g->e = im.e;
    /* as step 2: |S - G| <= gamma_k |D_W|^T |D_W| + 2 k eta elementwise */
    image_gram(g->S, &im, cols_side);
    for (i = 0; i < rows; i++)
        for (j = 0; j < cols; j++)
            g->c[cols_side ? j : i] += im.d[i * cols + j] * im.d[i * cols + j];
    for (i = 0; i < n; i++)
        g->c[i] = grow(g->c[i], k);
    free(im.d);
    return g;
}

/* ds = d 2^-ed rounded up, ed so that the largest is in [1, 2). False
 * when d holds a NaN, an infinity or a negative value; *zero when it is
 * all zero. */
static bool scale_d(double *ds, int *ed, bool *zero, const double *d, size_t n)
{
    double mx = 0, down, back;
    size_t i;
    for (i = 0; i < n; i++) {
        if (!(d[i] >= 0) || !isfinite(d[i]))
            return false;
        mx = fmax(mx, d[i]);
    }
    *zero = mx == 0;
    if (*zero)
        return true;
    *ed = ilogb(mx);
    down = ldexp(1.0, -*ed);
    back = ldexp(1.0, *ed);
    for (i = 0; i < n; i++) {
        ds[i] = pow2_mul(d[i], -*ed, down);
        if (pow2_mul(ds[i], *ed, back) < d[i])
            ds[i] = nextafter(ds[i], INFINITY);
    }
    return true;
}

int cic_specnorm_gram_scaled(double *bound, const cic_specnorm_gram *g, const double *d)
{
    size_t n = g->n, i, j;
    double *ds = cic_calloc(n, sizeof *ds), *a = cic_calloc(cic_mul_size(n, n), sizeof *a);
    double *b = cic_calloc(cic_mul_size(n, n), sizeof *b), f2s = 0, r0, x = INFINITY, mx = 0;
    int ed = 0, rc = -1;
    bool zero;
    *bound = INFINITY;
    if (!ds || !a || !b)
        goto done;
    rc = 0;
    if (!scale_d(ds, &ed, &zero, d, n))
        goto done;
    if (zero) {
        *bound = 0;
        goto done;
    }
    /* ||D_W diag(ds)||_F^2 = sum_j ds_j^2 c_j, bounded above */
    for (j = 0; j < n; j++)
        f2s += up(up(ds[j] * ds[j]) * g->c[j]);
    f2s = grow(f2s, n);
    /* S' = fl(fl(ds_i S_ij) ds_j) on one triangle, mirrored: within 2.0001
     * u |S'_ij| + 3 eta of ds_i S_ij ds_j */
    for (i = 0; i < n; i++)
        for (j = i; j < n; j++) {
            a[i * n + j] = ds[i] * g->S[i * n + j] * ds[j];
            mx = fmax(mx, fabs(a[i * n + j]));
        }
    mirror(a, n);
    r0 = up(up(up((double)g->k * 0x1p-52 * f2s) + up(0x1p-51 * sqrt_up(frob2_up(a, n * n)))) +
            TINY);
    if (mx == 0) { /* lambda_max(S') = 0 */
        *bound = scale_up(sqrt_up(r0), g->e + ed);
        goto done;
    }
    rc = top_bound(&x, &a, &b, n, normalise(a, n * n), r0, CIC_SPECNORM_CERT);
    if (rc == 0)
        *bound = scale_up(x, g->e + ed);
done:
    free(ds);
    free(a);
    free(b);
    return rc;
}

/* ---- the cache ---- */

typedef struct {
    unsigned char key[32];
    double bound;
} cache_entry;

struct cic_specnorm_cache {
    pthread_mutex_t mu;
    cache_entry *e;
    size_t n, cap;
    uint64_t hits, misses;
};

cic_specnorm_cache *cic_specnorm_cache_create(void)
{
    cic_specnorm_cache *c = cic_calloc(1, sizeof *c);
    if (c && pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return NULL;
    }
    return c;
}

void cic_specnorm_cache_destroy(cic_specnorm_cache *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->mu);
    free(c->e);
    free(c);
}

/* The entry of key, or NULL; c->mu held. */
static cache_entry *cache_find(cic_specnorm_cache *c, const unsigned char key[32])
{
    size_t i;
    for (i = 0; i < c->n; i++)
        if (memcmp(c->e[i].key, key, 32) == 0)
            return &c->e[i];
    return NULL;
}

bool cic_specnorm_cache_lookup(cic_specnorm_cache *c, const unsigned char key[32],
                               double *bound)
{
    cache_entry *e;
    pthread_mutex_lock(&c->mu);
    e = cache_find(c, key);
    if (e) {
        *bound = e->bound;
        c->hits++;
    } else {
        c->misses++;
    }
    pthread_mutex_unlock(&c->mu);
    return e != NULL;
}

int cic_specnorm_cache_insert(cic_specnorm_cache *c, const unsigned char key[32], double bound)
{
    int rc = 0;
    pthread_mutex_lock(&c->mu);
    if (!cache_find(c, key)) {
        if (c->n == c->cap) {
            size_t cap = c->cap ? 2 * c->cap : 16;
            cache_entry *e = realloc(c->e, cic_mul_size(cap, sizeof *e));
            if (!e) {
                rc = -1;
                goto done;
            }
            c->e = e;
            c->cap = cap;
        }
        memcpy(c->e[c->n].key, key, 32);
        c->e[c->n++].bound = bound;
    }
done:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void cic_specnorm_cache_stats(cic_specnorm_cache *c, uint64_t *hits, uint64_t *misses,
                              size_t *entries)
{
    pthread_mutex_lock(&c->mu);
    *hits = c->hits;
    *misses = c->misses;
    *entries = c->n;
    pthread_mutex_unlock(&c->mu);
}

/* The key holds what the bound is a function of: the shape, the scale, how
 * many entries were rounded, the method and the images' bits. The images'
 * bytes are hashed in chunks of KEY_CHUNK on the BLAS's threads, then the
 * chunks' digests in order: the same key for any thread count, a quarter
 * of the time of one pass on two cores (SHA-256 runs at about 300 MB/s
 * here; a 6912 x 1152 weight's images are 64 MB). */
#define KEY_CHUNK ((size_t)1 << 20)

typedef struct {
    const unsigned char *p;
    size_t n;
    unsigned char (*dig)[32];
} key_job;

static void key_chunks(void *ctx, size_t lo, size_t hi, int t)
{
    const key_job *J = ctx;
    size_t c;
    (void)t;
    for (c = lo; c < hi; c++) {
        size_t off = c * KEY_CHUNK, len = J->n - off < KEY_CHUNK ? J->n - off : KEY_CHUNK;
        cic_sha256 h;
        cic_sha256_init(&h);
        cic_sha256_update(&h, J->p + off, len);
        cic_sha256_final(&h, J->dig[c]);
    }
}

/* 0, or -1 out of memory (no key). */
static int image_key(unsigned char key[32], const image *im)
{
    static const char tag[] = "cicheck specnorm 3"; /* 3: the certificate, chunked key */
    uint64_t head[5] = {im->rows, im->cols, (uint64_t)im->e, im->inexact, CIC_SPECNORM_LEVELS};
    size_t n = im->rows * im->cols * sizeof *im->d, nc = (n + KEY_CHUNK - 1) / KEY_CHUNK;
    key_job J = {(const unsigned char *)im->d, n, cic_calloc(nc ? nc : 1, 32)};
    int nt = openblas_get_num_threads();
    cic_sha256 h;
    if (!J.dig)
        return -1;
    cic_par_ranges(nc, nt < 1 ? 1 : nt, key_chunks, &J);
    cic_sha256_init(&h);
    cic_sha256_update(&h, tag, sizeof tag);
    cic_sha256_update(&h, head, sizeof head);
    cic_sha256_update(&h, J.dig, nc * 32);
    cic_sha256_final(&h, key);
    free(J.dig);
    return 0;
}

/* The bound of an image through the cache; frees the image. */
static int image_finish(double *bound, image *im, cic_specnorm_cache *cache)
{
    unsigned char key[32];
    double g, r;
    int rc = 0;
    *bound = INFINITY;
    if (im->nonfinite || im->zero) {
        *bound = im->nonfinite ? INFINITY : 0;
        goto done;
    }
    if (cache && image_key(key, im) < 0)
        cache = NULL; /* no key: the bound, uncached */
    if (cache && cic_specnorm_cache_lookup(cache, key, bound))
        goto done;
    if (image_bounds(&g, &r, im, CIC_SPECNORM_CERT) < 0) {
        rc = -1;
        goto done;
    }
    *bound = fmin(g, r);
    /* a bound not kept is still a bound: only the cache lost */
    if (cache)
        (void)cic_specnorm_cache_insert(cache, key, *bound);
done:
    free(im->d);
    return rc;
}

int cic_specnorm_mp(double *bound, const mpfr_t *w, size_t rows, size_t cols, int threads,
                    cic_specnorm_cache *cache)
{
    image im;
    if (image_mp(&im, w, rows, cols, threads) < 0) {
        *bound = INFINITY;
        return -1;
    }
    return image_finish(bound, &im, cache);
}

int cic_specnorm_f(double *bound, const float *w, size_t rows, size_t cols,
                   cic_specnorm_cache *cache)
{
    image im;
    if (image_f32(&im, w, rows, cols) < 0) {
        *bound = INFINITY;
        return -1;
    }
    return image_finish(bound, &im, cache);
}

int cic_specnorm_d(double *bound, const double *w, size_t rows, size_t cols,
                   cic_specnorm_cache *cache)
{
    image im;
    if (image_alloc(&im, rows, cols) < 0) {
        *bound = INFINITY;
        return -1;
    }
    memcpy(im.d, w, rows * cols * sizeof *w);
    image_scale_real(&im);
    return image_finish(bound, &im, cache);
}

int cic_specnorm_d_detail(double *gram_bound, double *rowcol_bound, const double *w,
                          size_t rows, size_t cols, int levels)
{
    image im;
    int rc;
    *gram_bound = *rowcol_bound = INFINITY;
    if (image_alloc(&im, rows, cols) < 0)
        return -1;
    memcpy(im.d, w, rows * cols * sizeof *w);
    image_scale_real(&im);
    rc = image_bounds(gram_bound, rowcol_bound, &im, levels);
    free(im.d);
    return rc;
}
