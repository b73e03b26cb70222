"""Chain-sweeps per second of a 784×500 RBM, as ratios to its own GEMMs measured in the same run.

A sweep of an RBM is two matrix products (``v @ W`` and ``h @ Wᵀ``) plus elementwise work and
random numbers. This benchmark times, for each number of chains:

* ``gemm torch`` and ``gemm openblas``: the two matrix products alone, through torch's BLAS
  and through numpy's OpenBLAS on the same memory (the two backends of ``boltzlab.gemm``),
  with their GFLOP/s; ``fastest`` is the smaller of the two;
* ``gibbs`` and ``flip``: one full ``operator.step`` as boltzlab runs it here (the GEMM
  backend ``boltzlab.gemm.backend()`` picked, the fused kernel of
  ``boltzlab.operators.fused`` where it applies, or on two threads or more the one-region
  sweep of ``boltzlab.operators.one_region``; the ``path`` column says which), allocation
  included;
* ``gibbs before``: the same step with torch's GEMM and the unfused elementwise path, i.e.
  what boltzlab did before the backend and the fused kernel existed.

Ratios are to ``fastest`` (targets: gibbs ≤ 1.15 at 1 thread and 1,000 chains; flip/gibbs ≤
1.05). Timings are interleaved round-robin and summarised by their median, so a noisy
neighbour hits every variant alike; each block starts after a 0.1 s pause, so that no pool of
spinning threads left by the previous block (OpenBLAS's) is timed with the next. The first call of each variant is a warm-up (it also
compiles the fused kernel once per process). Not part of the test suite.

Usage::

    python benchmarks/sweeps.py [--threads 1] [--chains 100 1000 10000] [--dtype float32]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch

import boltzlab as bl
from boltzlab import gemm
from boltzlab.operators import fused, one_region

# Environment variables that change what the backends do (docs/performance.md).
_ENVIRONMENT = (
    "OPENBLAS_CORETYPE",
    "OPENBLAS_THREAD_TIMEOUT",
    "OMP_WAIT_POLICY",
    "GOMP_SPINCOUNT",
    "BOLTZLAB_GEMM",
    "BOLTZLAB_FUSED",
)


def _time(function: Callable[[], object], repeats: int) -> float:
    start = time.perf_counter()
    for _ in range(repeats):
        function()
    return (time.perf_counter() - start) / repeats


def run(
    n_chains: int, *, dtype: torch.dtype, device: str, rounds: int, n_visible: int, n_hidden: int
) -> dict:
    generator = bl.rng.make_generator(0, device)
    model = bl.RBM(n_visible, n_hidden, generator=generator, weight_std=0.05, dtype=dtype, device=device)
    model.set_base_rate(
        (torch.rand(200, n_visible, generator=torch.Generator().manual_seed(1)) < 0.2).float()
    )
    chains = model.init_chains(n_chains, generator=generator).with_beta(1.0)
    v, h = chains.layers
    weights, b, c = model.weights.detach(), model.visible_bias.detach(), model.hidden_bias.detach()
    buffer_h = torch.empty(n_chains, n_hidden, dtype=dtype, device=device)
    buffer_v = torch.empty(n_chains, n_visible, dtype=dtype, device=device)

    def gemm_torch() -> None:
        torch.addmm(c, v, weights, out=buffer_h)
        torch.addmm(b, h, weights.t(), out=buffer_v)

    variants: dict[str, tuple[str | None, str | None, Callable[[], None]]] = {
        "gemm torch": (None, None, gemm_torch)
    }
    if device == "cpu":
        v_np, h_np, w_np = v.numpy(), h.numpy(), weights.numpy()
        out_h, out_v = buffer_h.numpy(), buffer_v.numpy()

        def gemm_openblas() -> None:
            np.matmul(v_np, w_np, out=out_h)
            np.matmul(h_np, w_np.T, out=out_v)

        variants["gemm openblas"] = (None, None, gemm_openblas)

    state = {}

    def step(name: str, operator: bl.operators.Operator) -> Callable[[], None]:
        state[name] = chains

        def function() -> None:
            state[name], _ = operator.step(model, state[name], generator=generator)

        return function

    variants["gibbs"] = (None, None, step("gibbs", bl.operators.get("gibbs")))
    variants["flip"] = (None, None, step("flip", bl.operators.get("flip")))
    variants["gibbs before"] = ("torch", "off", step("gibbs before", bl.operators.get("gibbs")))

    flops = 2 * 2 * n_chains * n_visible * n_hidden
    repeats = max(4, int(8e9 / flops))  # at least 8 GFLOP of GEMM per timing
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for round_index in range(rounds + 1):
        for name, (backend, mode, function) in variants.items():
            gemm.set_backend(backend)
            fused.set_mode(mode)
            # Let the previous block's thread pools go idle: OpenBLAS's workers keep spinning
            # after a product, which would slow whichever variant comes next.
            time.sleep(0.1)
            if device == "cuda":
                torch.cuda.synchronize()
            elapsed = _time(function, repeats if round_index else 2)
            if device == "cuda":
                torch.cuda.synchronize()
                elapsed = _time(function, repeats)
            if round_index:  # round 0 warms up: allocator, thread pools, compilation
                samples[name].append(elapsed)
    gemm.set_backend(None)
    fused.set_mode(None)
    uses = one_region.uses_one_region(bl.operators.get("gibbs"), model, chains, generator)
    path = "one region" if uses else ("fused" if fused.uses_fused(buffer_h) else "unfused")
    medians = {name: statistics.median(values) for name, values in samples.items()}
    gemms = [name for name in medians if name.startswith("gemm")]
    medians["fastest"] = min(medians[name] for name in gemms)
    gflops = {name.split()[1]: flops / medians[name] / 1e9 for name in gemms}
    return {"n_chains": n_chains, "seconds": medians, "gflops": gflops, "path": path}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--chains", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--visible", type=int, default=784)
    parser.add_argument("--hidden", type=int, default=500)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    # OpenBLAS's pool at the same count even when no library product syncs it (the one-region
    # path sets OpenBLAS to one thread inside its region, or multiplies with ATen's GEMM), so
    # that "gemm openblas" is timed on --threads threads.
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=args.threads, user_api="blas")
    dtype = getattr(torch, args.dtype)
    fused_note = f"fused kernel {fused.mode()} (from {fused.MIN_FUSED_UNITS:,} units)"
    # What pins or slows the BLAS and OpenMP pools, so that two runs can be compared.
    from threadpoolctl import threadpool_info

    kernels = [
        info.get("architecture") for info in threadpool_info() if info.get("internal_api") == "openblas"
    ]
    settings = ", ".join(f"{name}={os.environ[name]}" for name in _ENVIRONMENT if name in os.environ)
    print(f"OpenBLAS kernel: {', '.join(map(str, kernels)) or 'none'}; environment: {settings or 'no pins'}")
    print(
        f"RBM {args.visible}x{args.hidden} {args.dtype} on {args.device}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s), GEMM backend in use: {gemm.backend(dtype)} (under {gemm.SMALL_ROWS} rows: {gemm.backend(dtype, rows=1)}), {fused_note}; "
        f"median of {args.rounds} interleaved rounds"
    )
    header = (
        f"{'chains':>7} {'torch GF/s':>10} {'openblas GF/s':>13} {'chain-sweeps/s':>15} "
        f"{'gibbs/fastest':>13} {'flip/fastest':>12} {'flip/gibbs':>10} {'before/fastest':>14} {'speed-up':>8}"
    )
    print(header)
    for n_chains in args.chains:
        result = run(
            n_chains,
            dtype=dtype,
            device=args.device,
            rounds=args.rounds,
            n_visible=args.visible,
            n_hidden=args.hidden,
        )
        seconds, gflops = result["seconds"], result["gflops"]
        fastest = seconds["fastest"]
        openblas = f"{gflops['openblas']:>13.1f}" if "openblas" in gflops else f"{'—':>13}"
        print(
            f"{n_chains:>7} {gflops['torch']:>10.1f} {openblas} {n_chains / seconds['gibbs']:>15,.0f} "
            f"{seconds['gibbs'] / fastest:>13.3f} {seconds['flip'] / fastest:>12.3f} "
            f"{seconds['flip'] / seconds['gibbs']:>10.3f} {seconds['gibbs before'] / fastest:>14.3f} "
            f"{seconds['gibbs before'] / seconds['gibbs']:>8.2f}  {result['path']}"
        )


if __name__ == "__main__":
    main()
