"""scikit-learn's BernoulliRBM against boltzlab's in the digits examples: fit time, accuracy, scoring.

Two datasets (``--data``):

* ``plain`` (the default; the README's example, and the measurement of issue 31): the 8×8
  digits divided by 16, the first 1,500 rows to train on and the other 297 to test, and
  ``Pipeline([rbm, LogisticRegression(max_iter=1000)])``;
* ``nudged``: scikit-learn's ``examples/neural_networks/plot_rbm_logistic_classification.py``:
  the digits nudged by one pixel in each of four directions (5× the data), min-max scaled to
  [0, 1], an 80/20 split with ``random_state=0``, and ``LogisticRegression(solver="newton-cg",
  C=6000)``. (The example also sets ``tol=1``; with scikit-learn 1.9 newton-cg then stops after
  0 iterations and every classifier scores chance, so the default tolerance is used.)

The RBM is ``BernoulliRBM(n_components, learning_rate=0.06, n_iter)`` with 16 hidden units and
5 passes, and with 100 and 10 passes (the example's grid-searched setting), from
``sklearn.neural_network`` and from ``boltzlab.sklearn`` (defaults: scikit-learn's PCD-1), for
each seed in turn, the two back to back so that a busy machine slows both alike. Per
estimator the table gives

* **fit**: seconds of ``rbm.fit(X_train)`` alone, mean over seeds, and the ratio of the means;
* **accuracy**: test accuracy of the logistic regression on ``rbm.transform``, mean over seeds
  (the pipeline's), and the difference;
* **score_samples**: seconds of the first ``rbm.score_samples(X_test)`` after the fit. The two
  compute different things: scikit-learn's is a stochastic pseudo-likelihood, one flipped
  pixel per row, microseconds; boltzlab's is ``log p(v)`` with ``log Z`` exact (16 hidden
  units: 2^16 states) or estimated by a short AIS run judged by the library's checks (100
  hidden units), whose verdict and standard error the table shows too.

``--variants`` adds the accuracy of boltzlab's other training algorithms on the same data
(CD-1, flip-the-state PCD-1) as mean ± s.d. over the seeds.

Usage::

    python benchmarks/sklearn_digits.py                                  # plain digits, seeds 0 1 2, one thread
    python benchmarks/sklearn_digits.py --data nudged --variants
    python benchmarks/sklearn_digits.py --out benchmarks/results/sklearn_digits.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import sklearn
import torch
from scipy.ndimage import convolve
from sklearn import datasets
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.neural_network import BernoulliRBM as SklearnRBM
from sklearn.preprocessing import minmax_scale
from threadpoolctl import threadpool_limits

from boltzlab.sklearn import BernoulliRBM

#: (n_components, n_iter) of the table's two rows; learning_rate 0.06 throughout.
SIZES = ((16, 5), (100, 10))
LEARNING_RATE = 0.06
SHIFTS = (
    [[0, 1, 0], [0, 0, 0], [0, 0, 0]],
    [[0, 0, 0], [1, 0, 0], [0, 0, 0]],
    [[0, 0, 0], [0, 0, 1], [0, 0, 0]],
    [[0, 0, 0], [0, 0, 0], [0, 1, 0]],
)
ESTIMATORS: dict[str, Callable[..., Any]] = {"scikit-learn": SklearnRBM, "boltzlab": BernoulliRBM}
VARIANTS: dict[str, dict[str, Any]] = {
    "boltzlab algorithm='cd' (CD-1)": {"algorithm": "cd"},
    "boltzlab operator='flip' (PCD-1)": {"operator": "flip"},
}


@dataclass(frozen=True, slots=True)
class Dataset:
    """A train/test split and the classifier the example puts after the RBM."""

    name: str
    X_train: np.ndarray
    X_test: np.ndarray
    y_train: np.ndarray
    y_test: np.ndarray
    classifier: Callable[[], LogisticRegression]
    description: str


def plain_digits() -> Dataset:
    """The README's example: digits / 16, the first 1,500 rows to train, the rest to test."""
    X, y = datasets.load_digits(return_X_y=True)
    X = X / 16.0
    return Dataset(
        "plain",
        X[:1500],
        X[1500:],
        y[:1500],
        y[1500:],
        lambda: LogisticRegression(max_iter=1000),
        "digits / 16, rows 0–1499 train, 1500–1796 test; LogisticRegression(max_iter=1000)",
    )


def nudged_digits() -> Dataset:
    """scikit-learn's example: digits and their four one-pixel shifts, scaled to [0, 1], split 80/20."""
    X, y = datasets.load_digits(return_X_y=True)
    X = np.asarray(X, "float32")

    def shift(row: np.ndarray, weights: list[list[int]]) -> np.ndarray:
        return convolve(row.reshape((8, 8)), mode="constant", weights=weights).ravel()

    X = np.concatenate([X] + [np.apply_along_axis(shift, 1, X, weights) for weights in SHIFTS])
    y = np.concatenate([y] * 5)
    X = minmax_scale(X, feature_range=(0, 1))
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=0)
    return Dataset(
        "nudged",
        X_train,
        X_test,
        y_train,
        y_test,
        lambda: LogisticRegression(solver="newton-cg", C=6000.0),
        "scikit-learn's nudged digits (5×), min-max scaled, 80/20 split; LogisticRegression(newton-cg, C=6000)",
    )


@dataclass(frozen=True, slots=True)
class Run:
    """One estimator, one seed."""

    fit_seconds: float
    accuracy: float
    score_seconds: float
    score_cpu_seconds: float
    log_z: str  # boltzlab: "exact" or "ais ± 0.03 reliable"; scikit-learn: ""


