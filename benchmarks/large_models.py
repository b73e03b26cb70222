"""Large models: every log Z estimator's defaults, scored on RBMs with hundreds of hidden units
whose log Z is still known exactly.

Every other exact-oracle benchmark (``hard_models.py``) keeps the *hidden* layer at most ~20
units wide, which says nothing about how the estimators behave on the wide hidden layers that
real RBMs have. Here the roles are swapped: the *visible* layer has at most 20 units and the
hidden layer 200 or 500, and ``bl.exact_log_z`` enumerates the smaller (visible) layer, summing
the hidden units out analytically — 2^20 states, a few seconds even at 20×500. The models are
trained on real data, pooled down to 20 binary pixels, with CD-1, CD-25 and PCD with a constant
learning rate of 0.05 (``ALGORITHMS`` of ``hard_models.py``), which give *easy* models here, and
PCD with a constant learning rate of 0.5 (``pcd-sharp``, :data:`SHARP_ALGORITHMS`), which gives
the *sharp*, hard-to-anneal ones (see "Sharp models" below), then every default method
(``STANDARD_METHODS``) is run through
``bl.estimate_log_z`` with its defaults and scored exactly as ``hard_models.py --check-data``
scores it: error, z, verdict, cost, wall time, confident misses, ±2 s.e. coverage and crying
wolf (the rules of ``hard_models_report.py``). Every verdict's lower-bound witness starts from
the training rows (``check_data``), and anchored AIS's anchor chains start there too.

Datasets (built by :func:`load_pooled`; no row is dropped, deduplicated or filtered — an image
whose pooled pixels are all 0 stays, as do the many rows that pool to the same 20-bit pattern):

* ``mnist-5x4`` — MNIST as ``bl.data.load("mnist")`` gives it (pixel > 127 of 255 is 1),
  cropped to rows 4–23 and columns 6–21 (a 20×16 window on the centre; the dropped border
  pixels are almost always 0), then 4×4 blocks pooled: a pooled pixel is 1 when at least half
  (8 of 16) of its block's pixels are 1. 5×4 = 20 pixels; the official 60,000 train /
  10,000 test split.
* ``alphadigits-5x4`` — Binary Alphadigits (``bl.data.load("binary-alphadigits")``, 20×16,
  1,404 images, no test split), 4×4 blocks pooled with the same ≥ half rule: 5×4 = 20 pixels.
  The source has no held-out split, so 10 % is held out as ``hard_models.load_split`` does
  (a permutation drawn from ``--seed``): 1,264 train / 140 held out.
* ``digits-4x4`` — scikit-learn's 8×8 digits as ``bl.data.load("digits")`` gives them (pixel
  ≥ 8 of 16 is 1; fixed 1,497 train / 300 test split), 2×2 blocks pooled with the ≥ half rule:
  4×4 = 16 pixels. Bundled with scikit-learn, so the tiny preset (and its test) needs no files.

Sharp models: at 0.05 the pooled 20-pixel data give models that AIS with 100 chains and 1,000
temperatures anneals easily (effective sample size 20–64 of 100, errors within 0.3 nats, on the
four ``pcd-const`` models). PCD-1 with a constant learning rate of 0.5 for 10,000 updates (100
persistent chains, minibatches of 100) leaves larger weights (largest |W| 3.6–5.4) and a few
strongly separated modes: the same AIS has an effective sample size of 1–39 of 100 and misses
by up to 1.5 nats. The MNIST models still fit well (test log-likelihood about 4 nats above the
uniform distribution's −13.86); the alphadigits ones (1,264 training rows) overfit, the 500-unit
one to about the uniform distribution's test log-likelihood. Longer runs at this rate (30,000
updates) drive the alphadigits models below uniform even on their training rows.

Usage::

    python benchmarks/large_models.py --threads 1              # default preset (~35 min, 1 thread)
    python benchmarks/large_models.py --preset tiny            # ~10 s; checks the pipeline
    python benchmarks/large_models.py --methods ais --hidden-sizes 500 --datasets mnist-5x4

Writes ``large_models.csv`` (one row per model and method, the columns of ``hard_models.csv``),
``large_models_diagnostics.csv`` (each row's error, stderr and verdict beside every scalar of
``est.info``) and ``large_models.md`` (command and commit at the top, then the tables of
``hard_models_report.report`` and a table of the models) to ``--out`` (default
``benchmarks/results``). Models are cached with their JSON sidecar (exact log Z, train and
test log-likelihood, training time) and training trajectory in ``--cache`` (default
``runs/large-models``), by ``hard_models.obtain_model``. A dataset that cannot be loaded is
skipped with a line saying why; an estimator that raises is recorded as a row. Not part of the
test suite (``tests/test_large_models_bench.py`` runs the tiny preset).
"""

