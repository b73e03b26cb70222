"""Hard models: every log Z estimator's defaults, scored on RBMs whose log Z is known exactly.

Trains (or loads from a cache) small RBMs — at most 20 hidden units, so ``bl.exact_log_z``
enumerates them in seconds — on real binary datasets with CD-1, CD-25, PCD with a decaying
learning rate and PCD with a constant one (long PCD runs give the sharp, multi-modal models
on which annealing and tempering fail), then runs every estimator with its *default* settings
on every model and compares it with the exact value. The table says which defaults fail on
which models, and ``hard_models_diagnostics.csv`` holds every scalar diagnostic the
estimators report so that their reliability verdicts can be calibrated against the truth.

Usage::

    python benchmarks/hard_models.py                       # default preset (~20–30 min, 1 thread)
    python benchmarks/hard_models.py --preset tiny         # seconds; checks the pipeline
    python benchmarks/hard_models.py --methods trajectory-ais --datasets mnist
    python benchmarks/hard_models.py --option ais.n_chains=1000 --methods ais

Writes ``hard_models.csv`` (one row per model and method), ``hard_models_diagnostics.csv``
(the same rows' error, stderr and verdict beside every scalar of ``est.info``, as ``info.<key>``)
and ``hard_models.md`` to ``--out`` (default ``benchmarks/results``); models are cached with a
JSON sidecar and the training trajectory ``bl.train`` records by default
(``trajectory.safetensors``, 64 geometrically spaced snapshots) in ``--cache`` (default
``runs/hard-models``). ``trajectory-ais`` is one of the default methods and is scored on every
model that has a trajectory (a cached model without ``trajectory.safetensors`` is retrained,
bit for bit the same model, to record one; an older ``trajectory/`` folder of snapshot files
is used when ``--no-trajectory`` is given). A dataset that cannot be loaded is skipped with a
line saying why; an estimator that raises is recorded as a row. Not part of the test suite
(``tests/test_hard_models_bench.py`` runs the tiny preset).
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import math
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

import boltzlab as bl
from boltzlab.estimators.record import get_record
from boltzlab.models.trajectory import TRAJECTORY_FILE
from boltzlab.training.snapshots import DEFAULT_MAX_SNAPSHOTS

# The companion sits beside this script, and benchmarks/ is not a package.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from hard_models_report import (
    COLUMNS,
    breakdown,
    confident_miss,
    covered,
    flatten_info,
    report,
    summarize,
    write_csv,
)

__all__ = [
    "ALGORITHMS",
    "PRESETS",
    "breakdown",
    "confident_miss",
    "covered",
    "main",
    "summarize",
    "train_cached",
]

ROOT = Path(__file__).resolve().parent.parent
STANDARD_METHODS = (
    "exact",
    "ais",
    "anchored-ais",
    "raise",
    "rts",
    "ts",
    "ti",
    "ti-rb",
    "mbar",
    "trajectory-ais",
)
BATCH_SIZE = 100
HELD_OUT_FRACTION = 0.1  # for datasets with no test or validation split (binary alphadigits)


@dataclass(frozen=True)
class Algorithm:
    """How one family of models is trained (options of ``bl.train``)."""

    algorithm: str
    k: int
    learning_rate: float
    lr_schedule: str


ALGORITHMS: dict[str, Algorithm] = {
    "cd1": Algorithm("cd", 1, 0.05, "constant"),
    "cd25": Algorithm("cd", 25, 0.05, "constant"),
    # Linear decay to 0, the usual recipe: the run ends on weights that have stopped moving.
    "pcd-decay": Algorithm("pcd", 1, 0.05, "linear"),
    # A constant 0.05 keeps the weights moving to the end: candidates for sharp, hard-to-anneal models.
    "pcd-const": Algorithm("pcd", 1, 0.05, "constant"),
}


@dataclass(frozen=True)
class Preset:
    """A benchmark size: which models, how long they train, and any estimator budgets."""

    datasets: tuple[str, ...]
    algorithms: tuple[str, ...]
    n_updates: dict[str, int]
    n_hidden: dict[str, int]  # per dataset; "*" for the rest
    raise_examples: int
    # Empty except for "tiny": the point is to score the defaults.
    method_options: dict[str, dict[str, Any]] = field(default_factory=dict)


_TEMPERED_TINY = {"n_chains": 20, "n_temperatures": 20, "n_sweeps": 100, "initial_sweeps": 10}
PRESETS: dict[str, Preset] = {
    "tiny": Preset(
        datasets=("digits", "binary-alphadigits"),
        algorithms=("cd1", "pcd-const"),
        n_updates=dict.fromkeys(ALGORITHMS, 100),
        n_hidden={"*": 6},
        raise_examples=3,
        method_options={
            "ais": {"n_chains": 16, "n_temperatures": 200},
            "raise": {"n_chains": 2, "n_temperatures": 100},
            **{m: dict(_TEMPERED_TINY) for m in ("rts", "ts", "ti", "ti-rb", "mbar")},
            "trajectory-ais": {"n_chains": 16, "n_steps": 200, "pilot_chains": 8, "n_candidates": 4},
        },
    ),
    "default": Preset(
        datasets=("mnist", "fashion-mnist", "caltech101-silhouettes", "binary-alphadigits", "digits"),
        algorithms=tuple(ALGORITHMS),
        n_updates={"cd1": 5000, "cd25": 1000, "pcd-decay": 10_000, "pcd-const": 10_000},
        n_hidden={"digits": 16, "*": 20},
        raise_examples=20,
    ),
    "long": Preset(
        datasets=("mnist", "fashion-mnist", "caltech101-silhouettes", "binary-alphadigits", "digits"),
        algorithms=tuple(ALGORITHMS),
        n_updates={"cd1": 20_000, "cd25": 5000, "pcd-decay": 50_000, "pcd-const": 50_000},
        n_hidden={"digits": 16, "*": 20},
        raise_examples=100,
    ),
}


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _stable_seed(*parts: object) -> int:
    # crc32, not hash(): Python salts str hashes per process, and reruns must draw the same numbers.
    return zlib.crc32(":".join(map(str, parts)).encode())


# --- data -----------------------------------------------------------------------------------------


def load_split(name: str, *, seed: int, root: Path | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(train, held_out)`` of a dataset; held out is its test split, else validation, else 10 %."""
    data = bl.data.load(name, root=root)
    held_out = data.test if data.test is not None else data.valid
    if held_out is not None:
        return data.train, held_out
    order = torch.randperm(data.train.shape[0], generator=_generator(_stable_seed("split", name, seed)))
    n_held = max(1, round(HELD_OUT_FRACTION * data.train.shape[0]))
    return data.train[order[n_held:]], data.train[order[:n_held]]


