"""Sums over units at many inverse temperatures: one compiled pass for a whole ladder.

The tempered estimators (RTS, TS, TI, TI-RB, MBAR) need, after every sweep, the summed-out
density of every chain at **every** level of a ladder of ``K`` levels,

    S_k(x) = Σ_j softplus(β_k a_j(x)),         and for TI-RB  D_k(x) = Σ_j a_j σ(β_k a_j(x)),

where ``a = c + vW`` are the ``J`` pre-activations of the summed-out layer. For a 784×500 RBM
and ``K = 100`` that is ``n·K·J = 5·10^6`` softplus per 100-chain sweep: evaluated as torch
float64 operations it costs about ten times the sweep's two matrix products, and the
estimators cost 11–27 times AIS per chain-sweep (docs/performance.md, "Tempered estimators").

This module evaluates both sums in one C loop, compiled once per machine with ``-O3
-march=native -fno-math-errno -fno-trapping-math -fopenmp`` (not ``-ffast-math``, below) and
loaded with :mod:`ctypes` (a plain C file: it builds in about a second, where a torch
extension takes half a minute), about 20 times faster than the float64 path on one thread. Three choices make it fast:

* ``softplus(t) = max(t, 0) + log(1 + e^{−|t|})``: the positive parts do not depend on the
  level's sign pattern, ``Σ_j max(β a_j, 0) = β Σ_j max(a_j, 0)``, one sum per chain;
* the logarithm is taken of **products**: ``Σ_j log(1 + u_j) = log Π_j (1 + u_j)`` with
  ``u_j = e^{−β|a_j|} ∈ (0, 1]``, so each factor lies in ``(1, 2]``; 64 of them are
  multiplied in single precision (at most ``2^64``, far from overflow) before one logarithm
  in double precision. One exponential per unit and level instead of a softplus;
* that exponential is inlined (a degree-6 polynomial after range reduction, relative error
  below 2e-7), so the loop over levels vectorises without calls.

Precision: the exponentials and products are single precision, the positive parts and the
sums over blocks double: the error of ``S_k`` is a few 1e-6 nats for 500 units (measured
against float64 in ``tests/test_level_sums.py``), far below the Monte Carlo error of any
estimate; the sweeps themselves are exact.

Used on the CPU for float32 models when ``K·J`` is at least :data:`MIN_ELEMENTS` per chain
(below it the float64 path is cheap and the exact-oracle tests keep their bits; a per-chain
size, so that a run split over processes takes the same path in each);
``BOLTZLAB_LEVEL_SUMS=off`` turns it off, ``on`` uses it at any size (the tests do). A failed
build (no C compiler, say) turns it off for the process, once, with a warning that names the
cause, and the float64 path runs.
"""

from __future__ import annotations

import ctypes

import torch
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.native import NativeKernel

__all__ = ["ENVIRONMENT_VARIABLE", "MIN_ELEMENTS", "level_sums", "mode", "set_mode", "uses_kernel"]

ENVIRONMENT_VARIABLE = "BOLTZLAB_LEVEL_SUMS"
#: ``K·J`` (levels × summed-out units) from which the kernel is used in ``auto`` mode: 100
#: levels of 164 units. Below it the float64 path is cheap, and tiny models (every
#: exact-oracle test) keep bit-identical results with the float64 path.
MIN_ELEMENTS = 1 << 14