from __future__ import annotations

import argparse
import functools
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import torch

import boltzlab as bl

# hard_models and its companion sit beside this script, and benchmarks/ is not a package.
sys.path.insert(0, str(Path(__file__).resolve().parent))
import hard_models
from hard_models import (
    ALGORITHMS,
    STANDARD_METHODS,
    Algorithm,
    add_scoring_arguments,
    load_split,
    method_extras,
    method_options,
    obtain_model,
    resolve_methods,
    score_model,
)
from hard_models import PRESETS as HARD_PRESETS
from hard_models_report import COLUMNS, breakdown, report, summary_table, write_csv

__all__ = [
    "DATASETS",
    "LARGE_ALGORITHMS",
    "PRESETS",
    "SHARP_ALGORITHMS",
    "STANDARD_METHODS",
    "PooledDataset",
    "load_pooled",
    "main",
    "obtain_large_model",
    "pool_binary",
]

ROOT = Path(__file__).resolve().parent.parent
#: A pooled pixel is 1 when at least this fraction of its block's pixels are 1.
POOL_THRESHOLD = 0.5

#: Training recipes of this benchmark only, beside ``hard_models.ALGORITHMS`` (which 784×20
#: models need no more of). PCD-1 at a constant 0.5, ten times hard_models' rate: on 20 pooled
#: pixels 0.05 gives models AIS anneals easily, 0.5 gives sharp, multi-modal ones (the module
#: docstring, "Sharp models"). bl.train's default 100 persistent chains.
SHARP_ALGORITHMS: dict[str, Algorithm] = {"pcd-sharp": Algorithm("pcd", 1, 0.5, "constant")}
LARGE_ALGORITHMS: dict[str, Algorithm] = {**ALGORITHMS, **SHARP_ALGORITHMS}


