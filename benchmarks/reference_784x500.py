"""A 784×500 RBM with a reference log Z, and RTS against AIS at matched sweeps on it.

The hard-model suite (``hard_models.py``) scores every estimator on models small enough to
enumerate (≤ 24 hidden units), where AIS is already easy on CD-trained models. The RTS paper
(Carlson et al. 2016) compares RTS and AIS on 784×500 MNIST RBMs, where nothing can be
enumerated. This script builds that regime:

1. **Model.** A 784×500 RBM trained on binarised MNIST with PCD-1 (100 persistent chains,
   10,000 updates of 100 examples, learning rate 0.05 decaying linearly to 0, base-rate base
   fitted from the training set). Cached in ``--cache``.
2. **Reference log Z.** Several long, independent AIS runs (different seeds and schedules:
   the SM08 grid stretched to ``--reference-temperatures`` and VAROPT with the same number of
   increments). The reference is their inverse-variance mean, accepted only when every pair
   agrees within 4 combined standard errors; otherwise the script says so and keeps no
   reference. A certified lower bound from chains started at 2,000 training images is shown
   beside it (it must lie below).
3. **Matched sweeps.** AIS (SM08, 100 chains) and RTS (100 chains, its default ladder) at the
   same chain-sweep budgets, a few seeds each: error against the reference, z, the verdict
   and the time.

Two models (``--model``): ``pcd1`` as above, and ``cd25``, trained the same way with CD-25 as
Salakhutdinov & Murray (2008) trained the RTS paper's model (cached in ``runs/ref-784x500-cd25``
with its training trajectory; results in ``reference_784x500_cd25.*``). ``--routes`` adds
independent routes to the reference: trajectory AIS along the saved training trajectory and
MBAR on one long tempered run; a flagged run is reported and left out of the reference.

Usage::

    python benchmarks/reference_784x500.py                  # everything (~1–2 h on 1 thread)
    python benchmarks/reference_784x500.py --model cd25 --stage reference --reference-runs 2 \
        --routes trajectory-ais mbar
    python benchmarks/reference_784x500.py --model cd25 --stage defaults   # every default, scored
    python benchmarks/reference_784x500.py --stage reference --reference-runs 2
    python benchmarks/reference_784x500.py --stage compare --budgets 1450000 --seeds 2

Every finished run is appended to ``reference_784x500.json`` in ``--out`` (default
``benchmarks/results``) and skipped when the script is started again, so a long run can be
stopped and resumed; ``reference_784x500.md`` is rewritten from it at the end of each stage.
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import torch

import boltzlab as bl

ROOT = Path(__file__).resolve().parent.parent
N_HIDDEN = 500
TRAINING = {
    "algorithm": "pcd",
    "k": 1,
    "n_chains": 100,
    "n_updates": 10_000,
    "batch_size": 100,
    "learning_rate": 0.05,
    "lr_schedule": "linear",
    "seed": 0,
}
# The two models of the papers: PCD-1 (the cached model of earlier runs, whose files keep their
# names) and CD-25, as Salakhutdinov & Murray (2008) trained the RTS paper's model; same updates.
MODELS = {
    "pcd1": TRAINING,
    "cd25": {**TRAINING, "algorithm": "cd", "k": 25},
}
AGREEMENT_Z = 4.0  # pairwise |difference| / combined s.e. that the reference runs must stay under


def _row(estimate: Any, seconds: float, **extra: Any) -> dict[str, Any]:
    return {
        **extra,
        "method": estimate.method,
        "log_z": estimate.log_z,
        "stderr": estimate.stderr,
        "cost_sweeps": int(estimate.cost_sweeps),
        "reliable": bool(estimate.reliable),
        "warnings": list(estimate.warnings),
        "seconds": round(seconds, 1),
    }


def _load_results(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text()) if path.is_file() else []


def _save_results(path: Path, rows: list[dict[str, Any]]) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(rows, indent=1) + "\n")
    os.replace(temporary, path)


def obtain_model(
    cache: Path, data_root: Path | None, training: dict[str, Any]
) -> tuple[bl.RBM, torch.Tensor]:
    """The cached 784×500 model (trained here with ``training`` when missing) and the training images."""
    train = bl.data.load("mnist", root=data_root).train
    path, sidecar = cache / "model.safetensors", cache / "model.json"
    if path.is_file() and sidecar.is_file() and json.loads(sidecar.read_text()) == training:
        return bl.RBM.load(path), train
    cache.mkdir(parents=True, exist_ok=True)
    model = bl.RBM(n_visible=train.shape[1], n_hidden=N_HIDDEN, generator=training["seed"])
    # CD keeps no persistent chains, so it takes no chain count.
    skip = {"seed"} | ({"n_chains"} if training["algorithm"] == "cd" else set())
    options = {key: value for key, value in training.items() if key not in skip}
    started = time.perf_counter()
    result = bl.train(model, train, generator=training["seed"] + 1, progress=True, **options)
    print(f"trained in {time.perf_counter() - started:.0f} s")
    model.save(path)
    if result.trajectory is not None:  # the training trajectory: trajectory AIS, RTS and MBAR's route
        result.trajectory.save(cache / bl.models.trajectory.TRAJECTORY_FILE)
    sidecar.write_text(json.dumps(training) + "\n")
    return model, train


def reference_runs(
    n_runs: int, n_temperatures: int, routes: list[str], mbar_sweeps: int
) -> list[dict[str, Any]]:
    """The long runs: AIS with schedules alternating between SM08 and VAROPT (seeds 101, 102,
    …), then one run of each other route (seeds 201, 202, …): trajectory AIS with as many
    steps as AIS has temperatures, and MBAR on one long tempered run of 200 chains."""
    schedules = ("sm08", "varopt")
    specs: list[dict[str, Any]] = [
        {
            "stage": "reference",
            "method": "ais",
            "schedule": schedules[i % 2],
            "n_temperatures": n_temperatures,
            "seed": 101 + i,
        }
        for i in range(n_runs)
    ]
    for i, route in enumerate(routes):
        length = (
            {"n_temperatures": n_temperatures} if route == "trajectory-ais" else {"n_sweeps": mbar_sweeps}
        )
        specs.append({"stage": "reference", "method": route, "schedule": "", **length, "seed": 201 + i})
    return specs


def combine_reference(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Inverse-variance mean of the reference runs, or ``None`` when a pair disagrees."""
    # A flagged run is shown in the table but is no reference: its error bar is not trusted.
    runs = [row for row in rows if row["stage"] == "reference" and row["reliable"]]
    if len(runs) < 2:
        return None
    worst = 0.0
    for i, first in enumerate(runs):
        for second in runs[i + 1 :]:
            combined = math.hypot(first["stderr"], second["stderr"])
            worst = max(worst, abs(first["log_z"] - second["log_z"]) / combined)
    weights = [1.0 / row["stderr"] ** 2 for row in runs]
    mean = sum(w * row["log_z"] for w, row in zip(weights, runs, strict=True)) / sum(weights)
    return {
        "log_z": mean,
        "stderr": 1.0 / math.sqrt(sum(weights)),
        "runs": len(runs),
        "worst_pair_z": worst,
        "agree": worst <= AGREEMENT_Z,
        "routes": sorted({row["method"] for row in runs}),
    }


