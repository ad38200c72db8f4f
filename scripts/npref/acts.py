# SPDX-License-Identifier: MIT
"""npref.acts: the activations of the blocks, in float64."""

import math

import numpy as np

_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu(x):        # 0.5 x (1 + erf(x / sqrt 2))
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def gelu_tanh(x):   # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def relu(x):
    return np.maximum(x, 0.0)


def silu(x):        # x sigmoid(x), written to avoid overflow of exp(-x)
    return x * np.where(x >= 0, 1.0 / (1.0 + np.exp(-np.abs(x))),
                        np.exp(-np.abs(x)) / (1.0 + np.exp(-np.abs(x))))


def quick_gelu(x):  # x sigmoid(1.702 x), as silu
    z = 1.702 * x
    return x * np.where(z >= 0, 1.0 / (1.0 + np.exp(-np.abs(z))),
                        np.exp(-np.abs(z)) / (1.0 + np.exp(-np.abs(z))))


ACTS = {"gelu": gelu, "gelu-tanh": gelu_tanh, "relu": relu, "silu": silu,
        "quick-gelu": quick_gelu}
