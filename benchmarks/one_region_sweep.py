"""A prototype for issue 12's two-thread target: a whole RBM half-sweep in one parallel region.

The library's sweep is a matrix product (one BLAS call, its own thread pool) followed by the
compiled sampling kernel (TorchInductor's, another parallel region); on two cores it stops near
1.6× one thread (docs/performance.md, "Measurements"). Here a C++ extension,
built on first run with ``torch.utils.cpp_extension.load_inline`` (a C++ compiler and ninja are
needed; the build is cached), splits the chains into one row block per thread and, inside one
``at::parallel_for``, multiplies each block in tiles of ``--tile`` rows (ATen's GEMM runs on one
thread inside the region) and samples each tile while its logits are still in cache: sigmoid
(Gibbs) or the flip-the-state probability, the library's counter-based bits
(``rng.counter_bits``: ``H(H(i ⊕ k0) ⊕ k1)``) and the float32 threshold of ``rng``. Given the
same keys it draws what the library's compiled kernel draws (up to float rounding of the logits,
which ``--check`` measures).

Not part of the library: β = 1, float32, binary RBMs, no base term. It measures what the design
is worth before the operators are rebuilt on it. Ratios are to the library's one-thread Gibbs
sweep in the same run, rounds interleaved (this machine is shared and noisy)::

    python benchmarks/one_region_sweep.py --chains 1000 --rounds 5 --tile 128
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

import boltzlab as bl
from boltzlab.operators.fused import fused_sample
from boltzlab.rng import counter_keys

SOURCE = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <algorithm>
#include <cmath>
#include <cstdint>

// rng._hash32: x ^= x >> 16; x *= 0x21f0aaad; x ^= x >> 15; x *= 0x735a2d97; x ^= x >> 15.
static inline uint32_t hash32(uint32_t x) {
  x ^= x >> 16; x *= 0x21f0aaadU; x ^= x >> 15; x *= 0x735a2d97U; x ^= x >> 15; return x;
}

// Sample n units: o = 1 where the operator's threshold exceeds the centred uniform integer.
// KIND 0: Gibbs, P(1) = sigmoid(logit); KIND 1: flip-the-state, P(flip) = min(1, exp(sign·logit)).
template <int KIND>
static void sample(const float* l, const float* c, float* o, int64_t n, uint32_t offset, uint32_t k0, uint32_t k1) {
  #pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = hash32(hash32((offset + (uint32_t)i) ^ k0) ^ k1);
    const float uniform = (float)(bits >> 8) - 8388608.0f;
    float threshold;
    if constexpr (KIND == 0) {
      threshold = (1.0f / (1.0f + std::exp(-l[i])) - 0.5f) * 16777216.0f;
    } else {
      const float sign = 1.0f - 2.0f * c[i];
      const float signed_logit = l[i] * sign;
      const float flip = signed_logit == 0.0f ? 0.5f : std::exp(signed_logit);
      threshold = (flip - 0.5f) * sign * 16777216.0f;
    }
    o[i] = threshold > uniform ? 1.0f : 0.0f;
  }
}

// New 0/1 values of the layer whose logits are bias + x W, for chains (rows) of x.
torch::Tensor half_sweep(torch::Tensor x, torch::Tensor W, torch::Tensor bias, torch::Tensor current,
                         int64_t k0, int64_t k1, int64_t kind, int64_t tile) {
  const int64_t N = x.size(0), H = W.size(1);
  auto out = torch::empty({N, H}, x.options());
  const int64_t threads = at::get_num_threads();
  const int64_t grain = std::max<int64_t>(1, (N + threads - 1) / threads);
  at::parallel_for(0, N, grain, [&](int64_t begin, int64_t end) {
    for (int64_t lo = begin; lo < end; lo += tile) {
      const int64_t hi = std::min(end, lo + tile);
      auto logits = at::addmm(bias, x.slice(0, lo, hi), W);
      const float* l = logits.data_ptr<float>();
      const float* c = current.data_ptr<float>() + lo * H;
      float* o = out.data_ptr<float>() + lo * H;
      const int64_t n = (hi - lo) * H;
      const uint32_t offset = (uint32_t)(lo * H);
      if (kind == 0) {
        sample<0>(l, c, o, n, offset, (uint32_t)k0, (uint32_t)k1);
      } else {
        sample<1>(l, c, o, n, offset, (uint32_t)k0, (uint32_t)k1);
      }
    }
  });
  return out;
}
"""


