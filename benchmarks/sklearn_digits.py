"""scikit-learn's "RBM features for digit classification" with its BernoulliRBM and with ours.

The example (scikit-learn's ``examples/neural_networks/plot_rbm_logistic_classification.py``):
the 8×8 digits nudged by one pixel in each of four directions (5× the data), min-max scaled to
[0, 1], an 80/20 train/test split with ``random_state=0``, and
``Pipeline([rbm, LogisticRegression(solver="newton-cg", C=6000)])`` with
``n_components=100, learning_rate=0.06, n_iter=10`` (the example's grid-searched settings),
next to logistic regression on the raw pixels (``C=100``). The example also sets ``tol=1``;
with scikit-learn 1.9 newton-cg then stops after 0 iterations (every classifier, the raw-pixel
one included, scores 0.097, chance), so the default tolerance is used here.

The RBM is scikit-learn's ``BernoulliRBM`` (PCD-1 with ``batch_size`` = 10 chains), then
``boltzlab.sklearn.BernoulliRBM`` with its defaults (PCD-1 with 100 chains), with CD-1, and
with flip-the-state PCD; each over several ``random_state`` seeds (the split stays fixed), so
the table gives test accuracy as mean ± s.d. over seeds, and the pipeline's fit time.

Usage::

    python benchmarks/sklearn_digits.py                  # 5 seeds, one thread
    python benchmarks/sklearn_digits.py --seeds 0 1 --threads 2
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from scipy.ndimage import convolve
from sklearn import datasets
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.neural_network import BernoulliRBM as SklearnRBM
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import minmax_scale

from boltzlab.sklearn import BernoulliRBM

SETTINGS = {"n_components": 100, "learning_rate": 0.06, "n_iter": 10}
SHIFTS = (
    [[0, 1, 0], [0, 0, 0], [0, 0, 0]],
    [[0, 0, 0], [1, 0, 0], [0, 0, 0]],
    [[0, 0, 0], [0, 0, 1], [0, 0, 0]],
    [[0, 0, 0], [0, 0, 0], [0, 1, 0]],
)
RBMS: dict[str, Callable[[int], Any]] = {
    "sklearn BernoulliRBM (PCD-1, 10 chains)": lambda seed: SklearnRBM(random_state=seed, **SETTINGS),
    "boltzlab default (PCD-1, 100 chains)": lambda seed: BernoulliRBM(random_state=seed, **SETTINGS),
    "boltzlab algorithm='cd' (CD-1)": lambda seed: BernoulliRBM(
        random_state=seed, algorithm="cd", **SETTINGS
    ),
    "boltzlab operator='flip' (PCD-1)": lambda seed: BernoulliRBM(
        random_state=seed, operator="flip", **SETTINGS
    ),
}


def nudged_digits() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The example's data: digits and their four one-pixel shifts, scaled to [0, 1], split 80/20."""
    X, y = datasets.load_digits(return_X_y=True)
    X = np.asarray(X, "float32")

    def shift(row: np.ndarray, weights: list[list[int]]) -> np.ndarray:
        return convolve(row.reshape((8, 8)), mode="constant", weights=weights).ravel()

    X = np.concatenate([X] + [np.apply_along_axis(shift, 1, X, weights) for weights in SHIFTS])
    y = np.concatenate([y] * 5)
    X = minmax_scale(X, feature_range=(0, 1))
    return train_test_split(X, y, test_size=0.2, random_state=0)


def logistic(C: float) -> LogisticRegression:
    return LogisticRegression(solver="newton-cg", C=C)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", category=ConvergenceWarning)  # C=6000: newton-cg may stop at max_iter
    X_train, X_test, y_train, y_test = nudged_digits()
    print(f"nudged digits: {X_train.shape[0]} train, {X_test.shape[0]} test rows, {X_train.shape[1]} pixels")
    print(f"RBM settings {SETTINGS}; LogisticRegression(newton-cg, C=6000); seeds {args.seeds}")
    print(f"torch threads: {args.threads}\n")
    raw = logistic(100.0).fit(X_train, y_train)
    print(f"{'raw pixels, LogisticRegression(C=100)':44s} accuracy {raw.score(X_test, y_test):.4f}")
    for name, make in RBMS.items():
        accuracies, seconds = [], []
        for seed in args.seeds:
            pipeline = Pipeline([("rbm", make(seed)), ("logistic", clone(logistic(6000.0)))])
            start = time.perf_counter()
            pipeline.fit(X_train, y_train)
            seconds.append(time.perf_counter() - start)
            accuracies.append(pipeline.score(X_test, y_test))
        spread = statistics.stdev(accuracies) if len(accuracies) > 1 else 0.0
        print(
            f"{name:44s} accuracy {statistics.mean(accuracies):.4f} ± {spread:.4f}  "
            f"(min {min(accuracies):.4f}, max {max(accuracies):.4f}; pipeline fit {statistics.mean(seconds):.1f} s)"
        )


if __name__ == "__main__":
    main()
