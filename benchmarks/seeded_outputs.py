"""Seeded outputs of the public API, to show that a refactor changed no result bit for bit.

Runs a fixed set of seeded calls (every estimator, every sampler with every operator,
every training algorithm, checkpointed runs resumed) on tiny models and writes one line per
result: a key and a digest of everything the call returned (floats by their exact bits,
tensors by their bytes, verdicts and warnings by their text). Run it on the commit before a
change (``--write before.tsv``) and after it (``--compare before.tsv``): the second run
lists every result that differs and exits 1 if any does.

    BOLTZLAB_GEMM=torch OMP_NUM_THREADS=1 python benchmarks/seeded_outputs.py --write before.tsv
    BOLTZLAB_GEMM=torch OMP_NUM_THREADS=1 python benchmarks/seeded_outputs.py --compare before.tsv

``BOLTZLAB_GEMM=torch`` keeps the matrix-product backend fixed: the default (``auto``) picks it
by timing, so two runs on a loaded machine could pick differently and round differently.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import math
import os
import struct
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

import boltzlab as bl

SEEDS = range(10)
# Fields that hold wall-clock time (a training record's ``time``): they differ between any two runs.
WALL_CLOCK_FIELDS = frozenset({"time", "seconds", "elapsed"})


def _feed(digest: Any, value: Any) -> None:
    """Hash ``value`` exactly: floats by their bits, tensors by dtype, shape and bytes."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().contiguous()
        digest.update(f"T{value.dtype}{tuple(value.shape)}".encode())
        digest.update(value.view(torch.uint8).numpy().tobytes() if value.numel() else b"")
    elif isinstance(value, np.ndarray):
        digest.update(f"A{value.dtype}{value.shape}".encode() + np.ascontiguousarray(value).tobytes())
    elif isinstance(value, bool | None | str | int):
        digest.update(repr(value).encode())
    elif isinstance(value, float):
        digest.update(b"F" + struct.pack("<d", value))
    elif isinstance(value, dict):
        for key in sorted(value, key=str):
            _feed(digest, str(key))
            _feed(digest, value[key])
    elif isinstance(value, list | tuple):
        digest.update(b"L%d" % len(value))
        for item in value:
            _feed(digest, item)
    elif dataclasses.is_dataclass(value):
        _feed(digest, type(value).__name__)
        for field in dataclasses.fields(value):
            if field.name in WALL_CLOCK_FIELDS:
                continue
            _feed(digest, field.name)
            _feed(digest, getattr(value, field.name))
    elif isinstance(value, torch.nn.Module):
        _feed(digest, {name: tensor for name, tensor in value.state_dict().items()})
    else:
        # Objects with no value semantics (an operator, a path): their type is what is stable.
        digest.update(type(value).__name__.encode())


def digest_of(value: Any) -> str:
    digest = hashlib.sha256()
    _feed(digest, value)
    return digest.hexdigest()[:20]


def estimate_fields(estimate: bl.LogZEstimate) -> dict[str, Any]:
    """What a user reads off an estimate (the info object's numbers included)."""
    return {
        "method": estimate.method,
        "log_z": estimate.log_z,
        "stderr": estimate.stderr,
        "verdict": estimate.verdict,
        "warnings": tuple(estimate.warnings),
        "cost_sweeps": estimate.cost_sweeps,
        "info": estimate.info,
    }


def _models() -> dict[str, torch.nn.Module]:
    sharp = bl.RBM(n_visible=9, n_hidden=4, generator=3)
    with torch.no_grad():
        sharp.weights.mul_(4.0)
    # Its base fitted to data: it keeps witness rows, the verdict's default start.
    sharp.set_base_rate(_data(9))
    return {
        "rbm7x3": bl.RBM(n_visible=7, n_hidden=3, generator=0),
        "rbm9x4-sharp": sharp,
        "dbm6x3x2": bl.DBM(layer_sizes=(6, 3, 2), generator=1),
    }


def _data(n_visible: int, seed: int = 5) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    prototypes = torch.rand(3, n_visible, generator=generator) < 0.5
    rows = prototypes[torch.randint(0, 3, (60,), generator=generator)]
    noise = torch.rand(rows.shape, generator=generator) < 0.1
    return (rows ^ noise).float()


