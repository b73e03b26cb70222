"""Categorical (Potts) draws in one compiled pass per site: weights, running sum, uniform, one-hot.

A sweep of a categorical layer draws every site of every chain from ``categorical_probabilities``
(docs/algorithms.md §2.1: the softmax of the site's logits for Gibbs). As torch operations
that is a softmax, a running sum, a uniform per site, a comparison with every running sum, a
sum of the comparisons and a scatter into zeros: seven passes over an ``n × L·q`` tensor, and
on a 31×21-site, 100-hidden model with 1,000 chains more than half of the sweep
(docs/performance.md, "Potts sweeps against rbms"). Here one C loop (built on first use,
:mod:`boltzlab.native`) takes each site's ``q`` values while they are in L1:

1. the weights: for Gibbs ``w_a = exp(x_a − max_b x_b)``, the softmax without its division
   (the row is scaled by its own sum instead); for any other operator the probabilities
   ``categorical_probabilities`` gave;
2. the total ``S = Σ_a w_a`` and the threshold ``t = u·S``, accumulated in double precision, with
   ``u = k / 2^b`` uniform on ``b`` bits (24 for float32, 32 for float64, as the binary draws of
   :mod:`boltzlab.rng`);
3. the first state whose running sum exceeds ``t``, written as the one-hot row (over the
   weights: the row is written once).

So the sampled kernel is the one the probabilities describe, up to float rounding and the
``2^-b`` resolution of ``u``: ``P(a) = w_a / S ± 2^-b``, a state of weight 0 is never drawn (``t <
S`` exactly, so the chosen state's running sum grew), exactly as the torch path
(:func:`boltzlab.rng.sample_categorical`) but in one pass. The exponential is inlined
(range reduction and a degree-7 polynomial: relative error below 1e-8 before float rounding, so
within a few units in the last place of float32; float64 rows use the C library's ``exp``).

**Uniforms from a counter.** Site ``r`` of a draw (row ``r`` of the ``n·L`` sites, chain-major)
gets ``u`` from ``H(H(r ⊕ k₀) ⊕ k₁)``, :func:`boltzlab.rng.counter_bits` with two fresh keys from
the caller's generator, as the fused binary kernel does (:mod:`boltzlab.operators.fused`): the
draws are the same for every thread count, the same seed gives the same chains, and the
rows can be split over OpenMP threads freely.

Used on the CPU for float32 and float64 layers with a ``torch.Generator`` (a
:class:`~boltzlab.rng.BlockGenerator` keeps the torch path: its streams are per block of
chains), at any size; ``BOLTZLAB_CATEGORICAL=off`` (or :func:`set_mode`) turns it off, and a
failed build turns it off for the process with one warning. The torch path draws from
torch's generator, so the same seed gives different (equally valid) chains with and without
the kernel.
"""

from __future__ import annotations

import ctypes

import torch
from torch import Tensor

from boltzlab.native import NativeKernel
from boltzlab.rng import counter_keys

__all__ = ["ENVIRONMENT_VARIABLE", "draw_one_hot_", "mode", "set_mode", "uses_kernel"]

ENVIRONMENT_VARIABLE = "BOLTZLAB_CATEGORICAL"
# Counter indices (sites of a draw) must stay below 2^32 (rng.counter_bits).
_MAX_ROWS = 1 << 32

