"""A whole RBM sweep on the CPU with the product and the sampling of each row block in one region.

The library's sweep of a layer is a matrix product (one BLAS call with its own thread pool)
followed by the fused sampling kernel (:mod:`boltzlab.operators.fused`, another parallel
region). On two cores that stops near 1.6× one thread: the two pools hand the cores back and
forth and the logits leave the cache between them (docs/performance.md, "Measurements"). Here a
small C++ extension, built once per machine with ``torch.utils.cpp_extension.load_inline``
(about 25 s; cached in torch's extensions folder under a name that carries the CPU's
instruction sets), splits the chains into one row block per
thread inside one ``at::parallel_for``; each thread multiplies its block in tiles (the GEMM
backend's product on one thread inside the region: numpy's OpenBLAS called by address,
:func:`boltzlab.gemm.openblas_kernels`, in tiles of ``OPENBLAS_TILE_ROWS`` rows, or ATen's
in tiles of ``_TILE_ROWS``) and samples each tile right after, with the same counter-based bits (:func:`boltzlab.rng.counter_bits`),
the same keys, the same logits formula and the same thresholds as the fused kernel. Its draws
are therefore the fused kernel's up to float rounding (the products, which may differ between
ATen's and OpenBLAS's GEMM and between tile sizes, and the exponential's implementation): a
unit whose threshold lands within rounding of its uniform can come out differently.

Used for Gibbs, flip-the-state and α-mixture sweeps of binary RBMs on the CPU, float32 and float64, in the
fused kernel's modes (``BOLTZLAB_FUSED``): ``off`` never, ``on`` always (the tests, against exact
transition matrices), ``auto`` on layers the fused kernel would take when the GEMM backend
for one thread (:mod:`boltzlab.gemm`; each thread of the region multiplies on its own) is
``openblas`` and its entry points are found (any number of threads), or when it is ``torch``
and torch has at least two threads (on one, ATen's tiles lose to one whole product and the
fused kernel). A failed build (no compiler or ninja) turns it
off for the process with one warning, and sweeps go on through the fused kernel.
"""

from __future__ import annotations

import contextlib
import hashlib
import warnings
from typing import Any

import torch

from boltzlab import gemm
from boltzlab.chains import Chains
from boltzlab.models.base import TemperedModel, all_ones
from boltzlab.models.rbm import RBM
from boltzlab.operators import fused
from boltzlab.rng import counter_keys

__all__ = ["OPENBLAS_TILE_ROWS", "one_region_sweep", "uses_one_region"]

#: Rows multiplied and sampled at a time with ATen's GEMM: 128 rows of a 500-unit layer (256 KB
#: of float32 logits) stay in a core's L2 cache until they are sampled (128 beat 250 and the
#: whole block).
_TILE_ROWS = 128
#: The same with OpenBLAS's, which packs the whole weight matrix (1.5 MB at 784×500) on every
#: call: at 1,000 chains on one thread tiles of 128 rows cost 1.17× the product alone, 256 rows
#: 1.08×, the whole block 1.06×; at 10,000 chains 1,024 rows 1.06–1.10× (docs/performance.md).
OPENBLAS_TILE_ROWS = 1024
_KINDS = {"GibbsOperator": 0, "FlipOperator": 1, "MixtureOperator": 2}

_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <algorithm>
#include <cmath>
#include <cstdint>

// CBLAS row-major GEMM of numpy's OpenBLAS, called by address (gemm.openblas_kernels); I is its
// integer type (64-bit in numpy's ILP64 build). Enums: 101 row-major, 111 no transpose, 112 transpose.
template <typename T, typename I>
using cblas_gemm = void (*)(int, int, int, I, I, I, T, const T*, I, const T*, I, T, T*, I);

// out (rows x H, contiguous) = x_rows W through OpenBLAS; W is row-major (K x H) or the transposed
// view of a row-major (H x K) matrix. The bias is added row by row in `sample`, where the row is
// in L1: copying it into `out` first and asking for C = AB + C cost a write and a read of the tile.
template <typename T, typename I>
static void blas_tile(int64_t address, const T* x, int64_t rows, int64_t K, const torch::Tensor& W, T* out,
                      int64_t H) {
  const bool trans = !W.is_contiguous();  // one_region_sweep passes W or a transposed view of it
  const int64_t ldb = trans ? W.size(0) : H;
  reinterpret_cast<cblas_gemm<T, I>>(address)(101, 111, trans ? 112 : 111, (I)rows, (I)H, (I)K, T(1), x, (I)K,
                                              W.data_ptr<T>(), (I)ldb, T(0), out, (I)H);
}