# --- data -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PooledDataset:
    """A real binary image dataset reduced to few pixels: crop, then pool blocks and threshold.

    ``source`` is a name for ``bl.data.load`` (via ``hard_models.load_split``, so the held-out
    split is the source's test split, else its validation split, else 10 % of train);
    ``image_shape`` is the source's (height, width); ``crop`` is ``(top, bottom, left, right)``
    (Python slice bounds) or ``None`` for the whole image; ``block`` the side of the square
    pooling blocks, which must tile the cropped window.
    """

    source: str
    image_shape: tuple[int, int]
    crop: tuple[int, int, int, int] | None
    block: int

    def n_visible(self) -> int:
        """Pixels after pooling."""
        top, bottom, left, right = self.crop or (0, self.image_shape[0], 0, self.image_shape[1])
        return ((bottom - top) // self.block) * ((right - left) // self.block)


DATASETS: dict[str, PooledDataset] = {
    # The 20×16 window holds the digit (MNIST centres it in a 20×20 box); 4×4 blocks give 5×4.
    "mnist-5x4": PooledDataset("mnist", (28, 28), (4, 24, 6, 22), 4),
    "alphadigits-5x4": PooledDataset("binary-alphadigits", (20, 16), None, 4),
    "digits-4x4": PooledDataset("digits", (8, 8), None, 2),
}


def pool_binary(
    rows: torch.Tensor,
    image_shape: tuple[int, int],
    *,
    crop: tuple[int, int, int, int] | None,
    block: int,
    threshold: float = POOL_THRESHOLD,
) -> torch.Tensor:
    """Flattened binary images ``(n, H·W)`` → ``(n, h·w)`` pooled binary images.

    Crops each image to ``crop`` (``(top, bottom, left, right)``), splits it into
    ``block``×``block`` blocks and sets a pooled pixel to 1 when the block's mean is at least
    ``threshold``. Row order and count are kept. Returns float32 0/1, row-major.
    """
    height, width = image_shape
    images = rows.reshape(rows.shape[0], height, width)
    if crop is not None:
        top, bottom, left, right = crop
        images = images[:, top:bottom, left:right]
    n, height, width = images.shape
    if height % block or width % block:
        raise ValueError(f"{block}×{block} blocks do not tile a {height}×{width} window")
    blocks = images.reshape(n, height // block, block, width // block, block).float().mean(dim=(2, 4))
    return (blocks >= threshold).to(torch.float32).reshape(n, -1)


def obtain_large_model(*args: Any, **kwargs: Any) -> tuple[Any, dict[str, Any], Path]:
    """``hard_models.obtain_model`` (same arguments, same cache layout, names and sidecars),
    for any of :data:`LARGE_ALGORITHMS`: it looks its recipe up in ``hard_models.ALGORITHMS``,
    so this script's own recipes are added to that dict for the call only."""
    with mock.patch.dict(hard_models.ALGORITHMS, SHARP_ALGORITHMS):
        return obtain_model(*args, **kwargs)


def load_pooled(name: str, *, seed: int, root: Path | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(train, held_out)`` of one of :data:`DATASETS`, pooled; every source row is kept."""
    spec = DATASETS[name]
    train, held_out = load_split(spec.source, seed=seed, root=root)
    pool = {"crop": spec.crop, "block": spec.block}
    return pool_binary(train, spec.image_shape, **pool), pool_binary(held_out, spec.image_shape, **pool)


# --- presets --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LargePreset:
    """A benchmark size: datasets, training algorithms, hidden-layer widths, training updates per
    algorithm, RAISE's held-out examples, and estimator options (empty except for ``tiny``: the
    point is to score the defaults). ``method_options`` is what ``hard_models.method_options``
    reads from a preset."""

    datasets: tuple[str, ...]
    algorithms: tuple[str, ...]
    hidden_sizes: tuple[int, ...]
    n_updates: dict[str, int]
    raise_examples: int
    method_options: dict[str, dict[str, Any]] = field(default_factory=dict)


PRESETS: dict[str, LargePreset] = {
    "tiny": LargePreset(
        # One model: each method's fixed costs (the pilot ladder, the verdict's witness) are ~1 s.
        datasets=("digits-4x4",),
        algorithms=("pcd-const",),
        hidden_sizes=(200,),
        n_updates=dict.fromkeys(LARGE_ALGORITHMS, 100),
        raise_examples=3,
        # hard_models' tiny budgets, plus anchored AIS's (its default 1,000 anchor chains take ~10 s).
        method_options={
            **HARD_PRESETS["tiny"].method_options,
            "anchored-ais": {"n_chains": 16, "n_temperatures": 200, "anchor_chains": 16, "anchor_sweeps": 20},
        },
    ),
    # Update counts keep each model under ~1 minute on one thread at 20×500 (about 1 ms per
    # CD-1/PCD update and 11 ms per CD-25 update there). pcd-sharp stops at 10,000: longer runs
    # at its rate leave alphadigits models worse than uniform even on their training rows.
    "default": LargePreset(
        datasets=("mnist-5x4", "alphadigits-5x4"),
        algorithms=("cd1", "cd25", "pcd-const", "pcd-sharp"),
        hidden_sizes=(200, 500),
        n_updates={
            "cd1": 10_000,
            "cd25": 2_000,
            "pcd-decay": 30_000,
            "pcd-const": 30_000,
            "pcd-sharp": 10_000,
        },
        raise_examples=20,
    ),
}


# --- report ---------------------------------------------------------------------------------------


def _commit() -> str:
    """The checkout's short commit, naming the tracked files that differ from it (edits to src/
    change the results; untracked files, such as this script before it is committed, do not)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        modified = git("diff", "HEAD", "--name-only").split()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    if not modified:
        return commit
    return f"{commit} with uncommitted changes to {len(modified)} tracked files: {', '.join(modified)}"


def models_table(sidecars: Sequence[Mapping[str, Any]]) -> str:
    """One line per model: size, exact log Z, log-likelihoods and the seconds spent on each."""
    header = ["model", "D×J", "exact log Z", "train LL", "test LL", "train s", "exact s"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for sidecar in sidecars:
        config = sidecar["config"]
        cells = [
            sidecar["name"],
            f"{config['n_visible']}×{config['n_hidden']}",
            f"{sidecar['exact_log_z']:.3f}",
            f"{sidecar['train_log_likelihood']:.3f}",
            f"{sidecar['test_log_likelihood']:.3f}",
            f"{sidecar['train_seconds']:.0f}",
            f"{sidecar['exact_seconds']:.1f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --- command line ---------------------------------------------------------------------------------


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", choices=tuple(PRESETS), default="default")
    parser.add_argument("--datasets", nargs="+", choices=tuple(DATASETS), help="Override the preset's.")
    parser.add_argument(
        "--algorithms", nargs="+", choices=tuple(LARGE_ALGORITHMS), help="Override its algorithms."
    )
    parser.add_argument("--hidden-sizes", nargs="+", type=int, help="Override its hidden-layer widths.")
    parser.add_argument("--n-updates", type=int, help="Training updates for every algorithm.")
    add_scoring_arguments(parser, cache=ROOT / "runs" / "large-models")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Run the benchmark; returns the result rows (also written to ``--out``)."""
    arguments = parse_arguments(argv)
    torch.set_num_threads(arguments.threads)
    preset = PRESETS[arguments.preset]
    methods, extra = resolve_methods(arguments.methods), method_extras(arguments)
    n_examples = arguments.raise_examples or preset.raise_examples
    rows: list[dict[str, Any]] = []
    diagnostics: list[dict[str, Any]] = []
    sidecars: list[dict[str, Any]] = []
    started = time.perf_counter()
    for dataset in arguments.datasets or preset.datasets:
        try:
            train, held_out = load_pooled(dataset, seed=arguments.seed, root=arguments.data_root)
        except Exception as error:
            print(f"skipping dataset {dataset}: {type(error).__name__}: {error}", file=sys.stderr)
            continue
        print(
            f"{dataset}: {train.shape[0]} train / {held_out.shape[0]} held-out rows of {train.shape[1]} "
            f"pixels, mean {train.mean():.3f}, {torch.unique(train, dim=0).shape[0]} distinct train rows",
            file=sys.stderr,
        )
        for n_hidden in arguments.hidden_sizes or preset.hidden_sizes:
            for algorithm in arguments.algorithms or preset.algorithms:
                n_updates = arguments.n_updates or preset.n_updates[algorithm]
                try:
                    model, sidecar, run_directory = obtain_large_model(
                        arguments.cache,
                        dataset,
                        train,
                        held_out,
                        algorithm,
                        n_hidden=n_hidden,
                        n_updates=n_updates,
                        seed=arguments.seed,
                        retrain=arguments.retrain,
                    )
                except Exception as error:
                    print(
                        f"skipping {dataset}/{algorithm}/h{n_hidden}: training failed: {error}",
                        file=sys.stderr,
                    )
                    continue
                sidecars.append(sidecar)
                exact = sidecar["exact_log_z"]
                print(
                    f"{sidecar['name']}: exact log Z {exact:.4f} ({sidecar['exact_seconds']:.1f} s), "
                    f"test LL {sidecar['test_log_likelihood']:.3f}, trained in {sidecar['train_seconds']:.0f} s",
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
                        trajectory_as="models",
                        check_data=train,  # as hard_models.py --check-data
                        train=train,
                    ),
                )
                rows.extend(model_rows)
                diagnostics.extend(model_diagnostics)
                write_csv(arguments.out / "large_models.csv", rows, COLUMNS)
                write_csv(arguments.out / "large_models_diagnostics.csv", diagnostics)
    wall = time.perf_counter() - started
    # The report says how it was made, so a results file is never separated from its command.
    command = "python benchmarks/large_models.py " + " ".join(argv if argv is not None else sys.argv[1:])
    header = (
        f"Made by `{command.strip()}` (boltzlab {bl.__version__}, commit {_commit()}), "
        f"{arguments.threads} thread(s), {wall:,.0f} s in all (training included when not cached). "
        "Every verdict's witness starts from the training rows (check_data), as "
        "`hard_models.py --check-data` does. Datasets and how they are pooled: the docstring of "
        "benchmarks/large_models.py."
    )
    stochastic = [row for row in rows if row.get("method") != "exact"]
    text = "\n\n".join(
        [
            header,
            report(rows, methods),
            "## Per hidden-layer width",
            summary_table(breakdown(stochastic, "n_hidden"), "n_hidden"),
            "## Per dataset",
            summary_table(breakdown(stochastic, "dataset"), "dataset"),
            "## Models",
            models_table(sidecars),
        ]
    )
    arguments.out.mkdir(parents=True, exist_ok=True)
    (arguments.out / "large_models.md").write_text(text + "\n")
    print(text)
    print(f"\nwall time {wall:.0f} s; results in {arguments.out}", file=sys.stderr)
    return rows


if __name__ == "__main__":
    main()