# Factors multiplied before one logarithm: each lies in (1, 2], so a block is at most 2^64.
_SOURCE = r"""
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#define BLOCK 64

/* e^x for x <= 0, relative error below 2e-7: 2^(x log2 e) = 2^n 2^f with n the nearest
   integer, f in [-1/2, 1/2], and 2^f by its degree-6 Taylor polynomial (remainder
   (ln 2 / 2)^7 / 7! < 1.3e-7). Inlined, it vectorises to a dozen instructions per 16 values;
   libmvec's expf is a call that also handles every special case (about 1.8 times slower here). */
static inline float exp_nonpositive(float x) {
    x = x < -87.0f ? -87.0f : x;  /* 2^-126: the smallest normal scale the exponent bits give */
    const float t = x * 1.4426950408889634f;
    const float n = rintf(t);
    const float f = t - n;
    float p = 1.5403530e-4f;
    p = p * f + 1.3333558e-3f;
    p = p * f + 9.6181291e-3f;
    p = p * f + 5.5504109e-2f;
    p = p * f + 2.4022651e-1f;
    p = p * f + 6.9314718e-1f;
    p = p * f + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* out_f[i*K + k] = sum_j softplus(betas[k] * pre[i*J + j]);
   out_d (may be NULL) [i*K + k] = sum_j pre[i*J + j] * sigmoid(betas[k] * pre[i*J + j]).
   betas >= 0. A NaN in a row makes that row's sums NaN. Returns 1 (nothing written) when the
   work space cannot be allocated. */
int boltzlab_level_sums(const float *pre, int64_t n, int64_t J, const float *betas, int64_t K,
                        double *out_f, double *out_d, int threads) {
    /* Every thread's work space is allocated here, before the parallel region: a thread that
       could not allocate must not skip the work-sharing loop (the others would wait for it). */
    const size_t per_thread = (size_t)K;
    float *prods = malloc(sizeof(float) * per_thread * (size_t)threads);
    double *accs = malloc(sizeof(double) * per_thread * (size_t)threads);
    double *daccs = malloc(sizeof(double) * per_thread * (size_t)threads);
    float *neg = malloc(sizeof(float) * per_thread);
    if (!prods || !accs || !daccs || !neg) {
        free(prods); free(accs); free(daccs); free(neg);
        return 1;
    }
    for (int64_t k = 0; k < K; ++k) neg[k] = -betas[k];
    #pragma omp parallel num_threads(threads)
    {
        const int thread = omp_get_thread_num();
        float *prod = prods + per_thread * (size_t)thread;
        double *acc = accs + per_thread * (size_t)thread;
        double *dacc = daccs + per_thread * (size_t)thread;
        #pragma omp for schedule(static)
        for (int64_t i = 0; i < n; ++i) {
            const float *row = pre + i * J;
            double positive = 0.0;
            for (int64_t k = 0; k < K; ++k) { acc[k] = 0.0; prod[k] = 1.0f; dacc[k] = 0.0; }
            for (int64_t j = 0; j < J; ++j) {
                const float a = row[j];
                const float magnitude = fabsf(a);
                if (a > 0.0f) positive += a;
                if (out_d) {
                    /* a * sigmoid(beta a) = (a > 0 ? a : a u) / (1 + u), u = exp(-beta |a|) */
                    const float top = a > 0.0f ? a : 0.0f;
                    const float low = a > 0.0f ? 0.0f : a;
                    #pragma omp simd
                    for (int64_t k = 0; k < K; ++k) {
                        const float u = exp_nonpositive(neg[k] * magnitude);
                        prod[k] *= 1.0f + u;
                        dacc[k] += (double)((top + low * u) / (1.0f + u));
                    }
                } else {
                    #pragma omp simd
                    for (int64_t k = 0; k < K; ++k) prod[k] *= 1.0f + exp_nonpositive(neg[k] * magnitude);
                }
                if ((j + 1) % BLOCK == 0 || j + 1 == J) {
                    for (int64_t k = 0; k < K; ++k) {
                        acc[k] += log((double)prod[k]);
                        prod[k] = 1.0f;
                    }
                }
            }
            for (int64_t k = 0; k < K; ++k) {
                out_f[i * K + k] = acc[k] + (double)betas[k] * positive;
                if (out_d) out_d[i * K + k] = dacc[k];
            }
        }
    }
    free(prods); free(accs); free(daccs); free(neg);
    return 0;
}
"""
#: The kernel's mode, build and load (:class:`boltzlab.native.NativeKernel`).
KERNEL = NativeKernel(
    "level_sums",
    _SOURCE,
    functions=("boltzlab_level_sums",),
    restype=ctypes.c_int,
    argtypes=[
        ctypes.c_void_p,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_void_p,
        ctypes.c_int64,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_int,
    ],
    environment_variable=ENVIRONMENT_VARIABLE,
    what="level-sums kernel",
    fallback="tempered estimators use the float64 torch path, several times slower on large models",
)