# --- models ---------------------------------------------------------------------------------------


def training_config(
    dataset: str, algorithm: str, *, n_updates: int, n_visible: int, n_hidden: int, seed: int
) -> dict[str, Any]:
    """What a cached model's sidecar records of how it was trained (and is matched on)."""
    spec = ALGORITHMS[algorithm]
    return {
        "dataset": dataset,
        "algorithm": algorithm,
        "train_algorithm": spec.algorithm,
        "k": spec.k,
        "learning_rate": spec.learning_rate,
        "lr_schedule": spec.lr_schedule,
        "n_updates": n_updates,
        "batch_size": BATCH_SIZE,
        "n_visible": n_visible,
        "n_hidden": n_hidden,
        "seed": seed,
    }


def training_options(algorithm: str, *, n_updates: int, seed: int) -> dict[str, Any]:
    """``bl.train``'s options for a training algorithm of :data:`ALGORITHMS` (its own generator)."""
    spec = ALGORITHMS[algorithm]
    return {
        "algorithm": spec.algorithm,
        "k": spec.k,
        "n_updates": n_updates,
        "batch_size": BATCH_SIZE,
        "learning_rate": spec.learning_rate,
        "lr_schedule": spec.lr_schedule,
        "generator": _generator(seed + 1),
    }