# The methods whose defaults the `defaults` stage scores (RAISE needs data: `boltzlab evaluate`).
DEFAULT_METHODS = ("ais", "rts", "ts", "ti", "ti-rb", "mbar")


def run_one(model: bl.RBM, spec: dict[str, Any], check_data: torch.Tensor, cache: Path) -> dict[str, Any]:
    options: dict[str, Any] = {"generator": spec["seed"], "check_data": check_data}
    if spec["stage"] == "defaults":  # every option the library's default, no data
        options = {"generator": spec["seed"]}
    elif spec["method"] == "ais":
        options |= {"n_chains": 100, "schedule": spec["schedule"], "n_temperatures": spec["n_temperatures"]}
    elif spec["method"] == "trajectory-ais":
        trajectory = cache / bl.models.trajectory.TRAJECTORY_FILE
        options |= {"n_chains": 100, "n_steps": spec["n_temperatures"], "trajectory": trajectory}
    elif spec["stage"] == "reference":  # MBAR's long run: more chains, since chains cross rarely here
        options |= {"n_chains": 200, "n_sweeps": spec["n_sweeps"]}
    else:
        options |= {"n_chains": 100, "n_sweeps": spec["n_sweeps"]}
    started = time.perf_counter()
    estimate = bl.estimate_log_z(model, method=spec["method"], **options)
    return _row(estimate, time.perf_counter() - started, **spec)