def run_one(
    make: Callable[..., Any], data: Dataset, n_components: int, n_iter: int, seed: int, **extra: Any
) -> Run:
    """Fit, score the test rows once, and fit the classifier on the hidden probabilities."""
    rbm = make(
        n_components=n_components, learning_rate=LEARNING_RATE, n_iter=n_iter, random_state=seed, **extra
    )
    start = time.perf_counter()
    rbm.fit(data.X_train)
    fit_seconds = time.perf_counter() - start
    start, cpu_start = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # an unreliable log Z is reported in the table
        rbm.score_samples(data.X_test)
    score_seconds, score_cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    classifier = data.classifier().fit(rbm.transform(data.X_train), data.y_train)
    accuracy = classifier.score(rbm.transform(data.X_test), data.y_test)
    log_z = ""
    if isinstance(rbm, BernoulliRBM):
        log_z = rbm.log_z_method_
        if rbm.log_z_method_ != "exact":
            log_z += f" ± {rbm.log_z_stderr_:.3f} {rbm.log_z_verdict_}"
    return Run(fit_seconds, accuracy, score_seconds, score_cpu_seconds, log_z)


def spread(values: list[float]) -> str:
    return f"{min(values):.3f}–{max(values):.3f}"


def comparison(data: Dataset, seeds: list[int]) -> list[str]:
    """The table's markdown lines: per size, a row per estimator and a row of ratios."""
    lines = [
        "| hidden × passes | estimator | fit (s), mean [range] | accuracy, mean [per seed] | "
        "first score_samples (s), mean [range] | its CPU time (s), mean | log Z |",
        "|---|---|---|---|---|---|---|",
    ]
    for n_components, n_iter in SIZES:
        runs: dict[str, list[Run]] = {name: [] for name in ESTIMATORS}
        for seed in seeds:
            for name, make in ESTIMATORS.items():
                runs[name].append(run_one(make, data, n_components, n_iter, seed))
                print(f"  {n_components}×{n_iter} seed {seed} {name}: {runs[name][-1]}", file=sys.stderr)
        means = {}
        for name, results in runs.items():
            fit = [run.fit_seconds for run in results]
            accuracy = [run.accuracy for run in results]
            score = [run.score_seconds for run in results]
            cpu = statistics.mean(run.score_cpu_seconds for run in results)
            means[name] = (statistics.mean(fit), statistics.mean(accuracy), statistics.mean(score))
            per_seed = ", ".join(f"{value:.3f}" for value in accuracy)
            log_z = "; ".join(sorted({run.log_z for run in results})) or "— (pseudo-likelihood)"
            lines.append(
                f"| {n_components} × {n_iter} | {name} | {means[name][0]:.3f} [{spread(fit)}] | "
                f"{means[name][1]:.4f} [{per_seed}] | {means[name][2]:.4f} [{spread(score)}] | {cpu:.4f} | {log_z} |"
            )
        ours, theirs = means["boltzlab"], means["scikit-learn"]
        lines.append(
            f"| {n_components} × {n_iter} | **boltzlab / scikit-learn** | **{ours[0] / theirs[0]:.2f}×** | "
            f"**{ours[1] - theirs[1]:+.4f}** | {ours[2] / theirs[2]:.0f}× (different quantities) | | |"
        )
    return lines


def variants(data: Dataset, seeds: list[int]) -> list[str]:
    """Accuracy of boltzlab's other algorithms, 100 hidden units, 10 passes."""
    lines = ["", "| boltzlab variant (100 × 10) | accuracy, mean ± s.d. | fit (s), mean |", "|---|---|---|"]
    for name, extra in VARIANTS.items():
        results = [run_one(BernoulliRBM, data, 100, 10, seed, **extra) for seed in seeds]
        accuracy = [run.accuracy for run in results]
        deviation = statistics.stdev(accuracy) if len(accuracy) > 1 else 0.0
        fit = statistics.mean(run.fit_seconds for run in results)
        lines.append(f"| {name} | {statistics.mean(accuracy):.4f} ± {deviation:.4f} | {fit:.2f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=("plain", "nudged"), default="plain")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=1, help="torch's and the BLAS libraries' threads")
    parser.add_argument("--variants", action="store_true", help="also boltzlab's other algorithms")
    parser.add_argument("--out", type=Path, help="write the table as markdown here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", category=ConvergenceWarning)  # C=6000: newton-cg may stop at max_iter
    data = plain_digits() if args.data == "plain" else nudged_digits()
    header = [
        f"# scikit-learn's BernoulliRBM and boltzlab's on the digits ({data.name})",
        "",
        f"Command: `python benchmarks/{Path(__file__).name} {' '.join(sys.argv[1:])}`. "
        f"Data: {data.description}; {data.X_train.shape[0]} train, {data.X_test.shape[0]} test rows. "
        f"RBM: learning_rate {LEARNING_RATE}, batch_size 10, otherwise defaults; seeds {args.seeds}.",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores visible, {args.threads} thread(s) for torch "
        f"and BLAS; Python {platform.python_version()}, torch {torch.__version__}, scikit-learn "
        f"{sklearn.__version__}. Times are wall-clock seconds of this run, the two estimators "
        "alternating seed by seed; only the ratios carry over to another machine. The CPU time "
        "(`time.process_time`) of the first `score_samples` is what one thread spent on it, "
        "which a busy machine inflates less than the wall time.",
        "",
    ]
    with threadpool_limits(args.threads):
        lines = comparison(data, args.seeds)
        if args.variants:
            lines += variants(data, args.seeds)
    text = "\n".join(header + lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.write_text(text)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