def obtain_model(
    cache: Path,
    dataset: str,
    train: torch.Tensor,
    held_out: torch.Tensor,
    algorithm: str,
    *,
    n_hidden: int,
    n_updates: int,
    seed: int,
    retrain: bool = False,
    save_trajectory: bool = True,
) -> tuple[Any, dict[str, Any], Path]:
    """Load the model of this configuration from ``cache`` or train and save it; returns
    ``(model, sidecar, run_directory)``. The sidecar holds the configuration, exact log Z,
    train/test log-likelihoods and training time."""
    config = training_config(
        dataset, algorithm, n_updates=n_updates, n_visible=train.shape[1], n_hidden=n_hidden, seed=seed
    )
    name = f"{dataset}-{algorithm}-h{n_hidden}-u{n_updates}-s{seed}"
    # A cached model without its trajectory is trained again: the snapshot recorder draws no
    # random numbers, so the same seed gives the same model, now with trajectory.safetensors.
    return train_cached(
        cache / name,
        config,
        build=lambda: bl.RBM(n_visible=train.shape[1], n_hidden=n_hidden, generator=_generator(seed)),
        load=bl.RBM.load,
        train=train,
        held_out=held_out,
        train_options={
            **training_options(algorithm, n_updates=n_updates, seed=seed),
            "snapshots": DEFAULT_MAX_SNAPSHOTS if save_trajectory else None,
            "snapshot_dir": cache / name,
        },
        retrain=retrain,
        required=(TRAJECTORY_FILE,) if save_trajectory else (),
    )


def train_cached(
    directory: Path,
    config: dict[str, Any],
    *,
    build: Callable[[], Any],
    load: Callable[[Path], Any],
    train: torch.Tensor,
    held_out: torch.Tensor,
    train_options: dict[str, Any],
    retrain: bool,
    required: Sequence[str] = (),
) -> tuple[Any, dict[str, Any], Path]:
    """The model cached in ``directory`` for ``config``, or ``build()`` trained with ``train_options``
    and saved there; returns ``(model, sidecar, directory)``. The sidecar holds the configuration,
    the exact log Z (and its time), train/test log-likelihoods and the training time; a cache
    missing one of the ``required`` files is trained again."""
    model_path, sidecar_path = directory / "model.safetensors", directory / "model.json"
    complete = all((directory / name).is_file() for name in required)
    if not retrain and model_path.is_file() and sidecar_path.is_file() and complete:
        sidecar = json.loads(sidecar_path.read_text())
        if sidecar.get("config") == config:
            return load(model_path), sidecar, directory
    directory.mkdir(parents=True, exist_ok=True)
    model = build()
    started = time.perf_counter()
    bl.train(model, train, **train_options)
    train_seconds = time.perf_counter() - started
    started = time.perf_counter()
    exact = bl.exact_log_z(model)
    exact_seconds = time.perf_counter() - started
    sidecar = {
        "name": directory.name,
        "config": config,
        "exact_log_z": exact,
        "exact_seconds": exact_seconds,
        "train_seconds": train_seconds,
        "train_log_likelihood": bl.log_likelihood(model, train, exact),
        "test_log_likelihood": bl.log_likelihood(model, held_out, exact),
    }
    model.save(model_path)
    sidecar_path.write_text(json.dumps(sidecar, indent=2) + "\n")
    return model, sidecar, directory


# --- estimators -----------------------------------------------------------------------------------


def _named_parameters(method: str) -> set[str]:
    """Named keyword parameters of a method's estimator function, to know what it needs."""
    return set(inspect.signature(get_record(method).run).parameters)


def trajectory_option(run_directory: Path, how: str) -> Any:
    """The run's trajectory: ``trajectory.safetensors`` (its path, or the run directory with
    ``how="dir"``), else an older ``trajectory/`` folder of snapshot files (as models, paths or
    the folder); ``None`` when the run has neither."""
    if (run_directory / TRAJECTORY_FILE).is_file():
        return run_directory if how == "dir" else run_directory / TRAJECTORY_FILE
    folder = run_directory / "trajectory"
    paths = sorted(folder.glob("update-*.safetensors"))
    if not paths:
        return None
    if how == "dir":
        return folder
    return paths if how == "paths" else [bl.RBM.load(path) for path in paths]