def compare_runs(budgets: list[int], n_seeds: int) -> list[dict[str, Any]]:
    """AIS and RTS at each chain-sweep budget: AIS spends it on increments of 100 chains; RTS
    on long-run sweeps of 100 chains (its initial iterations come on top and are reported)."""
    specs = []
    for budget in budgets:
        for seed in range(n_seeds):
            specs.append(
                {"stage": "compare", "method": "ais", "schedule": "sm08", "budget": budget, "seed": seed}
                | {"n_temperatures": budget // 100}
            )
            specs.append(
                {
                    "stage": "compare",
                    "method": "rts",
                    "budget": budget,
                    "seed": seed,
                    "n_sweeps": budget // 100,
                }
            )
    return specs


def _same(row: dict[str, Any], spec: dict[str, Any]) -> bool:
    return all(row.get(key) == value for key, value in spec.items())


def report(rows: list[dict[str, Any]], bound: dict[str, Any] | None, name: str = "pcd1") -> str:
    reference = combine_reference(rows)
    label = {"pcd1": "PCD-1", "cd25": "CD-25"}[name]
    lines = [f"# A 784×500 MNIST RBM ({label}): reference log Z and the estimators scored against it", ""]
    lines.append(f"Training: {json.dumps(MODELS[name])}")
    lines.append("")
    lines.append("## Reference runs")
    lines.append("")
    lines.append(
        "AIS: 100 chains × K temperatures; trajectory AIS: 100 chains × K steps along the training "
        "trajectory; MBAR: 200 chains × K long-run sweeps of tempered sampling. A flagged run is shown "
        "and left out of the reference."
    )
    lines.append("")
    lines.append("| route | schedule | K | seed | log Z | s.e. | verdict | time (s) |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for row in rows:
        if row["stage"] == "reference":
            verdict = "reliable" if row["reliable"] else "UNRELIABLE: " + "; ".join(row["warnings"])[:160]
            length = row.get("n_temperatures", row.get("n_sweeps"))
            lines.append(
                f"| {row['method']} | {row.get('schedule', '')} | {length} | {row['seed']} | {row['log_z']:.4f} | "
                f"{row['stderr']:.4f} | {verdict} | {row['seconds']:.0f} |"
            )
    lines.append("")
    if reference is None:
        lines.append("No reference yet (fewer than two reliable runs).")
    else:
        state = "agree" if reference["agree"] else "DO NOT AGREE: no reference"
        lines.append(
            f"Reference: **{reference['log_z']:.4f} ± {reference['stderr']:.4f}** from {reference['runs']} "
            f"reliable runs of {', '.join(reference['routes'])} "
            f"(worst pair {reference['worst_pair_z']:.2f} combined s.e.; they {state})."
        )
    if bound is not None:
        lines.append(
            f"Certified lower bound (1,000 chains × 200 sweeps from training images): {bound['log_z']:.4f} "
            f"(missing mass {bound['missing_mass']:.2f}, {bound['n_states']} distinct hidden states)."
        )
    defaults = [row for row in rows if row["stage"] == "defaults"]
    if defaults:
        lines += ["", "## Every method with its defaults (no data, generator 0)", ""]
        lines.append("| method | log Z | s.e. | error | z | verdict | chain-sweeps | time (s) |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for row in defaults:
            error = z = float("nan")
            if reference is not None and reference["agree"]:
                error = row["log_z"] - reference["log_z"]
                z = error / math.hypot(row["stderr"], reference["stderr"])
            verdict = "reliable" if row["reliable"] else "UNRELIABLE: " + "; ".join(row["warnings"])[:160]
            lines.append(
                f"| {row['method']} | {row['log_z']:.4f} | {row['stderr']:.4f} | {error:+.4f} | {z:+.1f} | "
                f"{verdict} | {row['cost_sweeps']} | {row['seconds']:.0f} |"
            )
    compared = [row for row in rows if row["stage"] == "compare"]
    if compared:
        lines += ["", "## Matched sweeps", ""]
        lines.append(
            "| budget (chain-sweeps) | method | seed | log Z | s.e. | error | z | verdict | sweeps spent | time (s) |"
        )
        lines.append("|---|---|---|---|---|---|---|---|---|---|")
        for row in sorted(compared, key=lambda r: (r["budget"], r["method"], r["seed"])):
            error = z = float("nan")
            if reference is not None and reference["agree"]:
                error = row["log_z"] - reference["log_z"]
                z = (
                    error / math.hypot(row["stderr"], reference["stderr"])
                    if row["stderr"] > 0
                    else float("inf")
                )
            verdict = "reliable" if row["reliable"] else "UNRELIABLE: " + "; ".join(row["warnings"])[:160]
            lines.append(
                f"| {row['budget']} | {row['method']} | {row['seed']} | {row['log_z']:.4f} | {row['stderr']:.4f} | "
                f"{error:+.4f} | {z:+.1f} | {verdict} | {row['cost_sweeps']} | {row['seconds']:.0f} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--stage", choices=("train", "reference", "compare", "defaults", "all"), default="all"
    )
    parser.add_argument("--model", choices=tuple(MODELS), default="pcd1", help="Which 784×500 model.")
    parser.add_argument("--cache", type=Path, default=None, help="Default runs/ref-784x500[-cd25].")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--data-root", type=Path, default=None)
    parser.add_argument("--reference-runs", type=int, default=4)
    parser.add_argument("--reference-temperatures", type=int, default=100_000)
    parser.add_argument(
        "--routes",
        nargs="+",
        choices=("trajectory-ais", "mbar"),
        default=[],
        help="Reference routes besides the AIS runs of --reference-runs (trajectory AIS needs the training "
        "trajectory).",
    )
    parser.add_argument("--mbar-sweeps", type=int, default=20_000)
    parser.add_argument("--budgets", type=int, nargs="+", default=[1_450_000, 5_800_000])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    arguments = parser.parse_args(argv)
    torch.set_num_threads(arguments.threads)
    name = arguments.model
    suffix = "" if name == "pcd1" else f"_{name}"  # the PCD-1 files keep their first names
    cache = arguments.cache or ROOT / "runs" / ("ref-784x500" + suffix.replace("_", "-"))
    model, train = obtain_model(cache, arguments.data_root, MODELS[name])
    if arguments.stage == "train":
        return
    check = train[torch.randperm(train.shape[0], generator=torch.Generator().manual_seed(7))[:2000]]
    arguments.out.mkdir(parents=True, exist_ok=True)
    results_path = arguments.out / f"reference_784x500{suffix}.json"
    rows = _load_results(results_path)
    specs: list[dict[str, Any]] = []
    if arguments.stage in ("reference", "all"):
        specs += reference_runs(
            arguments.reference_runs,
            arguments.reference_temperatures,
            arguments.routes,
            arguments.mbar_sweeps,
        )
    if arguments.stage in ("compare", "all"):
        specs += compare_runs(arguments.budgets, arguments.seeds)
    if arguments.stage in ("defaults", "all"):
        specs += [{"stage": "defaults", "method": method, "seed": 0} for method in DEFAULT_METHODS]
    for spec in specs:
        if any(_same(row, spec) for row in rows):
            continue
        row = run_one(model, spec, check, cache)
        print(
            json.dumps(
                {
                    key: row[key]
                    for key in ("stage", "method", "seed", "log_z", "stderr", "reliable", "seconds")
                }
            )
        )
        rows.append(row)
        _save_results(results_path, rows)
    bound_path = arguments.out / f"reference_784x500{suffix}_bound.json"
    if not bound_path.is_file():
        bound = bl.estimators.verdict.certified_lower_bound(model, data=check, generator=0)
        bound_path.write_text(json.dumps(dataclasses.asdict(bound) | {"tight": bound.tight}) + "\n")
    text = report(rows, json.loads(bound_path.read_text()), name)
    (arguments.out / f"reference_784x500{suffix}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
