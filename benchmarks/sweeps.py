"""Chain-sweeps per second of a 784×500 RBM, as ratios to its own GEMMs measured in the same run.

A sweep of an RBM is two matrix products (``v @ W`` and ``h @ Wᵀ``) plus elementwise work and
random numbers. This benchmark times, for 100, 1,000 and 10,000 chains:

* ``gemm``: the two matrix products alone (``torch.addmm`` into preallocated buffers),
* ``gibbs`` and ``flip``: one full ``operator.step`` of boltzlab, allocation included,
* ``rand-ref``: a reference sweep written with ``torch.rand(...) < sigmoid(x)`` (what a
  careful but ordinary implementation does),

and prints each as a ratio to ``gemm`` (targets: sweep ≤ 1.3× its GEMMs at 1,000+ chains;
flip ≤ 1.05× Gibbs). Timings are interleaved round-robin and summarised by their median, so
a noisy neighbour hits every variant alike. Not part of the test suite.

Usage::

    python benchmarks/sweeps.py [--threads 1] [--chains 100 1000 10000] [--dtype float32]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

import boltzlab as bl


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
    gibbs, flip = bl.operators.get("gibbs"), bl.operators.get("flip")

    def gemm() -> None:
        torch.addmm(c, v, weights, out=buffer_h)
        torch.addmm(b, h, weights.t(), out=buffer_v)

    def rand_reference() -> None:
        hidden = (
            torch.rand(n_chains, n_hidden, generator=generator, dtype=dtype, device=device)
            < torch.sigmoid(torch.addmm(c, v, weights))
        ).to(dtype)
        (
            torch.rand(n_chains, n_visible, generator=generator, dtype=dtype, device=device)
            < torch.sigmoid(torch.addmm(b, hidden, weights.t()))
        ).to(dtype)

    state = {"gibbs": chains, "flip": chains}

    def step(name: str, operator: bl.operators.Operator) -> Callable[[], None]:
        def function() -> None:
            state[name], _ = operator.step(model, state[name], generator=generator)

        return function

    variants = {
        "gemm": gemm,
        "gibbs": step("gibbs", gibbs),
        "flip": step("flip", flip),
        "rand-ref": rand_reference,
    }
    flops = 2 * 2 * n_chains * n_visible * n_hidden
    repeats = max(1, int(2e9 / flops))  # about 2 GFLOP of GEMM per timing
    for function in variants.values():  # warm-up: allocator, MKL thread pools
        _time(function, 2)
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, function in variants.items():
            if device == "cuda":
                torch.cuda.synchronize()
            elapsed = _time(function, repeats)
            if device == "cuda":
                torch.cuda.synchronize()
                elapsed = _time(function, repeats)
            samples[name].append(elapsed)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    return {"n_chains": n_chains, "seconds": medians, "gflops_gemm": flops / medians["gemm"] / 1e9}


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
    dtype = getattr(torch, args.dtype)
    print(
        f"RBM {args.visible}x{args.hidden} {args.dtype} on {args.device}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s), median of {args.rounds} interleaved rounds"
    )
    header = (
        f"{'chains':>7} {'GEMM GF/s':>9} {'chain-sweeps/s':>15} {'gibbs/gemm':>10} "
        f"{'flip/gemm':>9} {'flip/gibbs':>10} {'rand-ref/gemm':>13}"
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
        seconds = result["seconds"]
        print(
            f"{n_chains:>7} {result['gflops_gemm']:>9.1f} {n_chains / seconds['gibbs']:>15,.0f} "
            f"{seconds['gibbs'] / seconds['gemm']:>10.3f} {seconds['flip'] / seconds['gemm']:>9.3f} "
            f"{seconds['flip'] / seconds['gibbs']:>10.3f} {seconds['rand-ref'] / seconds['gemm']:>13.3f}"
        )


if __name__ == "__main__":
    main()