def method_options(
    method: str,
    preset: Preset,
    extra: dict[str, dict[str, Any]],
    *,
    held_out: torch.Tensor,
    n_examples: int,
    dataset: str,
    run_directory: Path,
    trajectory_as: str,
    check_data: torch.Tensor | None = None,
    train: torch.Tensor | None = None,
) -> dict[str, Any]:
    """The options one method gets: the preset's and the user's, plus ``data`` (held-out
    examples, the same ones for every model of a dataset) and ``trajectory`` where it takes them,
    ``check_data`` (where the verdict's lower-bound witness starts) when given, and ``train``
    as anchored AIS's ``anchor_data``."""
    options = {**preset.method_options.get(method, {}), **extra.get(method, {})}
    if check_data is not None and method != "exact":
        options.setdefault("check_data", check_data)
    needs = _named_parameters(method)
    if "anchor_data" in needs and "anchor_data" not in options and train is not None:
        options["anchor_data"] = train  # anchored AIS starts its anchor chains from the training set
    if "data" in needs and "data" not in options:
        order = torch.randperm(held_out.shape[0], generator=_generator(_stable_seed("raise", dataset)))
        options["data"] = held_out[order[:n_examples]]
    # rts and mbar take the trajectory as their second route, as `boltzlab evaluate` passes it.
    record = get_record(method)
    takes_trajectory = record.needs_trajectory or record.trajectory_route is not None
    if takes_trajectory and "trajectory" not in options:
        trajectory = trajectory_option(run_directory, trajectory_as)
        if trajectory is not None:
            options["trajectory"] = trajectory
    return options


def score(model: Any, method: str, *, exact: float, seed: int, options: dict[str, Any]) -> tuple[dict, Any]:
    """One estimate of ``method`` scored against ``exact``: ``(row, info)``; errors become a row."""
    started = time.perf_counter()
    try:
        estimate = bl.estimate_log_z(model, method=method, generator=_generator(seed), **options)
    except Exception as error:  # a benchmark row, not a crash: the rest of the suite still runs
        message = " ".join(f"{type(error).__name__}: {error}".split())[:300]
        return {"method": method, "exception": message, "wall_s": time.perf_counter() - started}, None
    wall = time.perf_counter() - started
    error = estimate.log_z - exact
    stderr = float(estimate.stderr)
    z = error / stderr if stderr > 0 else (0.0 if error == 0 else math.copysign(math.inf, error))
    warnings = getattr(estimate, "warnings", ())
    row = {
        "method": method,
        "route": estimate.method,  # rts and mbar may answer along the trajectory
        "log_z": estimate.log_z,
        "stderr": stderr,
        "error": error,
        "z": z,
        "cost_sweeps": estimate.cost_sweeps,
        "wall_s": wall,
        "bound": estimate.bound or "",
        "reliable": getattr(estimate, "reliable", None),
        "verdict": getattr(estimate, "status", None),
        "witness": getattr(getattr(estimate, "lower_bound", None), "started_from", ""),
        "warnings": " | ".join(warnings),
        "exception": "",
    }
    row["confident_miss"] = confident_miss(row)
    row["covered_2se"] = covered(row)
    return row, estimate.info