ESTIMATOR_OPTIONS: dict[str, dict[str, Any]] = {
    "exact": {},
    "ais": {"n_chains": 20, "n_temperatures": 40, "lower_bound_sweeps": 20},
    "ais-grown": {"max_chains": 80, "n_temperatures": 30, "lower_bound_sweeps": 20},
    "anchored-ais": {"n_chains": 20, "n_temperatures": 30, "lower_bound_sweeps": 20},
    "rts": {"n_chains": 20, "n_temperatures": 10, "n_sweeps": 60, "lower_bound_sweeps": 20},
    "rts-grown": {"n_chains": 20, "n_temperatures": 10, "max_sweeps": 200, "lower_bound_sweeps": 20},
    "ts": {"n_chains": 20, "n_temperatures": 10, "n_sweeps": 60, "lower_bound_sweeps": 20},
    "ti": {"n_chains": 20, "n_temperatures": 10, "n_sweeps": 60, "lower_bound_sweeps": 20},
    "ti-rb": {"n_chains": 20, "n_temperatures": 10, "n_sweeps": 60, "lower_bound_sweeps": 20},
    "mbar": {"n_chains": 20, "n_temperatures": 10, "n_sweeps": 60, "lower_bound_sweeps": 20},
    "raise": {"n_chains": 4, "n_temperatures": 30, "lower_bound_sweeps": 20},
}


def estimator_results() -> Iterator[tuple[str, Any]]:
    models = _models()
    for name, model in models.items():
        data = _data(model.n_visible) if hasattr(model, "n_visible") else None
        for label, options in ESTIMATOR_OPTIONS.items():
            method = label.removesuffix("-grown")
            if name.startswith("dbm") and method in ("anchored-ais", "raise", "exact"):
                continue
            seeds = [0] if method == "exact" else SEEDS
            for seed in seeds:
                given = dict(options)
                if method == "raise":
                    given["data"] = data[:5]
                elif method != "exact" and seed % 2 and data is not None:
                    given["check_data"] = data
                elif method == "anchored-ais" and not getattr(model, "base_fitted", True):
                    given["anchor_data"] = data
                result = bl.estimate_log_z(model, method=method, generator=seed, **given)
                yield f"estimate/{name}/{label}/{seed}", estimate_fields(result)


def trajectory_results() -> Iterator[tuple[str, Any]]:
    data = _data(8, seed=9)
    for seed in range(3):
        model = bl.RBM(n_visible=8, n_hidden=3, generator=seed)
        trained = bl.train(
            model,
            data,
            algorithm="pcd",
            n_chains=20,
            n_updates=60,
            batch_size=20,
            learning_rate=0.1,
            generator=seed,
            snapshots=12,
        )
        yield f"trajectory/train/{seed}", (trained.model, trained.history)
        for method, options in (
            ("trajectory-ais", {"n_chains": 20, "n_steps": 4}),
            ("trajectory-rts", {"n_chains": 20, "n_sweeps": 60}),
            ("trajectory-mbar", {"n_chains": 20, "n_sweeps": 60}),
            ("rts", {"n_chains": 20, "n_temperatures": 10, "n_sweeps": 60}),
        ):
            for run in range(4):
                result = bl.estimate_log_z(
                    model,
                    method=method,
                    trajectory=trained.trajectory,
                    generator=10 * seed + run,
                    lower_bound_sweeps=20,
                    check_data=data,
                    **options,
                )
                yield f"trajectory/{method}/{seed}/{run}", estimate_fields(result)
        for run in range(4):
            result = bl.sample(
                model, sampler="ptt", trajectory=trained.trajectory, n_chains=8, n_sweeps=15, generator=run
            )
            yield f"trajectory/sample-ptt/{seed}/{run}", (result.chains.layers, result.samples, result.info)


def sampler_results() -> Iterator[tuple[str, Any]]:
    models = _models()
    for name in ("rbm7x3", "rbm9x4-sharp"):
        model = models[name]
        for sampler in bl.sampling.samplers():
            if sampler == "ptt":  # tempers along a training trajectory: trajectory_results
                continue
            for operator in ("gibbs", "flip", "mixture"):
                for seed in SEEDS:
                    result = bl.sample(
                        model, sampler=sampler, operator=operator, n_chains=8, n_sweeps=15, generator=seed
                    )
                    yield (
                        f"sample/{name}/{sampler}/{operator}/{seed}",
                        (
                            result.chains.layers,
                            result.samples,
                            result.info,
                        ),
                    )


def operator_results() -> Iterator[tuple[str, Any]]:
    models = _models()
    models["rbm64x40"] = bl.RBM(n_visible=64, n_hidden=40, generator=4)  # the fused sweep path
    for name, model in models.items():
        for operator_name in ("gibbs", "flip", "mixture"):
            operator = bl.operators.get(operator_name)
            for seed in range(25):
                generator = torch.Generator().manual_seed(seed)
                chains = model.init_chains(16, generator=generator)
                chains = chains.with_beta(torch.linspace(0.0, 1.0, 16, dtype=torch.float64))
                for _ in range(3):
                    chains, info = operator.step(model, chains, generator=generator)
                yield f"operator/{name}/{operator_name}/{seed}", (chains.layers, info.flip_rate)