_SOURCE = r"""
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <omp.h>

/* rng._hash32: a bijection of 32-bit words (Wellons's hash-prospector). */
static inline uint32_t hash32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x21f0aaadu;
    x ^= x >> 15;
    x *= 0x735a2d97u;
    x ^= x >> 15;
    return x;
}

/* e^x for x <= 0: 2^(x log2 e) = 2^n 2^f, n the nearest integer, f in [-1/2, 1/2], 2^f by its
   degree-7 Taylor polynomial (remainder (ln 2 / 2)^8 / 8! < 5.1e-9). Below -87 (e^-87 < 2^-125)
   the weight is 0: a state 38 orders of magnitude below the row's largest is never drawn. */
static inline float exp_nonpositive(float x) {
    const float t = (x < -87.0f ? -87.0f : x) * 1.4426950408889634f;
    const float n = rintf(t);
    const float f = t - n;
    float p = 1.5252734e-5f;
    p = p * f + 1.5403530e-4f;
    p = p * f + 1.3333558e-3f;
    p = p * f + 9.6181291e-3f;
    p = p * f + 5.5504109e-2f;
    p = p * f + 2.4022651e-1f;
    p = p * f + 6.9314718e-1f;
    p = p * f + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x < -87.0f ? 0.0f : p * scale;
}

/* One categorical draw per row of q values (rows of a site each), written one-hot into out
   (which may be the input itself). softmax != 0: the values are logits, the weights
   exp(x - max); otherwise they are the weights. Row r's uniform u comes from
   hash32(hash32(r ^ k0) ^ k1) (float32 keeps its top 24 bits); the state drawn is the number
   of running sums at most t = u * total (in double: t < total exactly, so the state's running
   sum grew and its weight is positive). Rows go in tiles of TILE: the running sums of a tile's
   rows are independent chains of additions, which the processor overlaps. */
#define TILE 8

#define CATEGORICAL(NAME, REAL, EXP, UNIFORM)                                                   \
void NAME(const REAL *in, REAL *out, int64_t rows, int64_t q, int softmax, uint32_t k0,          \
          uint32_t k1, int threads) {                                                            \
    const int64_t tiles = (rows + TILE - 1) / TILE;                                              \
    _Pragma("omp parallel for schedule(static) num_threads(threads)")                            \
    for (int64_t tile = 0; tile < tiles; ++tile) {                                               \
        const int64_t first = tile * TILE;                                                       \
        const int64_t count = rows - first < TILE ? rows - first : TILE;                         \
        REAL running[TILE];                                                                      \
        for (int64_t j = 0; j < count; ++j) {                                                    \
            const REAL *x = in + (first + j) * q;                                                \
            REAL *w = out + (first + j) * q;                                                     \
            if (softmax) {                                                                       \
                REAL top = x[0];                                                                 \
                for (int64_t a = 1; a < q; ++a) top = x[a] > top ? x[a] : top;                   \
                _Pragma("omp simd")                                                              \
                for (int64_t a = 0; a < q; ++a) w[a] = EXP(x[a] - top);                          \
            } else if (w != x) {                                                                 \
                memcpy(w, x, sizeof(REAL) * (size_t)q);                                          \
            }                                                                                    \
            running[j] = 0;                                                                      \
        }                                                                                        \
        for (int64_t a = 0; a < q; ++a) {                                                        \
            for (int64_t j = 0; j < count; ++j) {                                                \
                REAL *w = out + (first + j) * q;                                                 \
                running[j] += w[a];                                                              \
                w[a] = running[j];                                                               \
            }                                                                                    \
        }                                                                                        \
        for (int64_t j = 0; j < count; ++j) {                                                    \
            REAL *w = out + (first + j) * q;                                                     \
            const uint32_t bits = hash32(hash32((uint32_t)(first + j) ^ k0) ^ k1);               \
            const double threshold = UNIFORM(bits) * (double)running[j];                         \
            int64_t chosen = 0;                                                                  \
            _Pragma("omp simd reduction(+:chosen)")                                              \
            for (int64_t a = 0; a < q; ++a) chosen += (double)w[a] <= threshold;                 \
            chosen = chosen < q ? chosen : q - 1; /* a row without a positive finite total */    \
            memset(w, 0, sizeof(REAL) * (size_t)q);                                              \
            w[chosen] = 1;                                                                       \
        }                                                                                        \
    }                                                                                            \
}

#define UNIFORM_24(bits) ((double)((bits) >> 8) * 0x1p-24)
#define UNIFORM_32(bits) ((double)(bits) * 0x1p-32)

CATEGORICAL(boltzlab_categorical_f32, float, exp_nonpositive, UNIFORM_24)
CATEGORICAL(boltzlab_categorical_f64, double, exp, UNIFORM_32)
"""