def score_model(
    model: Any,
    sidecar: dict[str, Any],
    methods: Sequence[str],
    *,
    seed: int,
    options_of: Callable[[str], dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every method of ``methods`` on one model, scored against its sidecar's exact log Z.

    ``options_of(method)`` gives a method's options (:func:`method_options`). Returns the result
    rows (the model's configuration beside :func:`score`'s row) and the diagnostics rows (every
    scalar of the estimate's ``info``), and prints one line per method on stderr. A method that
    needs a trajectory the model lacks is skipped with a line saying so.
    """
    config, exact = sidecar["config"], sidecar["exact_log_z"]
    base = {
        "model": sidecar["name"],
        **{key: config[key] for key in ("dataset", "algorithm", "n_visible", "n_hidden")},
        **{key: config[key] for key in ("learning_rate", "lr_schedule", "n_updates", "seed")},
        "exact_log_z": exact,
        "test_log_likelihood": sidecar["test_log_likelihood"],
    }
    rows, diagnostics = [], []
    for method in methods:
        options = options_of(method)
        if "trajectory" in _named_parameters(method) and "trajectory" not in options:
            print(f"  {method}: skipped (the model has no training trajectory)", file=sys.stderr)
            continue
        row, info = score(
            model, method, exact=exact, seed=_stable_seed(sidecar["name"], method, seed), options=options
        )
        rows.append({**base, **row})
        diagnostics.append(
            {
                "model": base["model"],
                "method": method,
                "error": row.get("error"),
                "stderr": row.get("stderr"),
                "reliable": row.get("reliable"),
                "verdict": row.get("verdict"),
                **flatten_info(info, "info."),
            }
        )
        outcome = row["exception"] or (
            f"error {row['error']:+.4f} (z {row['z']:+.1f}), {row.get('verdict') or row.get('reliable')}"
        )
        if row.get("route") not in (None, method):
            outcome += f", by {row['route']}"
        print(f"  {method}: {outcome} [{row['wall_s']:.1f} s]", file=sys.stderr)
    return rows, diagnostics


def resolve_methods(requested: Sequence[str]) -> list[str]:
    """Expand ``default`` (``STANDARD_METHODS``: exact and the nine standard estimators) and ``all``
    (every registered method)."""
    registered = bl.estimators.methods()
    chosen: list[str] = []
    for name in requested:
        expanded = STANDARD_METHODS if name == "default" else registered if name == "all" else (name,)
        chosen += [m for m in expanded if m not in chosen]
    for name in [m for m in chosen if m not in registered]:
        print(f"method {name!r} is not registered (have {', '.join(registered)}): skipped", file=sys.stderr)
    return [m for m in chosen if m in registered]


def _parse_option(text: str) -> tuple[str, str, Any]:
    method_key, _, value = text.partition("=")
    method, _, key = method_key.partition(".")
    if not (method and key and value):
        raise argparse.ArgumentTypeError(f"expected METHOD.KEY=VALUE, got {text!r}")
    try:
        return method, key, json.loads(value)
    except json.JSONDecodeError:
        return method, key, value  # a bare word such as gibbs


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", choices=tuple(PRESETS), default="default")
    parser.add_argument("--datasets", nargs="+", help="Override the preset's datasets.")
    parser.add_argument("--algorithms", nargs="+", choices=tuple(ALGORITHMS), help="Override its algorithms.")
    parser.add_argument("--n-updates", type=int, help="Training updates for every algorithm.")
    parser.add_argument("--n-hidden", type=int, help="Hidden units of every model (<= 20 or so).")
    parser.add_argument("--trajectory-as", choices=("models", "paths", "dir"), default="models")
    parser.add_argument(
        "--no-trajectory",
        action="store_true",
        help="Train without recording snapshots (bl.train snapshots=None).",
    )
    parser.add_argument(
        "--check-data",
        action="store_true",
        help="Start every verdict's lower-bound witness from the training data, as boltzlab evaluate "
        "does (default: from the rows each model keeps, as estimate_log_z does without check_data; "
        "a model cached before witness rows existed keeps none, and its verdicts say unchecked: the "
        "witness column of hard_models.csv says which).",
    )
    add_scoring_arguments(parser, cache=ROOT / "runs" / "hard-models")
    return parser.parse_args(argv)


def add_scoring_arguments(parser: argparse.ArgumentParser, *, cache: Path) -> None:
    """The options every exact-oracle benchmark takes: methods and their options, RAISE's examples,
    the model cache (``cache`` by default), where results go, data, seed and threads."""
    parser.add_argument(
        "--methods",
        nargs="+",
        default=["default"],
        help="Methods; 'default' = exact and the nine standard estimators, 'all'.",
    )
    parser.add_argument(
        "--option", type=_parse_option, action="append", default=[], metavar="METHOD.KEY=VALUE"
    )
    parser.add_argument("--raise-examples", type=int, help="Held-out examples given to RAISE as data=.")
    parser.add_argument("--retrain", action="store_true", help="Ignore cached models.")
    parser.add_argument("--cache", type=Path, default=cache)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--data-root", type=Path, help="Where datasets are (else BOLTZLAB_DATA).")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)


def method_extras(arguments: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``--option METHOD.KEY=VALUE`` as ``{method: {key: value}}``."""
    extra: dict[str, dict[str, Any]] = {}
    for method, key, value in arguments.option:
        extra.setdefault(method, {})[key] = value
    return extra


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Run the benchmark; returns the result rows (also written to ``--out``)."""
    arguments = parse_arguments(argv)
    torch.set_num_threads(arguments.threads)
    preset = PRESETS[arguments.preset]
    methods, extra = resolve_methods(arguments.methods), method_extras(arguments)
    n_examples = arguments.raise_examples or preset.raise_examples
    rows: list[dict[str, Any]] = []
    diagnostics: list[dict[str, Any]] = []
    started = time.perf_counter()
    for dataset in arguments.datasets or preset.datasets:
        try:
            train, held_out = load_split(dataset, seed=arguments.seed, root=arguments.data_root)
        except Exception as error:
            print(f"skipping dataset {dataset}: {type(error).__name__}: {error}", file=sys.stderr)
            continue
        for algorithm in arguments.algorithms or preset.algorithms:
            n_hidden = arguments.n_hidden or preset.n_hidden.get(dataset, preset.n_hidden["*"])
            n_updates = arguments.n_updates or preset.n_updates[algorithm]
            try:
                model, sidecar, run_directory = obtain_model(
                    arguments.cache,
                    dataset,
                    train,
                    held_out,
                    algorithm,
                    n_hidden=n_hidden,
                    n_updates=n_updates,
                    seed=arguments.seed,
                    retrain=arguments.retrain,
                    save_trajectory=not arguments.no_trajectory,
                )
            except Exception as error:
                print(f"skipping {dataset}/{algorithm}: training failed: {error}", file=sys.stderr)
                continue
            exact = sidecar["exact_log_z"]
            print(
                f"{sidecar['name']}: exact log Z {exact:.4f}, test LL {sidecar['test_log_likelihood']:.2f}, "
                f"trained in {sidecar['train_seconds']:.0f} s",
                file=sys.stderr,
            )
            model_rows, model_diagnostics = score_model(
                model,
                sidecar,
                methods,
                seed=arguments.seed,
                options_of=functools.partial(
                    method_options,
                    preset=preset,
                    extra=extra,
                    held_out=held_out,
                    n_examples=n_examples,
                    dataset=dataset,
                    run_directory=run_directory,
                    trajectory_as=arguments.trajectory_as,
                    check_data=train if arguments.check_data else None,
                    train=train,
                ),
            )
            rows.extend(model_rows)
            diagnostics.extend(model_diagnostics)
            write_csv(arguments.out / "hard_models.csv", rows, COLUMNS)
            write_csv(arguments.out / "hard_models_diagnostics.csv", diagnostics)
    # The report says how it was made, so a results file is never separated from its command.
    command = "python benchmarks/hard_models.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = f"Made by `{command.strip()}` (boltzlab {bl.__version__}).\n\n" + report(rows, methods)
    (arguments.out).mkdir(parents=True, exist_ok=True)
    (arguments.out / "hard_models.md").write_text(text + "\n")
    print(text)
    print(f"\nwall time {time.perf_counter() - started:.0f} s; results in {arguments.out}", file=sys.stderr)
    return rows


if __name__ == "__main__":
    main()