// rng._hash32: x ^= x >> 16; x *= 0x21f0aaad; x ^= x >> 15; x *= 0x735a2d97; x ^= x >> 15.
static inline uint32_t hash32(uint32_t x) {
  x ^= x >> 16; x *= 0x21f0aaadU; x ^= x >> 15; x *= 0x735a2d97U; x ^= x >> 15; return x;
}

// Units of rows [lo, hi), whose products l (rows lo..hi of x W, plus the bias where `bias` is
// null) this may overwrite: logit = beta_r * (l + bias_j) + offset_j, then 1 where the
// operator's threshold (uniform_scale * (P(new = 1) - 1/2)) exceeds the centred uniform
// integer, as rng and fused do. Row by row, so that the row stays in L1 between the passes.
// `o` may be `l` itself (each unit is read before it is written).
template <typename T, int KIND>
static void sample(T* l, const T* bias, const T* beta, const T* offset, const T* c, T* o, int64_t lo,
                   int64_t hi, int64_t width, uint32_t k0, uint32_t k1, bool tie_rule, T alpha) {
  constexpr bool wide = sizeof(T) == 8;
  constexpr T scale = wide ? T(4294967296.0) : T(16777216.0);
  // Clamped so that exp and the threshold stay finite (compiled with -ffast-math for a
  // vectorised exp): beyond +-limit the threshold saturates exactly as it would at the true
  // value. A NaN logit (a diverged model) draws 1 here where the fused kernel draws 0.
  constexpr T limit = wide ? T(680) : T(64);
  const T tie = tie_rule ? T(0.5) : T(1);  // P(flip) at a zero logit; exp(0) = 1 without the rule
  for (int64_t r = lo; r < hi; ++r) {
    T* lr = l + (r - lo) * width;
    if (bias) {
      #pragma omp simd
      for (int64_t j = 0; j < width; ++j) lr[j] = lr[j] + bias[j];
    }
    if (beta || offset) {
      const T b = beta ? beta[r] : T(1);
      if (offset) {
        #pragma omp simd
        for (int64_t j = 0; j < width; ++j) lr[j] = lr[j] * b + offset[j];
      } else {
        #pragma omp simd
        for (int64_t j = 0; j < width; ++j) lr[j] = lr[j] * b;
      }
    }
    const uint32_t first = (uint32_t)(r * width);
    const T* cp = c + r * width;
    T* op = o + r * width;
    #pragma omp simd
    for (int64_t j = 0; j < width; ++j) {
      const uint32_t bits = hash32(hash32((first + (uint32_t)j) ^ k0) ^ k1);
      const T uniform = wide ? T(bits) - T(2147483648.0) : T(bits >> 8) - T(8388608.0);
      const T li = lr[j];  // (std::min/std::max here stopped GCC vectorising the loop: 2x slower)
      const T x = li > limit ? limit : (li < -limit ? -limit : li);
      T threshold;
      if constexpr (KIND == 0) {
        threshold = (T(1) / (T(1) + std::exp(-x)) - T(0.5)) * scale;
      } else if constexpr (KIND == 2) {
        // The alpha-mixture (operators/mixture.py): alpha * P_flip(new = 1) + (1 - alpha) * sigmoid.
        const T sign = T(1) - T(2) * cp[j];
        const T signed_logit = x * sign;
        const T flip = signed_logit == T(0) ? T(0.5) : std::exp(signed_logit > T(0) ? T(0) : signed_logit);
        const T probability = alpha * (cp[j] + sign * flip) + (T(1) - alpha) * (T(1) / (T(1) + std::exp(-x)));
        threshold = (probability - T(0.5)) * scale;
      } else {
        const T sign = T(1) - T(2) * cp[j];
        const T signed_logit = x * sign;
        const T flip = signed_logit == T(0) ? tie : std::exp(signed_logit);
        threshold = (flip - T(0.5)) * sign * scale;
      }
      op[j] = threshold > uniform ? T(1) : T(0);
    }
  }
}

