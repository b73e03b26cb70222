"""Is a tempered estimate wrong because of its level weights or because its chains do not mix?

On a model small enough to enumerate, place the default ladder (a pilot annealing run, as
``estimate_log_z(method="rts")`` does), compute the exact ``log Z(β_k)`` at every level, and
print how far the pilot's starting weights are from them; then run RTS with the *exact*
weights, frozen (no initial iterations), for a fixed number of sweeps, and print its error,
its verdict and how the samples spread over the levels (with exact weights and the uniform
prior every level should hold ``1/K`` of them). If RTS with exact weights is still wrong, no
adaptation of the weights can fix the temperature route on that model: its chains do not cross
between the phases often enough (docs/trust.md, "Open"). Not part of the test suite.

Usage::

    python benchmarks/tempered_oracle.py MODEL.safetensors [--sweeps 4000] [--levels 100]
"""

from __future__ import annotations

import argparse
import time

import torch

import boltzlab as bl
from boltzlab.estimators.tempered.ladders import adaptive_ladder
from boltzlab.io.model_files import load_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="A saved RBM small enough to enumerate.")
    parser.add_argument("--sweeps", type=int, default=4000, help="Long-run sweeps per chain.")
    parser.add_argument("--levels", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    arguments = parser.parse_args()
    torch.set_num_threads(arguments.threads)
    model = load_model(arguments.model)
    placed = adaptive_ladder(model, arguments.levels, generator=arguments.seed)
    betas = placed.ladder.betas.tolist()
    started = time.perf_counter()
    exact = [bl.exact_log_z(model, beta=beta) for beta in betas]
    print(f"exact log Z at {len(betas)} levels in {time.perf_counter() - started:.0f} s")
    print(" level   beta   exact log Z(beta)  pilot - exact")
    step = max(1, len(betas) // 25)
    for k in [*range(0, len(betas) - 1, step), len(betas) - 1]:
        print(f"{k:6d} {betas[k]:.4f} {exact[k]:18.3f} {float(placed.initial_log_z[k]) - exact[k]:+14.3f}")
    started = time.perf_counter()
    estimate = bl.estimate_log_z(
        model, method="rts", generator=arguments.seed, ladder=betas, initial_log_z=exact,
        n_initial_iterations=0, n_sweeps=arguments.sweeps, max_sweeps=arguments.sweeps, lower_bound_sweeps=0,
    )  # fmt: skip
    print(
        f"RTS with exact, frozen weights: error {estimate.log_z - exact[-1]:+.4f} ± {estimate.stderr:.4f} "
        f"({estimate.status}; {time.perf_counter() - started:.0f} s)"
    )
    for warning in estimate.warnings:
        print(f"  - {warning}")
    occupancy = estimate.info.occupancy
    print(f" level   beta   share of samples (1/K = {1 / len(betas):.4f})   log Z_k - exact")
    for k in [*range(0, len(betas) - 1, step), len(betas) - 1]:
        print(
            f"{k:6d} {betas[k]:.4f} {float(occupancy[k]):10.4f} {float(estimate.info.log_z_levels[k]) - exact[k]:+25.3f}"
        )


if __name__ == "__main__":
    main()