#: The kernel's mode, build and load (:class:`boltzlab.native.NativeKernel`).
KERNEL = NativeKernel(
    "categorical",
    _SOURCE,
    functions=("boltzlab_categorical_f32", "boltzlab_categorical_f64"),
    restype=None,
    argtypes=[
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_int,
        ctypes.c_uint32,
        ctypes.c_uint32,
        ctypes.c_int,
    ],
    environment_variable=ENVIRONMENT_VARIABLE,
    what="categorical sampling kernel",
    fallback="categorical (Potts) layers are drawn by torch operations, several times slower",
)


def set_mode(name: str | None) -> None:
    """``"auto"``, ``"on"`` or ``"off"`` for the kernel from now on; ``None``: the environment.

    ``auto`` and ``on`` are the same (the kernel pays at every size); ``off`` keeps the torch path.
    """
    KERNEL.set_mode(name)


def mode() -> str:
    """The mode in force: ``"auto"`` (default), ``"on"`` or ``"off"``."""
    return KERNEL.mode()


def uses_kernel(values: Tensor, generator: object) -> bool:
    """Whether a draw from ``values`` (``(…, q)`` logits or weights) with ``generator`` uses the kernel.

    CPU float32 or float64 values, a ``torch.Generator``, fewer than 2^32 sites, the mode not
    ``off``, and a kernel that builds (the first call builds it; ``False`` after one warning if
    it cannot be built).
    """
    if mode() == "off" or not isinstance(generator, torch.Generator):
        return False
    if values.device.type != "cpu" or values.dtype not in (torch.float32, torch.float64):
        return False
    if values.dim() < 1 or values.shape[-1] < 1 or values.numel() // values.shape[-1] >= _MAX_ROWS:
        return False
    return KERNEL.library() is not None


def draw_one_hot_(values: Tensor, *, softmax: bool, generator: torch.Generator) -> Tensor:
    """One-hot draws along the last axis of ``values``, written over it; returns it.

    Parameters
    ----------
    values : Tensor, shape (…, q), float32 or float64, CPU
        With ``softmax=True`` each row's logits (the draw is from their softmax), otherwise its
        non-negative weights (the draw is from the weights over their sum). Overwritten with
        the draws (one 1 per row) when it is contiguous; otherwise a contiguous copy is.
    softmax : bool
    generator : torch.Generator
        Gives the draw's two counter keys (:func:`boltzlab.rng.counter_keys`).

    Callers check :func:`uses_kernel` first; this raises :class:`RuntimeError` when the kernel
    is not available.

    >>> import torch
    >>> from boltzlab.operators import categorical
    >>> logits = torch.tensor([[0.0, 2.0, -1.0], [5.0, 5.0, -80.0]])
    >>> draws = categorical.draw_one_hot_(logits.clone(), softmax=True, generator=torch.Generator().manual_seed(0))
    >>> draws.sum(1).tolist()
    [1.0, 1.0]
    """
    library = KERNEL.require()
    target = values if values.is_contiguous() else values.contiguous()
    q = target.shape[-1]
    rows = target.numel() // q if q else 0
    keys = [int(key) for key in counter_keys(generator).tolist()]
    function = (
        library.boltzlab_categorical_f64
        if target.dtype == torch.float64
        else library.boltzlab_categorical_f32
    )
    if rows:
        function(
            ctypes.c_void_p(target.data_ptr()),
            ctypes.c_void_p(target.data_ptr()),
            ctypes.c_int64(rows),
            ctypes.c_int64(q),
            ctypes.c_int(1 if softmax else 0),
            ctypes.c_uint32(keys[0]),
            ctypes.c_uint32(keys[1]),
            ctypes.c_int(max(1, torch.get_num_threads())),
        )
    return target