torch::Tensor layer(torch::Tensor x, torch::Tensor W, torch::Tensor bias, c10::optional<torch::Tensor> beta,
                    c10::optional<torch::Tensor> offset, torch::Tensor current, int64_t k0, int64_t k1,
                    int64_t kind, bool tie_rule, double alpha, int64_t tile, int64_t sgemm, int64_t dgemm,
                    bool ilp64) {
  const int64_t N = x.size(0), H = W.size(1);
  auto out = torch::empty({N, H}, x.options());
  const int64_t threads = at::get_num_threads();
  const int64_t grain = std::max<int64_t>(1, (N + threads - 1) / threads);
  const int64_t K = x.size(1);
  TORCH_CHECK(x.is_contiguous() && bias.is_contiguous() && (W.is_contiguous() || W.t().is_contiguous()),
              "one_region layer: x and bias contiguous, W row-major or a transposed row-major view");
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "one_region_layer", [&] {
    const int64_t blas = sizeof(scalar_t) == 4 ? sgemm : dgemm;
    const scalar_t* xp = x.data_ptr<scalar_t>();
    const scalar_t* biasp = bias.data_ptr<scalar_t>();
    const scalar_t* bp = beta ? beta->data_ptr<scalar_t>() : nullptr;
    const scalar_t* op = offset ? offset->data_ptr<scalar_t>() : nullptr;
    const scalar_t* cp = current.data_ptr<scalar_t>();
    scalar_t* outp = out.data_ptr<scalar_t>();
    at::parallel_for(0, N, grain, [&](int64_t begin, int64_t end) {
      for (int64_t lo = begin; lo < end; lo += tile) {
        const int64_t hi = std::min(end, lo + tile);
        // The tile's logits go into its own rows of `out`, which sampling then overwrites in
        // place with the states: no second buffer to allocate, fill and read.
        scalar_t* l = outp + lo * H;
        if (!blas) {
          torch::Tensor rows = out.slice(0, lo, hi);
          at::addmm_out(rows, bias, x.slice(0, lo, hi), W);
        } else if (ilp64) {
          blas_tile<scalar_t, int64_t>(blas, xp + lo * K, hi - lo, K, W, l, H);
        } else {
          blas_tile<scalar_t, int32_t>(blas, xp + lo * K, hi - lo, K, W, l, H);
        }
        const scalar_t* add = blas ? biasp : nullptr;  // ATen's addmm has added it
        const uint32_t a = (uint32_t)k0, b = (uint32_t)k1;
        const scalar_t mix = (scalar_t)alpha;
        if (kind == 0) {
          sample<scalar_t, 0>(l, add, bp, op, cp, outp, lo, hi, H, a, b, tie_rule, mix);
        } else if (kind == 1) {
          sample<scalar_t, 1>(l, add, bp, op, cp, outp, lo, hi, H, a, b, tie_rule, mix);
        } else {
          sample<scalar_t, 2>(l, add, bp, op, cp, outp, lo, hi, H, a, b, tie_rule, mix);
        }
      }
    });
  });
  return out;
}
"""

_extension: Any = None
_broken: str | None = None


def uses_one_region(operator: Any, model: TemperedModel, chains: Chains, generator: Any) -> bool:
    """Whether :func:`one_region_sweep` takes this sweep (module docstring)."""
    if _broken is not None or type(model) is not RBM or type(operator).__name__ not in _KINDS:
        return False
    if type(operator).__module__ not in (
        "boltzlab.operators.gibbs",
        "boltzlab.operators.flip",
        "boltzlab.operators.mixture",
    ):
        return False
    if not isinstance(generator, torch.Generator):
        return False  # a BlockGenerator (chains sharded by block) has no single counter key
    smaller, larger = sorted(chains.layers, key=lambda layer: layer.shape[-1])
    # Both layers must be ones the fused kernel takes (its mode, device, dtype, size, and no
    # failed compilation here: one random stream for every sweep of a process), with counter
    # indices below 2^32 (rng.counter_bits).
    if not fused.uses_fused(smaller) or larger.numel() >= 1 << 32:
        return False
    if fused.mode() == "on":
        return True
    # Each thread of the region multiplies its own rows on one thread: the one-thread choice.
    if gemm.backend(smaller.dtype, rows=smaller.shape[0], threads=1) == "openblas":
        return gemm.openblas_kernels() is not None
    return torch.get_num_threads() >= 2


def one_region_sweep(
    operator: Any, model: RBM, chains: Chains, *, generator: torch.Generator, reverse: bool = False
) -> Chains | None:
    """One sweep (hidden then visible; ``reverse``: visible then hidden), or ``None`` if unavailable.

    Draws two keys per layer from ``generator`` in update order, as the fused kernel does.
    """
    extension = _build()
    if extension is None:
        return None
    beta = chains.beta
    dtype = chains.layers[0].dtype
    tempered = not all_ones(beta)
    beta_rows = beta.to(dtype).contiguous() if tempered else None
    weights = model.weights.detach().to(dtype).contiguous()
    kind = _KINDS[type(operator).__name__]
    tie_rule = bool(getattr(operator, "tie_rule", True))
    alpha = float(getattr(operator, "alpha", 0.0))  # the mixture's flip weight
    # As _visible_logits: β·(b − b^A + hWᵀ), plus b^A once the base is fitted.
    base = model.base_logits.detach().to(dtype) if tempered else None
    offset = base if (base is not None and model.base_fitted) else None
    visible, hidden = (layer.contiguous() for layer in chains.layers)
    # The product of each tile: OpenBLAS's, called by address, where it is the GEMM backend.
    rows = chains.layers[0].shape[0]
    kernels = gemm.openblas_kernels() if gemm.backend(dtype, rows=rows, threads=1) == "openblas" else None
    blas = (kernels.sgemm, kernels.dgemm, kernels.ilp64) if kernels is not None else (0, 0, False)
    tile = _TILE_ROWS if kernels is None else OPENBLAS_TILE_ROWS
    with gemm.single_threaded_openblas(kernels) if kernels is not None else contextlib.nullcontext():
        for index in (0, 1) if reverse else (1, 0):
            keys = counter_keys(generator).tolist()
            if index == 1:
                hidden = extension.layer(
                    visible, weights, model.hidden_bias.detach().to(dtype).contiguous(), beta_rows, None,
                    hidden, keys[0], keys[1], kind, tie_rule, alpha, tile, *blas,
                )  # fmt: skip
            else:
                bias = model.visible_bias.detach().to(dtype)
                visible = extension.layer(
                    hidden, weights.t(), (bias - base if base is not None else bias).contiguous(), beta_rows,
                    offset, visible, keys[0], keys[1], kind, tie_rule, alpha, tile, *blas,
                )  # fmt: skip
    return Chains(layers=(visible, hidden), beta=beta)


def _build() -> Any:
    """The compiled extension, built on first use; ``None`` (and one warning) if it cannot be."""
    global _extension, _broken
    if _extension is None and _broken is None:
        try:
            from torch.utils.cpp_extension import load_inline

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                # torch reuses a build by name, source and flags; -march=native code built on
                # one CPU can die with SIGILL on another sharing the extensions folder, so the
                # name carries the CPU's instruction sets.
                _extension = load_inline(
                    f"boltzlab_one_region_{_cpu_fingerprint()}",
                    cpp_sources=_SOURCE,
                    functions=["layer"],
                    extra_cflags=["-O3", "-march=native", "-ffast-math", "-fopenmp"],
                    extra_ldflags=["-fopenmp"],
                )
        except Exception as error:
            _broken = f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
            warnings.warn(
                f"the one-region sweep could not be built ({_broken}); sweeps use the fused kernel "
                f"(set {fused.ENVIRONMENT_VARIABLE}=off to skip both)",
                RuntimeWarning,
                stacklevel=3,
            )
    return _extension


def _cpu_fingerprint() -> str:
    """A short hash of this CPU's model name and instruction-set flags (Linux), else its capability."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            lines = [line for line in cpuinfo if line.startswith(("model name", "flags"))]
        text = "".join(sorted(set(lines)))
    except OSError:
        text = torch.backends.cpu.get_cpu_capability()
    return hashlib.sha256(text.encode()).hexdigest()[:12]
