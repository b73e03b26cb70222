"""Do the tempered samplers sample the target? Mode mass on two-mode RBMs against the exact one.

The model is the 10×4 RBM of ``tests/harness.bimodal_rbm``: weights ``W_ij = s_i t_j m_ij``
with ``m ~ U[2, 3]`` and biases that make the energy symmetric under flipping every unit
except for a tilt ``tilt·s`` on the visible biases, so its two modes ("v ≈ s" and "v ≈ not s")
are separated by a barrier plain Gibbs does not cross, and carry unequal mass. With
``seed=0`` the default tilt 0.3 gives 95.1% / 4.9% and ``tilt=0.08`` gives 68.8% / 31.2%
(the case of docs/trust.md, "Samplers"). A sampler that starts its chains from the uniform
base and never crosses keeps about half of them in each mode.

For every tempered sampler with its defaults (``bl.sample(model, sampler=NAME)``), and for
st / ast / cast also with the CAST paper's settings (``adapt=False``: the paper's ladder and
weights adapted for ever, which is what the AST and CAST trainers use), the script reports
the β = 1 mass of the first mode with its standard error over independent chains
(``harness.mode_mass``), ``z`` against the exact mass, the sampler's verdict and, for the
frozen samplers, what learning their weights cost in chain-sweeps. Wall time per run is a
ratio to the plain Gibbs run of the same size in the same process.

Usage::

    python benchmarks/two_modes.py                     # 100 chains × 1000 sweeps, seed 0
    python benchmarks/two_modes.py --seeds 0 1 2 --burn-in 200

Not part of the timed test suite (``tests/test_two_modes_bench.py`` runs a tiny case).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# The model and the exact mode mass are the tests' own (one definition, used by both).
sys.path.insert(0, str(ROOT / "tests"))

import boltzlab as bl  # noqa: E402
from harness import bimodal_rbm, exact_mode_mass, mode_mass  # noqa: E402

SAMPLERS = ("pt", "tt", "st", "ast", "cast")
PAPER_SETTINGS = ("st", "ast", "cast")
TILTS = (0.3, 0.08)


def run_one(
    model: Any, pattern: Any, sampler: str, *, paper: bool, args: argparse.Namespace, seed: int
) -> dict:
    """One ``bl.sample`` run: mode mass, its s.e., verdict and cost."""
    options: dict[str, Any] = {"adapt": False} if paper else {}
    start = time.perf_counter()
    result = bl.sample(
        model,
        sampler=sampler,
        n_chains=args.chains,
        n_sweeps=args.sweeps,
        generator=seed,
        keep_every=1,
        burn_in=args.burn_in,
        **options,
    )
    seconds = time.perf_counter() - start
    mass, stderr = mode_mass(result.samples, pattern)
    adaptation = getattr(result.info, "adaptation", None)
    return {
        "mass": mass,
        "stderr": stderr,
        "reliable": result.reliable,
        "warning": result.warnings[0] if result.warnings else "",
        "adapt_cost": adaptation.cost_sweeps if adaptation is not None else 0,
        "seconds": seconds,
    }


def main(argv: list[str] | None = None) -> list[dict]:
    """Run the table; returns its rows (also printed as markdown)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chains", type=int, default=100)
    parser.add_argument("--sweeps", type=int, default=1000)
    parser.add_argument("--burn-in", type=int, default=0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--samplers", nargs="+", default=list(SAMPLERS), choices=SAMPLERS)
    parser.add_argument("--tilts", type=float, nargs="+", default=list(TILTS))
    parser.add_argument("--no-paper", action="store_true", help="Skip the adapt=False rows.")
    args = parser.parse_args(argv)

    rows = []
    print(
        "| tilt | exact | sampler | settings | seed | mode mass | s.e. | z | verdict | adaptation (chain-sweeps) | time / gibbs |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for tilt in args.tilts:
        model, pattern = bimodal_rbm(10, 4, seed=0, tilt=tilt)
        exact = exact_mode_mass(model, pattern)
        for seed in args.seeds:
            start = time.perf_counter()
            bl.sample(model, sampler="plain", n_chains=args.chains, n_sweeps=args.sweeps, generator=seed)
            reference = time.perf_counter() - start
            for sampler in args.samplers:
                for paper in (False, True):
                    if paper and (args.no_paper or sampler not in PAPER_SETTINGS):
                        continue
                    row = run_one(model, pattern, sampler, paper=paper, args=args, seed=seed)
                    z = (row["mass"] - exact) / row["stderr"] if row["stderr"] > 0 else float("inf")
                    row |= {
                        "tilt": tilt,
                        "exact": exact,
                        "sampler": sampler,
                        "paper": paper,
                        "seed": seed,
                        "z": z,
                    }
                    rows.append(row)
                    verdict = "reliable" if row["reliable"] else f"UNRELIABLE: {row['warning'][:90]}"
                    print(
                        f"| {tilt} | {exact:.4f} | {sampler} | {'paper (adapt=False)' if paper else 'default'} "
                        f"| {seed} | {row['mass']:.4f} | {row['stderr']:.4f} | {z:+.1f} | {verdict} "
                        f"| {row['adapt_cost']:,} | {row['seconds'] / reference:.1f} |",
                        flush=True,
                    )
    return rows


if __name__ == "__main__":
    main()
