# SPDX-License-Identifier: MIT
"""npref.hadamard: the Hadamard matrices of the rotations (Sylvester, Paley
bases, regular) and the orthogonal matrix of a randomized fast Hadamard."""

import math

import numpy as np


def sylvester(w):
    """Sylvester Hadamard matrix in natural order, H[i][j] = (-1)^popcount(i & j)."""
    if w <= 0 or w & (w - 1):
        raise ValueError(f"fast Hadamard width {w} is not a power of two")
    h = np.ones((1, 1))
    while h.shape[0] < w:
        h = np.block([[h, h], [h, -h]])
    return h


def is_prime(n):
    return n >= 2 and all(n % k for k in range(2, int(n ** 0.5) + 1))


def paley_base(K):
    """The base H_K of order K of src/xform/hadamard.c for a prime q: Paley I
    (q = K - 1 = 3 mod 4: H = I + [[0, 1^T], [-1, Q]], Q[a][b] = chi(a - b))
    or Paley II (q = K/2 - 1 = 1 mod 4: the conference matrix C = [[0, 1^T],
    [1, Q]] with each entry c a 2 x 2 block), normalized so that row 0 and
    column 0 are +1. Prime powers that are not primes (GF(p^m)) and the
    Williamson bases are not rebuilt here."""
    def chi(x, q):
        x %= q
        return 0 if x == 0 else (1 if pow(x, (q - 1) // 2, q) == 1 else -1)
    if K % 4 == 0 and is_prime(K - 1):
        q = K - 1
        h = np.empty((K, K))
        for i in range(K):
            for j in range(K):
                h[i, j] = 1 if i == j or i == 0 else (-1 if j == 0 else chi(i - j, q))
    elif K % 8 == 4 and is_prime(K // 2 - 1):
        q, n = K // 2 - 1, K // 2
        h = np.empty((K, K))
        for i in range(n):
            for j in range(n):
                c = 0 if i == j else (1 if i == 0 or j == 0 else chi(i - j, q))
                for a in range(2):
                    for b in range(2):
                        h[2 * i + a, 2 * j + b] = (c * (-1 if a & b else 1) if c
                                                   else (-1 if a | b else 1))
    else:
        raise ValueError(f"Hadamard base of order {K}: only Sylvester and Paley bases "
                         "over a prime field are rebuilt by this script")
    h[h[:, 0] < 0] *= -1
    h[:, h[0, :] < 0] *= -1
    return h


def hadamard(w, K=0):
    """H = H_K (x) Sylvester(w / K), the matrix of cic_hadamard_base_k; K = 0
    is the automatic base, which for a power of two w is K = 1."""
    if K in (0, 1):
        return sylvester(w)
    if w % K or (w // K) & (w // K - 1):
        raise ValueError(f"fast Hadamard width {w} is not {K} times a power of two")
    return np.kron(paley_base(K), sylvester(w // K))


def regular_hadamard(w):
    """The regular Hadamard matrix (J - 2I)^(x)k of order w = 4^k: every row
    and column sums to 2^k (q = "regular-hadamard")."""
    r4 = np.ones((4, 4)) - 2 * np.eye(4)
    h = np.ones((1, 1))
    while h.shape[0] < w:
        h = np.kron(h, r4)
    if h.shape[0] != w:
        raise ValueError(f"no regular Hadamard matrix of order {w} (4^k only)")
    return h


def fast_q(signs, K=0, base=None, regular=False):
    """The orthogonal matrix of the randomized fast Hadamard with these signs,
    as the row-vector map of its forward direction: x -> (x H) * s / sqrt(w)
    is x Q with Q = H diag(s) / sqrt(w); the transpose direction
    x -> ((x * s) H^T) / sqrt(w) is x Q^T. K: the transform's hadamard_base
    (dump metadata; 0 automatic); regular: H the regular Hadamard."""
    w = signs.shape[0]
    if regular:
        return regular_hadamard(w) * signs[None, :] / math.sqrt(w)
    if base is not None:   # the dump's H_K ("hadamard.base.<w>"): any construction
        return np.kron(base, sylvester(w // base.shape[0])) * signs[None, :] / math.sqrt(w)
    return hadamard(w, K) * signs[None, :] / math.sqrt(w)
