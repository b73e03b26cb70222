"""Learning curves of the flip-the-state study, and the Wilcoxon test of their maxima.

Brügge, Fischer & Igel (2013); docs/algorithms.md §2.2 ("Headline figures"). :func:`run_learning`
trains RBMs with CD-k, PCD-k and t-PT_k using Gibbs and flip, repeated with seeds, tracking the
exact log-likelihood; :func:`wilcoxon_table` compares the per-seed maxima by the Wilcoxon
signed-rank test (paired by seed: a repetition's initial weights and its generator seed are the
same for both operators, and both draw one uniform per unit, so they also see the same
minibatches).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from scipy import stats
from torch import Tensor

from boltzlab import RBM, train
from boltzlab.data import Dataset
from boltzlab_experiments.flip_the_state.config import FlipTheStateConfig
from boltzlab_experiments.flip_the_state.seeds import Progress, base_seed, derive_seed, report

__all__ = ["LearningResult", "LearningRun", "WilcoxonRow", "median", "run_learning", "wilcoxon_table"]


def median(values: Tensor) -> float:
    """The median, as the mean of the two middle values of an even sample."""
    # torch.median returns the lower middle value.
    return float(torch.quantile(values.to(torch.float64), 0.5))


@dataclass(frozen=True)
class LearningRun:
    """The exact log-likelihood curve of one training run.

    Attributes
    ----------
    dataset, algorithm, operator : str
    learning_rate : float
    seed : int
        Repetition index (0-based); runs with the same index share initial weights and seed.
    updates : Tensor, shape (n_records,), int64
    log_likelihood : Tensor, shape (n_records,), float64
        Exact mean training log-likelihood (nats per example) after ``updates``.
    """

    dataset: str
    learning_rate: float
    algorithm: str
    operator: str
    seed: int
    updates: Tensor
    log_likelihood: Tensor

    @property
    def max_log_likelihood(self) -> float:
        return float(self.log_likelihood.max())

    @property
    def update_of_max(self) -> int:
        return int(self.updates[int(self.log_likelihood.argmax())])


@dataclass(frozen=True)
class LearningResult:
    """All learning runs, in the order they ran."""

    runs: tuple[LearningRun, ...]

    def select(self, **where: object) -> tuple[LearningRun, ...]:
        """Runs whose attributes equal the given values, e.g. ``select(dataset="mnist")``."""
        return tuple(
            run for run in self.runs if all(getattr(run, key) == value for key, value in where.items())
        )

    def settings(self) -> tuple[tuple[str, float, str], ...]:
        """Distinct ``(dataset, learning_rate, algorithm)`` in run order."""
        return tuple(dict.fromkeys((run.dataset, run.learning_rate, run.algorithm) for run in self.runs))


def run_learning(
    config: FlipTheStateConfig,
    datasets: Mapping[str, Dataset],
    *,
    generator: torch.Generator | int | None = None,
    progress: Progress | None = None,
) -> LearningResult:
    """Train every configured (setup, rate, repetition, algorithm, operator) with exact tracking.

    Parameters
    ----------
    config : FlipTheStateConfig
    datasets : mapping of DatasetSpec.name to Dataset
        Setups whose dataset is missing are left out (the caller reports why).
    generator : torch.Generator or int, optional
        The study's randomness: one base seed is drawn from it, and repetition ``r`` of a setup
        derives its initial weights and its training seed from ``(base, dataset, r)`` only, so
        all algorithms, operators and rates of a repetition start from the same RBM.
    progress : callable (done, total, label), optional
        Called after each run (and once with ``done = 0``).
    """
    base = base_seed(generator)
    setups = [setup for setup in config.learning if setup.data.name in datasets]
    jobs = [
        (setup, rate, repetition, algorithm, operator)
        for setup in setups
        for rate in config.learning_rates
        for repetition in range(config.n_seeds)
        for algorithm in config.algorithms
        for operator in config.operators
    ]
    runs = []
    report(progress, 0, len(jobs), "starting")
    for index, (setup, rate, repetition, algorithm, operator) in enumerate(jobs):
        data = datasets[setup.data.name].train
        batch_size = data.shape[0] if setup.batch_size is None else min(setup.batch_size, data.shape[0])
        model = RBM(
            data.shape[1], setup.n_hidden, generator=derive_seed(base, setup.data.name, repetition, "init")
        )
        result = train(
            model,
            data,
            algorithm=algorithm,
            algorithm_params={"n_levels": config.pt_levels} if algorithm == "pt" else None,
            operator=operator,
            k=config.k,
            n_chains=batch_size,
            batch_size=batch_size,
            n_updates=setup.n_updates,
            learning_rate=rate,
            generator=derive_seed(base, setup.data.name, repetition, "train"),
            track_exact_every=config.evaluate_every,
            log_every=config.evaluate_every,
        )
        tracked = [record for record in result.history if record.train_log_likelihood is not None]
        runs.append(
            LearningRun(
                dataset=setup.data.name,
                learning_rate=rate,
                algorithm=algorithm,
                operator=operator,
                seed=repetition,
                updates=torch.tensor([record.update for record in tracked], dtype=torch.int64),
                log_likelihood=torch.tensor(
                    [record.train_log_likelihood for record in tracked], dtype=torch.float64
                ),
            )
        )
        report(progress, index + 1, len(jobs), f"{setup.data.name} {algorithm}-{config.k} {operator}")
    return LearningResult(runs=tuple(runs))


@dataclass(frozen=True)
class WilcoxonRow:
    """Wilcoxon signed-rank test of ``operator`` against ``reference`` on per-seed maxima.

    Attributes
    ----------
    dataset, algorithm : str
    learning_rate : float
    n_pairs : int
        Repetitions with both operators.
    median_reference, median_operator : float
        Median over repetitions of the maximum log-likelihood (nats).
    median_difference : float
        Median of the paired differences ``operator − reference``.
    operator_wins : int
        Repetitions where the operator's maximum is higher.
    statistic, p_value : float
        SciPy's two-sided test (exact distribution for small samples without ties).
    min_p_value : float
        Smallest two-sided p the exact test can give with ``n`` non-zero differences, ``2/2^n``:
        with 5 or fewer it is above 0.05, so no result can be significant at 5 %.
    alpha : float
    """

    dataset: str
    learning_rate: float
    algorithm: str
    n_pairs: int
    median_reference: float
    median_operator: float
    median_difference: float
    operator_wins: int
    statistic: float
    p_value: float
    min_p_value: float
    alpha: float = 0.05

    @property
    def verdict(self) -> str:
        """``"operator higher"``, ``"reference higher"``, ``"no significant difference"`` or
        ``"too few pairs"`` (the test cannot reach ``alpha``)."""
        if self.min_p_value >= self.alpha:
            return "too few pairs"
        if self.p_value < self.alpha:
            return "operator higher" if self.median_difference > 0 else "reference higher"
        return "no significant difference"


def wilcoxon_table(
    result: LearningResult, *, operator: str = "flip", reference: str = "gibbs", alpha: float = 0.05
) -> tuple[WilcoxonRow, ...]:
    """One :class:`WilcoxonRow` per (dataset, learning rate, algorithm), pairing runs by seed."""
    rows = []
    for dataset, rate, algorithm in result.settings():
        setting = result.select(dataset=dataset, learning_rate=rate, algorithm=algorithm)
        by_operator = {
            name: {run.seed: run.max_log_likelihood for run in setting if run.operator == name}
            for name in (operator, reference)
        }
        seeds = sorted(set(by_operator[operator]) & set(by_operator[reference]))
        if not seeds:
            continue
        ours = torch.tensor([by_operator[operator][s] for s in seeds], dtype=torch.float64)
        theirs = torch.tensor([by_operator[reference][s] for s in seeds], dtype=torch.float64)
        difference = ours - theirs
        if bool((difference == 0).all()):
            statistic, p_value = math.nan, 1.0  # SciPy divides by zero here; nothing to test
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", category=RuntimeWarning)
                test = stats.wilcoxon(ours.numpy(), theirs.numpy(), alternative="two-sided")
            statistic, p_value = float(test.statistic), float(test.pvalue)
        rows.append(
            WilcoxonRow(
                dataset=dataset,
                learning_rate=rate,
                algorithm=algorithm,
                n_pairs=len(seeds),
                median_reference=median(theirs),
                median_operator=median(ours),
                median_difference=median(difference),
                operator_wins=int((difference > 0).sum()),
                statistic=statistic,
                p_value=p_value,
                # SciPy drops zero differences before ranking ("wilcox" zero method).
                min_p_value=min(1.0, 2.0 / 2 ** int((difference != 0).sum())),
                alpha=alpha,
            )
        )
    return tuple(rows)
