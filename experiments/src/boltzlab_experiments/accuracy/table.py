"""Repeated estimates of one ``log Z`` by several methods: the statistics every benchmark reports.

:class:`EstimateTable` holds estimates, their own standard errors and their costs per method,
setting (sweeps per chain, or K) and repeat, and computes bias, RMSE (with delta-method error
bars), coverage of the reported error bars and mean cost. The helpers here are shared by the
three benchmarks: distinct reproducible seeds, independent AIS runs as groups of one batch
(VAROPT), the comparison of two values that is "decisive" beyond two standard errors, and the merge of tables
that each hold some of the repeats (the repeats split over processes under torchrun).

**Exact or reference.** On the 784×20 benchmark RBMs ``log Z`` is enumerated; on a model the
user supplies (784×500, as in the papers) it is a *reference* with its own standard error,
``reference_stderr``: the errors are then measured against a value that is itself off by about
that much, the same for every estimate, so a bias or an RMSE below about twice it cannot be
resolved, and the coverage of an estimate's error bar counts both errors in quadrature.

**Cost** is counted in single-chain sweeps (the estimators' ``cost_sweeps``): AIS with K
temperatures makes ``K − 1`` sweeps per chain, RAISE ``K`` per reverse chain, RTS its initial
iterations plus the long run (:func:`boltzlab.estimators.tempered.budget.tempered_budget` splits a total
between them). VAROPT's independent AIS repetitions are run as one batch of chains split into
groups of ``n_chains`` (:func:`grouped_log_z`): each group is exactly an AIS run with
``n_chains`` chains, and the batch only shares matrix products. The RTS-paper benchmarks run
every repeat separately, with its own seed (RTS must: its initial iterations pool all chains to
adapt ``Ẑ``), so that a repeat's numbers do not depend on which process ran it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.numerics import log_ess, log_mean_exp, log_mean_exp_stderr

__all__ = [
    "Z_DECISIVE",
    "EstimateTable",
    "closest",
    "compare",
    "derive_seed",
    "empty_columns",
    "grouped_log_z",
    "merge_repeats",
    "quiet",
    "repeat_indices",
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
        The ``log Z`` the estimates are scored against, nats: exact, or a reference's value
        when ``reference_stderr`` is given.
    log_z, stderr : Tensor, shape (n_methods, n_settings, n_repeats), float64
        Estimates and their own reported standard errors, nats.
    cost_sweeps : Tensor, shape (n_methods, n_settings, n_repeats), float64
        Single-chain sweeps each estimate spent.
    seconds : Tensor, shape (n_methods, n_settings), float64
        Mean wall-clock seconds per estimate (process-seconds when the repeats ran on several
        processes: the sum over processes of their time, divided by the repeats).
    reference_stderr : float, optional
        ``None`` when ``exact_log_z`` is exact; else the standard error (nats) of the
        reference it holds (module docstring).
    """

    methods: tuple[str, ...]
    settings: tuple[int, ...]
    exact_log_z: float
    log_z: Tensor
    stderr: Tensor
    cost_sweeps: Tensor
    seconds: Tensor
    reference_stderr: float | None = None

    @property
    def n_repeats(self) -> int:
        return int(self.log_z.shape[2])

    @property
    def is_exact(self) -> bool:
        """Whether the estimates are scored against an exact ``log Z`` (not a reference)."""
        return self.reference_stderr is None

    @property
    def reference_se(self) -> float:
        """The reference's standard error, nats (0 for an exact ``log Z``)."""
        return 0.0 if self.reference_stderr is None else float(self.reference_stderr)

    @property
    def reference_word(self) -> str:
        """``"exact"`` or ``"reference"``: what the reports call the value the errors are taken from."""
        return "exact" if self.is_exact else "reference"

    def reference_label(self, digits: int = 3) -> str:
        """``"exact log Z = 12.345"`` or ``"reference log Z = 599.416 ± 0.071"``, for the reports."""
        if self.is_exact:
            return f"exact log Z = {self.exact_log_z:.{digits}f}"
        return f"reference log Z = {self.exact_log_z:.{digits}f} ± {self.reference_se:.{digits}f}"

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
        """Fraction of estimates within 2 standard errors of the exact (or reference) value.

        Against a reference the standard error is the estimate's own and the reference's in
        quadrature: both are off, independently.
        """
        spread = torch.sqrt(self.stderr.square() + self.reference_se**2)
        return (self.errors.abs() <= 2.0 * spread).to(torch.float64).mean(2)

    def mean_cost(self) -> Tensor:
        """Mean single-chain sweeps per estimate, shape (n_methods, n_settings)."""
        return self.cost_sweeps.mean(2)

    def index(self, method: str) -> int:
        """Row of ``method``."""
        return self.methods.index(method)

    def compare_rmse(self, first: tuple[int, int], second: tuple[int, int]) -> str:
        """:func:`compare` of two RMSEs, each ``(method row, setting column)``, counting the reference.

        An offset ``δ`` of a reference moves each RMSE by about ``δ·bias/RMSE``, which differs
        between methods whose biases differ, so ``reference_se·|b₁/r₁ − b₂/r₂|`` joins the
        difference's spread (nothing for an exact ``log Z``).
        """
        rmse, spread, bias = self.rmse(), self.rmse_stderr(), self.bias()
        r1, r2 = float(rmse[first]), float(rmse[second])
        shift = 0.0
        if r1 > 0 and r2 > 0:
            shift = self.reference_se * abs(float(bias[first]) / r1 - float(bias[second]) / r2)
        return compare(r1, math.hypot(float(spread[first]), shift), r2, float(spread[second]))


