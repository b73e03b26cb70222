"""Repeated estimates of one ``log Z`` by several methods: the statistics every benchmark reports.

:class:`EstimateTable` holds estimates, their own standard errors and their costs per method,
setting (sweeps per chain, or K) and repeat, and computes bias, RMSE (with delta-method error
bars), coverage of the reported error bars and mean cost. The helpers here are shared by the
three benchmarks: distinct reproducible seeds, independent AIS runs as groups of one batch, and
the comparison of two values that is "decisive" beyond two standard errors.

**Cost** is counted in single-chain sweeps (the estimators' ``cost_sweeps``): AIS with K
temperatures makes ``K − 1`` sweeps per chain, RAISE ``K`` per reverse chain, RTS its initial
iterations plus the long run (:func:`boltzlab.estimators.tempered.budget.tempered_budget` splits a total
between them). Independent AIS (or RAISE) repetitions are run as one batch of chains split into
groups of ``n_chains``: each group is exactly an AIS run with ``n_chains`` chains, and the batch
only shares matrix products. RTS repetitions are separate runs, since its initial iterations
pool all chains to adapt ``Ẑ``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab.numerics import log_ess, log_mean_exp, log_mean_exp_stderr

__all__ = [
    "Z_DECISIVE",
    "EstimateTable",
    "closest",
    "compare",
    "derive_seed",
    "empty_columns",
    "grouped_log_z",
    "quiet",
]

# A difference counts as real when it exceeds this many standard errors (about 95 %).
Z_DECISIVE = 2.0


def quiet(done: int, total: int, label: str) -> None:
    """The default progress callback: report nothing."""


def derive_seed(seed: int, *parts: int) -> int:
    """A distinct, reproducible seed for each (benchmark part, setting, repeat)."""
    value = int(seed)
    for part in parts:
        value = value * 1_000_003 + int(part) + 1
    return value % (2**62)


@dataclass(frozen=True)
class EstimateTable:
    """Repeated estimates of one ``log Z`` by several methods at several settings.

    Attributes
    ----------
    methods : tuple of str
    settings : tuple of int
        Sweeps per chain (RTS vs AIS) or numbers of temperatures (estimators vs K).
    exact_log_z : float
    log_z, stderr : Tensor, shape (n_methods, n_settings, n_repeats), float64
        Estimates and their own reported standard errors, nats.
    cost_sweeps : Tensor, shape (n_methods, n_settings, n_repeats), float64
        Single-chain sweeps each estimate spent.
    seconds : Tensor, shape (n_methods, n_settings), float64
        Mean wall-clock seconds per estimate.
    """

    methods: tuple[str, ...]
    settings: tuple[int, ...]
    exact_log_z: float
    log_z: Tensor
    stderr: Tensor
    cost_sweeps: Tensor
    seconds: Tensor

    @property
    def n_repeats(self) -> int:
        return int(self.log_z.shape[2])

    @property
    def errors(self) -> Tensor:
        """``log Ẑ − log Z``, shape (n_methods, n_settings, n_repeats)."""
        return self.log_z - self.exact_log_z

    def bias(self) -> Tensor:
        """Mean error, shape (n_methods, n_settings)."""
        return self.errors.mean(2)

    def bias_stderr(self) -> Tensor:
        """Standard error of :meth:`bias` (NaN with one repeat)."""
        if self.n_repeats < 2:
            return torch.full(self.log_z.shape[:2], math.nan, dtype=torch.float64)
        return self.errors.std(2) / math.sqrt(self.n_repeats)

    def rmse(self) -> Tensor:
        """Root mean squared error against the exact value, shape (n_methods, n_settings)."""
        return self.errors.square().mean(2).sqrt()

    def rmse_stderr(self) -> Tensor:
        """Delta-method standard error of :meth:`rmse`: ``sd(e²)/√n / (2·RMSE)`` (NaN with one repeat)."""
        if self.n_repeats < 2:
            return torch.full(self.log_z.shape[:2], math.nan, dtype=torch.float64)
        squared = self.errors.square()
        return squared.std(2) / math.sqrt(self.n_repeats) / (2.0 * self.rmse().clamp_min(1e-300))

    def mean_stderr(self) -> Tensor:
        """Mean of the estimators' own standard errors, shape (n_methods, n_settings)."""
        return self.stderr.mean(2)

    def coverage(self) -> Tensor:
        """Fraction of estimates within 2 of their own standard errors of the exact value."""
        return (self.errors.abs() <= 2.0 * self.stderr).to(torch.float64).mean(2)

    def mean_cost(self) -> Tensor:
        """Mean single-chain sweeps per estimate, shape (n_methods, n_settings)."""
        return self.cost_sweeps.mean(2)

    def index(self, method: str) -> int:
        """Row of ``method``."""
        return self.methods.index(method)


def empty_columns(n_methods: int, n_settings: int, n_repeats: int) -> dict[str, Tensor]:
    """NaN estimates and errors, zero costs and times: the columns of an :class:`EstimateTable` to fill."""
    shape = (n_methods, n_settings, n_repeats)
    return {
        "log_z": torch.full(shape, math.nan, dtype=torch.float64),
        "stderr": torch.full(shape, math.nan, dtype=torch.float64),
        "cost_sweeps": torch.zeros(shape, dtype=torch.float64),
        "seconds": torch.zeros(shape[:2], dtype=torch.float64),
    }


def grouped_log_z(log_weights: Tensor, n_groups: int) -> tuple[Tensor, Tensor, Tensor]:
    """``log mean exp``, its delta-method error and Kish's ESS of each of ``n_groups`` equal groups."""
    grouped = log_weights.reshape(n_groups, -1)
    stderr = torch.tensor([log_mean_exp_stderr(row) for row in grouped], dtype=torch.float64)
    return log_mean_exp(grouped, dim=1), stderr, log_ess(grouped.t()).exp()


def closest(settings: Sequence[int], target: int) -> int:
    """Index of the setting closest to ``target`` on a log scale."""
    return min(range(len(settings)), key=lambda i: abs(math.log(settings[i] / target)))


def compare(low: float, low_se: float, high: float, high_se: float) -> str:
    """``"smaller"``, ``"larger"`` or ``"tie"``: ``low`` against ``high``, decisive beyond 2 s.e."""
    spread = math.hypot(low_se, high_se)
    if not math.isfinite(spread):
        return "tie"
    if low + Z_DECISIVE * spread < high:
        return "smaller"
    if low - Z_DECISIVE * spread > high:
        return "larger"
    return "tie"