def set_mode(name: str | None) -> None:
    """``"auto"``, ``"on"`` or ``"off"`` for the kernel from now on; ``None``: the environment."""
    KERNEL.set_mode(name)


def mode() -> str:
    """The mode in force: ``"auto"`` (default), ``"on"`` or ``"off"``."""
    return KERNEL.mode()


def uses_kernel(n_levels: int, n_units: int, preactivation: Tensor) -> bool:
    """Whether the densities of ``preactivation``'s states at ``n_levels`` levels use the kernel.

    Only for float32 pre-activations on the CPU (a float64 model keeps float64 densities:
    rounding its pre-activations to single precision would cost 1e-5 to 1e-4 nats), and in
    ``auto`` mode only from :data:`MIN_ELEMENTS` per chain, a size that does not depend on how
    many chains a process holds (so a run split over processes takes the same path in each).
    Builds the kernel on first use; ``False`` (after one warning) if it cannot be built.
    """
    chosen = mode()
    if chosen == "off" or preactivation.device.type != "cpu" or preactivation.dtype != torch.float32:
        return False
    if n_units == 0 or (chosen == "auto" and n_levels * n_units < MIN_ELEMENTS):
        return False
    return KERNEL.library() is not None


def level_sums(
    preactivation: Tensor, betas: Tensor, *, derivative: bool = False
) -> tuple[Tensor, Tensor | None]:
    """``Σ_j softplus(β_k a_ij)`` and, on request, ``Σ_j a_ij σ(β_k a_ij)`` by the compiled kernel.

    Parameters
    ----------
    preactivation : Tensor, shape (n, J), float32, CPU
        ``a``.
    betas : Tensor, shape (K,), at least 0
        Inverse temperatures, evaluated in single precision (pass the ladder as the chains
        sweep it: a float32 model's values are then exact).
    derivative : bool, default False
        Also return the sigmoid-weighted sums (the path derivatives' unit part, TI-RB).

    Returns
    -------
    sums : Tensor, shape (n, K), float64
    derivatives : Tensor, shape (n, K), float64, or None

    Callers check :func:`uses_kernel` first; this raises :class:`RuntimeError` when the kernel
    is not available (the build failed; the warning said why).
    """
    library = KERNEL.require()
    if preactivation.dim() != 2 or preactivation.device.type != "cpu" or preactivation.dtype != torch.float32:
        raise ValidationError("level_sums takes a 2-D float32 CPU tensor of pre-activations (n, J)")
    pre = preactivation.detach().to(torch.float32).contiguous()
    levels = betas.detach().to(device="cpu", dtype=torch.float32).contiguous()
    if levels.dim() != 1 or not bool((levels >= 0).all()):
        # The positive parts are factored as β·Σ max(a, 0), which holds for β ≥ 0 only.
        raise ValidationError("level_sums takes a 1-D tensor of inverse temperatures, all at least 0")
    n, n_units = pre.shape
    n_levels = levels.numel()
    sums = torch.empty((n, n_levels), dtype=torch.float64)
    derivatives = torch.empty((n, n_levels), dtype=torch.float64) if derivative else None
    failed = library.boltzlab_level_sums(
        ctypes.c_void_p(pre.data_ptr()),
        ctypes.c_int64(n),
        ctypes.c_int64(n_units),
        ctypes.c_void_p(levels.data_ptr()),
        ctypes.c_int64(n_levels),
        ctypes.c_void_p(sums.data_ptr()),
        ctypes.c_void_p(derivatives.data_ptr() if derivatives is not None else None),
        ctypes.c_int(max(1, torch.get_num_threads())),
    )
    if failed:
        raise MemoryError(f"the level-sums kernel could not allocate its work space for {n_levels} levels")
    return sums, derivatives