def empty_columns(n_methods: int, n_settings: int, n_repeats: int) -> dict[str, Tensor]:
    """NaN estimates and errors, zero costs and times: the columns of an :class:`EstimateTable` to fill."""
    shape = (n_methods, n_settings, n_repeats)
    return {
        "log_z": torch.full(shape, math.nan, dtype=torch.float64),
        "stderr": torch.full(shape, math.nan, dtype=torch.float64),
        "cost_sweeps": torch.zeros(shape, dtype=torch.float64),
        "seconds": torch.zeros(shape[:2], dtype=torch.float64),
    }


def repeat_indices(repeats: Sequence[int] | None, n_repeats: int) -> tuple[int, ...]:
    """The repeats a run computes: ``repeats`` checked (distinct, in ``[0, n_repeats)``), or all."""
    if repeats is None:
        return tuple(range(n_repeats))
    chosen = tuple(int(r) for r in repeats)
    if len(set(chosen)) != len(chosen) or any(not 0 <= r < n_repeats for r in chosen):
        raise ValidationError(f"repeats must be distinct indices below {n_repeats}, got {list(chosen)}")
    return chosen


def merge_repeats(tables: Sequence[EstimateTable], repeats: Sequence[Sequence[int]]) -> EstimateTable:
    """One table from tables that each computed some of the repeats (the others NaN or zero).

    Parameters
    ----------
    tables : sequence of EstimateTable
        Same methods, settings, reference and shape; table ``i`` holds the repeats
        ``repeats[i]`` and its ``seconds`` its own time divided by the number of repeats.
    repeats : sequence of sequence of int
        Which repeats each table holds; together every repeat exactly once.

    Returns
    -------
    EstimateTable
        Each repeat's column from the table that ran it, ``seconds`` summed (the mean
        process-seconds per estimate).
    """
    first = tables[0]
    n_repeats = first.n_repeats
    for table in tables[1:]:
        if (table.methods, table.settings, table.exact_log_z, table.reference_stderr, table.log_z.shape) != (
            first.methods, first.settings, first.exact_log_z, first.reference_stderr, first.log_z.shape,
        ):  # fmt: skip
            raise ValidationError("the tables to merge differ in methods, settings, reference or size")
    owners = [r for held in repeats for r in held]
    if sorted(owners) != list(range(n_repeats)):
        raise ValidationError(f"the parts must hold each of the {n_repeats} repeats once, got {owners}")
    columns = {name: getattr(first, name).clone() for name in ("log_z", "stderr", "cost_sweeps")}
    for table, held in zip(tables, repeats, strict=True):
        index = torch.tensor(list(held), dtype=torch.long)
        for name, column in columns.items():
            column[:, :, index] = getattr(table, name)[:, :, index]
    seconds = torch.stack([table.seconds for table in tables]).sum(0)
    return replace(first, seconds=seconds, **columns)


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