def build():
    from torch.utils.cpp_extension import load_inline

    flags = ["-O3", "-march=native", "-ffast-math", "-fopenmp"]
    return load_inline(
        "boltzlab_one_region_sweep",
        cpp_sources=SOURCE,
        functions=["half_sweep"],
        extra_cflags=[*flags, "-std=c++17"],
        extra_ldflags=["-fopenmp"],
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chains", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=30, help="Sweeps per timing.")
    parser.add_argument("--tile", type=int, default=128, help="Rows multiplied and sampled at a time.")
    parser.add_argument("--check", action="store_true", help="Compare draws with the library's kernel.")
    arguments = parser.parse_args(argv)

    started = time.perf_counter()
    extension = build()
    print(f"extension built or loaded in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    generator = bl.rng.make_generator(0)
    model = bl.RBM(784, 500, generator=generator, weight_std=0.05)
    chains = model.init_chains(arguments.chains, generator=generator).with_beta(1.0)
    weights = model.weights.detach().contiguous()
    transposed = weights.t().contiguous()
    visible_bias, hidden_bias = model.visible_bias.detach(), model.hidden_bias.detach()
    state = {"chains": chains, "visible": chains.layers[0].clone(), "hidden": chains.layers[1].clone()}

    if arguments.check:
        for name, kind in (("gibbs", 0), ("flip", 1)):
            logits = torch.addmm(hidden_bias, state["visible"], weights)
            keys = counter_keys(torch.Generator().manual_seed(7))
            mine = extension.half_sweep(
                state["visible"], weights, hidden_bias, state["hidden"], int(keys[0]), int(keys[1]), kind, 128
            )
            theirs = fused_sample(
                bl.operators.get(name), logits, state["hidden"], generator=torch.Generator().manual_seed(7)
            )
            same = float((mine == theirs).double().mean()) if theirs is not None else float("nan")
            print(f"{name}: {same:.6f} of the draws equal the library's compiled kernel's (same keys)")

    def library_sweep(operator):
        def sweep():
            state["chains"], _ = operator.step(model, state["chains"], generator=generator)

        return sweep

    def one_region_sweep(kind):
        def sweep():
            keys = counter_keys(generator).tolist()
            hidden = extension.half_sweep(
                state["visible"],
                weights,
                hidden_bias,
                state["hidden"],
                keys[0],
                keys[1],
                kind,
                arguments.tile,
            )
            keys = counter_keys(generator).tolist()
            state["visible"] = extension.half_sweep(
                hidden, transposed, visible_bias, state["visible"], keys[0], keys[1], kind, arguments.tile
            )
            state["hidden"] = hidden

        return sweep

    def timed(sweep):
        sweep()
        sweep()
        start = time.perf_counter()
        for _ in range(arguments.repeats):
            sweep()
        return (time.perf_counter() - start) / arguments.repeats

    cases = {
        "library gibbs": library_sweep(bl.operators.get("gibbs")),
        "library flip": library_sweep(bl.operators.get("flip")),
        "one region gibbs": one_region_sweep(0),
        "one region flip": one_region_sweep(1),
    }
    times: dict[tuple[str, int], list[float]] = {}
    for _ in range(arguments.rounds):
        for threads in (1, 2):
            torch.set_num_threads(threads)
            for name, sweep in cases.items():
                times.setdefault((name, threads), []).append(timed(sweep))
    reference = statistics.median(times[("library gibbs", 1)])
    print(
        f"784x500 float32 RBM, {arguments.chains} chains, tile {arguments.tile}, medians of "
        f"{arguments.rounds} interleaved rounds; ratio = library's 1-thread Gibbs time / this time"
    )
    print("| sweep | threads | chain-sweeps/s | ratio | range |")
    print("|---|---|---|---|---|")
    for (name, threads), values in times.items():
        median = statistics.median(values)
        print(
            f"| {name} | {threads} | {arguments.chains / median:,.0f} | {reference / median:.2f} | "
            f"{reference / max(values):.2f}–{reference / min(values):.2f} |"
        )


if __name__ == "__main__":
    main()
