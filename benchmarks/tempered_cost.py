"""Wall time per chain-sweep of the tempered estimators against AIS on a 784×500 RBM.

The RTS paper's premise is that tempered sampling gives log Z at the cost of its sweeps.
Each tempered step also evaluates the summed-out density of every chain at every level of
the ladder (``n·K·J`` softplus; TI-RB also ``n·K·J`` sigmoids), which dominated the step
before :mod:`boltzlab.level_sums`. This script times, in one process:

* AIS (SM08 grid cut to ``--temperatures`` increments, fixed chains: no chain budget);
* RTS, TS, TI, TI-RB and MBAR on a linear ladder of ``--levels`` levels with fixed budgets
  (``--initial-iterations`` of ``--initial-sweeps`` sweeps, then ``--sweeps`` sweeps);

each with the level-sums kernel off (the float64 torch path: "before") and in its default
``auto`` mode ("after"), at each ``--chains``. Every figure is wall seconds divided by the
result's ``cost_sweeps`` (chain-sweeps), and the ratio to AIS's figure in the same mode and
run. The model is the cached 784×500 PCD-1 MNIST RBM of ``reference_784x500.py`` when it
is there (``--model``), else a random 784×500 RBM with weights of scale 0.05.

    OMP_NUM_THREADS=1 python benchmarks/tempered_cost.py --chains 100 1000

Not part of the test suite; figures are ratios measured in the same run (machines here are
noisy). Results go to ``--out`` (default ``benchmarks/results/tempered_cost.md``).
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path
from typing import Any

import torch

import boltzlab as bl
from boltzlab import level_sums
from boltzlab.estimators.record import get_record

ROOT = Path(__file__).resolve().parent.parent
TEMPERED = ("rts", "ts", "ti", "ti-rb", "mbar")


def load_model(path: Path) -> tuple[bl.RBM, str]:
    """The cached trained model, or a random one of the same size."""
    if path.is_file():
        return bl.RBM.load(path), f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}"
    model = bl.RBM(n_visible=784, n_hidden=500, generator=0)
    with torch.no_grad():
        model.weights.copy_(0.05 * torch.randn(784, 500, generator=torch.Generator().manual_seed(0)))
    return model, "random 784×500 RBM (weights × 0.05)"


def time_method(model: bl.RBM, method: str, n_chains: int, arguments: argparse.Namespace) -> dict[str, Any]:
    """One fixed-budget run: seconds, chain-sweeps and seconds per chain-sweep."""
    record = get_record(method)
    if method == "ais":
        options: dict[str, Any] = {"n_chains": n_chains, "n_temperatures": arguments.temperatures}
    else:
        options = {
            "n_chains": n_chains,
            "ladder": "linear",
            "n_temperatures": arguments.levels,
            "n_sweeps": arguments.sweeps,
            "n_initial_iterations": arguments.initial_iterations,
            "initial_sweeps": arguments.initial_sweeps,
        }
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimate = record.run(model, generator=0, **options)
    seconds = time.perf_counter() - started
    return {
        "method": method,
        "chains": n_chains,
        "seconds": seconds,
        "cost_sweeps": int(estimate.cost_sweeps),
        "per_sweep_us": 1e6 * seconds / estimate.cost_sweeps,
        "log_z": estimate.log_z,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=ROOT / "runs" / "ref-784x500" / "model.safetensors")
    parser.add_argument("--chains", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--temperatures", type=int, default=1000, help="AIS increments")
    parser.add_argument("--levels", type=int, default=100, help="K of the tempered ladder")
    parser.add_argument("--sweeps", type=int, default=300, help="long-run sweeps of the tempered runs")
    parser.add_argument("--initial-iterations", type=int, default=2)
    parser.add_argument("--initial-sweeps", type=int, default=50)
    parser.add_argument("--methods", nargs="+", default=["ais", *TEMPERED])
    parser.add_argument("--modes", nargs="+", default=["off", "auto"], choices=["off", "auto"])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "tempered_cost.md")
    arguments = parser.parse_args()

    model, described = load_model(arguments.model)
    rows = []
    for mode in arguments.modes:
        level_sums.set_mode(mode)
        if mode == "auto":  # the first use builds or loads the kernel: not part of any timing
            level_sums.uses_kernel(1, level_sums.MIN_ELEMENTS, torch.zeros(1, 1))
        for n_chains in arguments.chains:
            for method in arguments.methods:
                row = {"mode": mode, **time_method(model, method, n_chains, arguments)}
                rows.append(row)
                print(
                    f"{mode:>4} {n_chains:>5} chains {method:>6}: {row['per_sweep_us']:8.1f} µs per chain-sweep "
                    f"({row['seconds']:.1f} s, {row['cost_sweeps']} chain-sweeps)",
                    flush=True,
                )
    level_sums.set_mode(None)

    def ais_figure(mode: str, n_chains: int) -> float:
        return next(
            r["per_sweep_us"]
            for r in rows
            if r["method"] == "ais" and r["mode"] == mode and r["chains"] == n_chains
        )

    lines = [
        "# Tempered estimators against AIS: wall time per chain-sweep at 784×500",
        "",
        f"Model: {described}. Threads: {torch.get_num_threads()}. AIS: {arguments.temperatures} increments; "
        f"tempered: linear ladder of {arguments.levels} levels, {arguments.initial_iterations} initial iterations "
        f"of {arguments.initial_sweeps} sweeps, {arguments.sweeps} long-run sweeps. `off`: level sums by the "
        "float64 torch path (before); `auto`: the compiled level-sums kernel (after).",
        "",
        "| mode | chains | method | µs per chain-sweep | × AIS (same mode) | seconds | chain-sweeps |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ratio = (
            row["per_sweep_us"] / ais_figure(row["mode"], row["chains"])
            if "ais" in arguments.methods
            else float("nan")
        )
        lines.append(
            f"| {row['mode']} | {row['chains']} | {row['method']} | {row['per_sweep_us']:.1f} | {ratio:.2f} | "
            f"{row['seconds']:.1f} | {row['cost_sweeps']} |"
        )
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    arguments.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