TRAINING = {
    "cd": {"k": 1},
    "pcd": {"n_chains": 20},
    "fpcd": {"n_chains": 20},
    "pt": {"n_chains": 10},
    "ast": {"n_chains": 10},
    "cast": {"n_chains": 10},
    "trans-sap": {"n_chains": 10},
    "rts": {"n_chains": 10},
}


def training_results() -> Iterator[tuple[str, Any]]:
    data = _data(9, seed=11)
    for algorithm, options in TRAINING.items():
        for seed in range(5):
            for operator in ("gibbs", "flip"):
                model = bl.RBM(n_visible=9, n_hidden=4, generator=seed)
                result = bl.train(
                    model,
                    data,
                    algorithm=algorithm,
                    operator=operator,
                    n_updates=12,
                    batch_size=20,
                    learning_rate=0.05,
                    generator=seed,
                    snapshots=None,
                    **options,
                )
                yield (
                    f"train/{algorithm}/{operator}/{seed}",
                    (result.model, result.history, result.final_chains),
                )
    dbm_data = _data(6, seed=12)
    for seed in range(5):
        model = bl.DBM(layer_sizes=(6, 3, 2), generator=seed)
        result = bl.train(
            model,
            dbm_data,
            algorithm="pcd",
            n_chains=10,
            n_updates=10,
            batch_size=20,
            learning_rate=0.05,
            generator=seed,
        )
        yield f"train/dbm-pcd/{seed}", (result.model, result.history)
    # Resumed runs: 8 updates, stop, resume to 16; the same as 16 in one go is another test's
    # claim, here the resumed result itself must not move.
    for algorithm in ("cd", "pcd", "cast", "pt"):
        for seed in range(5):
            with tempfile.TemporaryDirectory() as folder:
                common = dict(
                    algorithm=algorithm,
                    batch_size=20,
                    learning_rate=0.05,
                    generator=seed,
                    checkpoint_dir=folder,
                    checkpoint_every=4,
                    snapshots=None,
                    **TRAINING[algorithm],
                )
                model = bl.RBM(n_visible=9, n_hidden=4, generator=seed)
                bl.train(model, data, n_updates=8, **common)
                again = bl.RBM(n_visible=9, n_hidden=4, generator=seed)
                result = bl.train(again, data, n_updates=16, resume=True, **common)
                yield f"resume/{algorithm}/{seed}", (result.model, result.history, result.final_chains)


def log_likelihood_results() -> Iterator[tuple[str, Any]]:
    data = _data(9, seed=13)
    model = _models()["rbm9x4-sharp"]
    for seed in range(5):
        estimate = bl.estimate_log_z(
            model, method="ais", n_chains=20, n_temperatures=40, lower_bound_sweeps=20, generator=seed
        )
        yield f"log-likelihood/ais/{seed}", bl.log_likelihood(model, data, estimate.log_z)


FAMILIES: dict[str, Callable[[], Iterator[tuple[str, Any]]]] = {
    "estimators": estimator_results,
    "trajectory": trajectory_results,
    "operators": operator_results,
    "samplers": sampler_results,
    "training": training_results,
    "log-likelihood": log_likelihood_results,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--write", type=Path, help="write the results here")
    target.add_argument("--compare", type=Path, help="compare with results written before")
    parser.add_argument("--only", choices=sorted(FAMILIES), action="append", help="families to run")
    args = parser.parse_args(argv)
    if os.environ.get("BOLTZLAB_GEMM") != "torch":
        print("warning: BOLTZLAB_GEMM is not 'torch'; results may differ by the product backend")
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")  # the base-rate advice on unfitted models, every call
    lines, started = [], time.perf_counter()
    for family in args.only or FAMILIES:
        count = len(lines)
        for key, value in FAMILIES[family]():
            lines.append(f"{key}\t{digest_of(value)}")
        print(f"{family}: {len(lines) - count} results", flush=True)
    print(f"{len(lines)} results in {time.perf_counter() - started:.0f} s")
    if args.write:
        args.write.write_text("\n".join(lines) + "\n")
        return 0
    before = dict(line.split("\t") for line in args.compare.read_text().splitlines())
    after = dict(line.split("\t") for line in lines)
    changed = sorted(key for key in after if key in before and before[key] != after[key])
    missing = sorted(set(before) - set(after)) if not args.only else []
    for key in changed:
        print(f"CHANGED {key}")
    for key in missing:
        print(f"MISSING {key}")
    same = sum(1 for key in after if before.get(key) == after[key])
    print(f"{same} of {len(after)} results identical; {len(changed)} changed, {len(missing)} missing")
    return 1 if changed or missing or not math.isfinite(same) else 0


if __name__ == "__main__":
    sys.exit(main())
