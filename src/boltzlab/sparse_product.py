"""``bias + v·W`` for a layer ``v`` that is mostly zeros (a one-hot Potts layer), in one compiled pass.

A Potts RBM's visible layer is one-hot: of its ``L·q`` columns exactly ``L`` are 1 in each row.
Its hidden pre-activations ``c + vW`` are then the sum of ``L`` rows of ``W``, one per site,
where a dense matrix product spends ``L·q·J`` multiply-adds per chain on a layer of which all
but a ``1/q`` share is zero (21 times the work for proteins). This module adds, for each
chain, the rows of ``W`` at its non-zero columns, scaled by their values, to the bias, in a C
loop built on first use (:mod:`boltzlab.native`) and run over the chains on torch's thread count.

It computes ``bias + v·W`` for **any** ``v`` (a zero contributes nothing, whatever its row of
``W``), exactly up to the order of the additions (sites in column order after the bias): its
results differ from a BLAS product's in the last bits only. Only its speed depends on ``v``
being sparse, which is why only :class:`~boltzlab.models.potts_rbm.PottsRBM` uses it, for the
products of its one-hot layer (``conditional_logits`` of the hidden layer and
``marginal_terms``). Used for CPU float32 and float64 tensors without gradients;
``BOLTZLAB_SPARSE_PRODUCT=off`` (or :func:`set_mode`) keeps the dense product
(:func:`boltzlab.gemm.addmm`), and a failed build turns it off for the process with one warning
(docs/performance.md, "Potts sweeps against rbms").
"""

from __future__ import annotations

import ctypes

import torch
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.native import NativeKernel

__all__ = ["ENVIRONMENT_VARIABLE", "mode", "set_mode", "sparse_addmm", "uses_kernel"]

ENVIRONMENT_VARIABLE = "BOLTZLAB_SPARSE_PRODUCT"

_SOURCE = r"""
#include <stdint.h>
#include <string.h>
#include <omp.h>

/* out[i, :] = bias + sum over columns k with v[i, k] != 0 of v[i, k] * W[k, :]. The columns are
   scanned BLOCK at a time without branches (each index stored, the count advanced by whether
   its value is non-zero), then the rows of W at the non-zero ones are added: a one-hot layer's
   1s fall at unpredictable places, and a branch per column would mispredict at each of them. */
#define BLOCK 256

#define SPARSE_ADDMM(NAME, REAL)                                                                 \
void NAME(const REAL *v, int64_t n, int64_t width, const REAL *weights, int64_t units,            \
          const REAL *bias, REAL *out, int threads) {                                            \
    _Pragma("omp parallel for schedule(static) num_threads(threads)")                            \
    for (int64_t i = 0; i < n; ++i) {                                                            \
        const REAL *row = v + i * width;                                                         \
        REAL *o = out + i * units;                                                               \
        int64_t found[BLOCK];                                                                    \
        memcpy(o, bias, sizeof(REAL) * (size_t)units);                                           \
        for (int64_t start = 0; start < width; start += BLOCK) {                                 \
            const int64_t stop = start + BLOCK < width ? start + BLOCK : width;                  \
            int64_t count = 0;                                                                   \
            for (int64_t k = start; k < stop; ++k) {                                             \
                found[count] = k;                                                                \
                count += row[k] != 0;                                                            \
            }                                                                                    \
            for (int64_t m = 0; m < count; ++m) {                                                \
                const REAL value = row[found[m]];                                                \
                const REAL *w = weights + found[m] * units;                                      \
                _Pragma("omp simd")                                                              \
                for (int64_t j = 0; j < units; ++j) o[j] += value * w[j];                        \
            }                                                                                    \
        }                                                                                        \
    }                                                                                            \
}

SPARSE_ADDMM(boltzlab_sparse_addmm_f32, float)
SPARSE_ADDMM(boltzlab_sparse_addmm_f64, double)
"""


#: The kernel's mode, build and load (:class:`boltzlab.native.NativeKernel`).
KERNEL = NativeKernel(
    "sparse_product",
    _SOURCE,
    functions=("boltzlab_sparse_addmm_f32", "boltzlab_sparse_addmm_f64"),
    restype=None,
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
    what="sparse product kernel",
    fallback="the products of one-hot (Potts) layers are dense matrix products, several times slower",
)


def set_mode(name: str | None) -> None:
    """``"auto"``, ``"on"`` or ``"off"`` for the kernel from now on; ``None``: the environment.

    ``auto`` and ``on`` are the same; ``off`` keeps the dense product.
    """
    KERNEL.set_mode(name)


def mode() -> str:
    """The mode in force: ``"auto"`` (default), ``"on"`` or ``"off"``."""
    return KERNEL.mode()


def uses_kernel(v: Tensor, weights: Tensor) -> bool:
    """Whether ``bias + v·weights`` is computed by the kernel: CPU tensors of one dtype, float32 or
    float64, no gradient wanted, the mode not ``off``, a kernel that builds."""
    if mode() == "off" or v.dim() != 2 or weights.dim() != 2:
        return False
    if v.device.type != "cpu" or weights.device.type != "cpu" or v.dtype != weights.dtype:
        return False
    if v.dtype not in (torch.float32, torch.float64):
        return False
    if torch.is_grad_enabled() and (v.requires_grad or weights.requires_grad):
        return False
    return KERNEL.library() is not None


def sparse_addmm(bias: Tensor, v: Tensor, weights: Tensor) -> Tensor:
    """``bias + v @ weights`` for a sparse ``v`` (a new tensor ``(n, units)``).

    Parameters
    ----------
    bias : Tensor, shape (units,)
    v : Tensor, shape (n, width)
        Mostly zeros (the time grows with the non-zeros); any values are exact.
    weights : Tensor, shape (width, units)

    Callers check :func:`uses_kernel` first; this raises :class:`RuntimeError` when the kernel
    is not available.

    >>> import torch
    >>> from boltzlab import sparse_product
    >>> v = torch.tensor([[0.0, 1.0, 0.0, 1.0]])
    >>> weights = torch.arange(8.0).view(4, 2)
    >>> sparse_product.sparse_addmm(torch.tensor([0.5, -0.5]), v, weights).tolist()
    [[8.5, 9.5]]
    """
    library = KERNEL.require()
    n, width = v.shape
    if weights.shape[0] != width or bias.shape != (weights.shape[1],):
        raise ValidationError(
            f"sparse_addmm: v {tuple(v.shape)}, weights {tuple(weights.shape)} and bias "
            f"{tuple(bias.shape)} do not fit (n, width) · (width, units) + (units,)"
        )
    rows = v.detach().contiguous()
    matrix = weights.detach().contiguous()
    offset = bias.detach().to(v.dtype).contiguous()
    out = torch.empty((n, matrix.shape[1]), dtype=v.dtype)
    if n:
        function = (
            library.boltzlab_sparse_addmm_f64
            if v.dtype == torch.float64
            else library.boltzlab_sparse_addmm_f32
        )
        function(
            ctypes.c_void_p(rows.data_ptr()),
            ctypes.c_int64(n),
            ctypes.c_int64(width),
            ctypes.c_void_p(matrix.data_ptr()),
            ctypes.c_int64(matrix.shape[1]),
            ctypes.c_void_p(offset.data_ptr()),
            ctypes.c_void_p(out.data_ptr()),
            ctypes.c_int(max(1, torch.get_num_threads())),
        )
    return out
