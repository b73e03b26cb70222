"""AIS schedules compared by log Ẑ and ESS (Kiwaki 2015, Table 1).

Kiwaki (2015), Table 1 (docs/algorithms.md §5.4, docs/open-questions.md items 5 and 12): log Ẑ and Kish's
ESS of AIS with the LINEAR, SM08 (Salakhutdinov & Murray 2008), GMS13 (Grosse et al. 2013),
VAROPT and decelerated VAROPT (δ = 0.003, 0.006, 0.009) schedules for K from 10^3 up, per
training algorithm. The paper's claim: VAROPT (decelerated, δ = .009) has the highest ESS at
the largest K. Its M was lost (ESS values up to 873 suggest 1,000); the scaled default uses
M = 100.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.estimators import ais, decelerated, gms13, varopt
from boltzlab.estimators.annealing.adaptive_schedules import schedule_from_g
from boltzlab.estimators.annealing.schedules import get_schedule
from boltzlab_experiments.accuracy.models import BenchmarkModel, TrainingConfig
from boltzlab_experiments.accuracy.table import (
    compare,
    derive_seed,
    grouped_log_z,
    quiet,
)
from boltzlab_experiments.cli import Progress
from boltzlab_experiments.findings import Finding
from boltzlab_experiments.presets import load_preset

__all__ = ["VaroptConfig", "VaroptResult", "run_varopt", "schedule_label", "schedules_at", "varopt_finding"]


def schedule_label(name: str) -> str:
    """Display name of a schedule key: ``"varopt_0.009"`` → ``"VAROPT_.009"``, as in Kiwaki's tables."""
    if name.startswith("varopt_"):
        return "VAROPT_" + name.removeprefix("varopt_").removeprefix("0")
    return name.upper()


@dataclass(frozen=True)
class VaroptConfig:
    """Sizes of the schedule comparison (Kiwaki 2015, Table 1).

    Attributes
    ----------
    label : str
    training : TrainingConfig
    models : tuple of str
        Benchmark RBMs (:data:`MODEL_SPECS`), one table row each.
    temperatures : tuple of int
        K values; the verdict is read at the largest.
    n_chains : int
        M, chains per AIS run (the paper's was probably 1,000).
    n_repeats : int
        Independent AIS runs per schedule and K (same schedule: the pilot is run once per model).
    deltas : tuple of float
        Deceleration caps of the decelerated VAROPT schedules (need ``K·δ ≥ 1``).
    varopt_options, gms13_options : mapping
        Options of the adaptive builders (pilot sizes, knots).
    """

    label: str
    training: TrainingConfig
    models: tuple[str, ...]
    temperatures: tuple[int, ...]
    n_chains: int
    n_repeats: int
    deltas: tuple[float, ...] = (0.009, 0.006, 0.003)
    varopt_options: Mapping[str, Any] = field(default_factory=dict)
    gms13_options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def schedules(self) -> tuple[str, ...]:
        """Schedule keys in table order: VAROPT, its decelerated versions, LINEAR, SM08, GMS13."""
        return ("varopt", *(f"varopt_{delta:g}" for delta in self.deltas), "linear", "sm08", "gms13")

    @classmethod
    def preset(cls, name: str) -> VaroptConfig:
        """The ``[varopt]`` table of the preset ``name`` (with the shared ``[training]``)."""
        return load_preset(cls, __package__, name, section="varopt", shared=("training",))

    @classmethod
    def scaled(cls) -> VaroptConfig:
        """Two runs of M = 100 per point: under 8 minutes on a shared 2-core machine."""
        return cls.preset("scaled")

    @classmethod
    def full(cls) -> VaroptConfig:
        """K up to 10^5 with M = 1,000 chains, as the paper probably had (slow)."""
        return cls.preset("full")

    @classmethod
    def tiny(cls) -> VaroptConfig:
        """Seconds on toy data; checks the pipeline only."""
        return cls.preset("tiny")


@dataclass(frozen=True)
class VaroptResult:
    """What :func:`run_varopt` measured.

    Attributes
    ----------
    config : VaroptConfig
    model_names, model_labels : tuple of str
    exact_log_z : Tensor, shape (n_models,), float64
    schedules : tuple of str
        Schedule keys (see :func:`schedule_label`).
    log_z, stderr, ess : Tensor, shape (n_models, n_schedules, n_temperatures, n_repeats), float64
        AIS estimates, their standard errors, and Kish's ESS ``(Σw)²/Σw²`` of the final
        weights of each run of ``n_chains`` chains.
    seconds : Tensor, shape (n_models, n_schedules, n_temperatures), float64
        Mean wall-clock seconds per AIS run.
    pilot_sweeps : Tensor, shape (n_models, 2), float64
        Sweeps spent measuring the model for VAROPT (column 0) and GMS13 (column 1).
    betas : tuple of tuple of Tensor
        ``betas[model][schedule]``: the schedule at the smallest K, shape (K + 1,).
    """

    config: VaroptConfig
    model_names: tuple[str, ...]
    model_labels: tuple[str, ...]
    exact_log_z: Tensor
    schedules: tuple[str, ...]
    log_z: Tensor
    stderr: Tensor
    ess: Tensor
    seconds: Tensor
    pilot_sweeps: Tensor
    betas: tuple[tuple[Tensor, ...], ...]

    def mean_ess(self) -> Tensor:
        """Mean ESS over repeats, shape (n_models, n_schedules, n_temperatures)."""
        return self.ess.mean(3)

    def ess_stderr(self) -> Tensor:
        """Standard error of :meth:`mean_ess` (NaN with one repeat)."""
        n = self.ess.shape[3]
        if n < 2:
            return torch.full(self.ess.shape[:3], math.nan, dtype=torch.float64)
        return self.ess.std(3) / math.sqrt(n)

    def mean_error(self) -> Tensor:
        """Mean ``log Ẑ − log Z`` over repeats, shape (n_models, n_schedules, n_temperatures)."""
        return (self.log_z - self.exact_log_z[:, None, None, None]).mean(3)


def schedules_at(
    config: VaroptConfig, n_temperatures: int, varopt_info: Any, gms13_info: Any
) -> dict[str, Tensor]:
    """Every schedule of the comparison at ``K = n_temperatures``."""
    optimal = schedule_from_g(varopt_info.curve_grid, varopt_info.g_curve, n_temperatures)
    betas = {"varopt": optimal}
    for delta in config.deltas:
        betas[f"varopt_{delta:g}"] = decelerated(optimal, delta)
    betas["linear"] = get_schedule("linear", n_temperatures)
    betas["sm08"] = get_schedule("sm08", n_temperatures)
    betas["gms13"] = schedule_from_g(gms13_info.curve_grid, gms13_info.g_curve, n_temperatures)
    return betas


def run_varopt(
    config: VaroptConfig, benchmarks: Sequence[BenchmarkModel], *, seed: int = 0, progress: Progress = quiet
) -> VaroptResult:
    """AIS with every schedule at every K on every model, ``n_repeats`` runs of ``n_chains`` each.

    The VAROPT pilot and the GMS13 knot runs are made once per model at the largest K; their
    measured g curves give the schedules at every K (:func:`schedule_from_g`).
    """
    largest = max(config.temperatures)
    for delta in config.deltas:
        if min(config.temperatures) * delta < 1.0:
            raise ValidationError(
                f"deceleration delta={delta} needs K*delta >= 1, but the smallest K is {min(config.temperatures)}"
            )
    schedules = config.schedules
    shape = (len(benchmarks), len(schedules), len(config.temperatures), config.n_repeats)
    log_z = torch.full(shape, math.nan, dtype=torch.float64)
    stderr, ess = log_z.clone(), log_z.clone()
    seconds = torch.zeros(shape[:3], dtype=torch.float64)
    pilot = torch.zeros(len(benchmarks), 2, dtype=torch.float64)
    plotted: list[tuple[Tensor, ...]] = []
    total, done = len(benchmarks) * len(schedules) * len(config.temperatures), 0
    for m, benchmark in enumerate(benchmarks):
        varopt_info = varopt(
            benchmark.model, largest, generator=derive_seed(seed, 6, m), **config.varopt_options
        )
        gms13_info = gms13(
            benchmark.model, largest, generator=derive_seed(seed, 7, m), **config.gms13_options
        )
        pilot[m] = torch.tensor([varopt_info.cost_sweeps, gms13_info.cost_sweeps], dtype=torch.float64)
        for k_index, n_temperatures in enumerate(config.temperatures):
            betas = schedules_at(config, n_temperatures, varopt_info, gms13_info)
            if k_index == 0:
                plotted.append(tuple(betas[name] for name in schedules))
            for s, name in enumerate(schedules):
                started = time.perf_counter()
                estimate = ais(
                    benchmark.model,
                    n_chains=config.n_chains * config.n_repeats,
                    schedule=betas[name],
                    generator=derive_seed(seed, 8, m, s, k_index),
                    record_ess=False,
                )
                grouped = grouped_log_z(estimate.info.log_weights, config.n_repeats)
                log_z[m, s, k_index], stderr[m, s, k_index], ess[m, s, k_index] = grouped
                seconds[m, s, k_index] = (time.perf_counter() - started) / config.n_repeats
                done += 1
                progress(done, total, f"{benchmark.label} {schedule_label(name)} K={n_temperatures}")
    return VaroptResult(
        config=config,
        model_names=tuple(b.name for b in benchmarks),
        model_labels=tuple(b.label for b in benchmarks),
        exact_log_z=torch.tensor([b.exact_log_z for b in benchmarks], dtype=torch.float64),
        schedules=schedules,
        log_z=log_z,
        stderr=stderr,
        ess=ess,
        seconds=seconds,
        pilot_sweeps=pilot,
        betas=tuple(plotted),
    )


def varopt_finding(result: VaroptResult) -> Finding:
    """Does a VAROPT schedule (plain or decelerated) have the highest ESS at the largest K?

    Per model: the best VAROPT-family mean ESS against the best of LINEAR, SM08 and GMS13;
    ``"confirmed"`` when higher by more than 2 standard errors, ``"contradicted"`` when lower
    by more, else ``"inconclusive"`` (always with a single repeat). Overall: the per-model
    verdict when all agree, else ``"mixed"``.
    """
    k_index = len(result.config.temperatures) - 1
    largest = result.config.temperatures[k_index]
    mean, stderr = result.mean_ess()[:, :, k_index], result.ess_stderr()[:, :, k_index]
    family = [s for s, name in enumerate(result.schedules) if name.startswith("varopt")]
    others = [s for s in range(len(result.schedules)) if s not in family]
    verdicts, parts = [], []
    for m, label in enumerate(result.model_labels):
        best_family = max(family, key=lambda s: float(mean[m, s]))
        best_other = max(others, key=lambda s: float(mean[m, s]))
        outcome = compare(
            float(mean[m, best_other]),
            float(stderr[m, best_other]),
            float(mean[m, best_family]),
            float(stderr[m, best_family]),
        )
        verdicts.append({"smaller": "confirmed", "larger": "contradicted", "tie": "inconclusive"}[outcome])
        best = int(mean[m].argmax())
        parts.append(
            f"{label}: highest ESS {schedule_label(result.schedules[best])} ({float(mean[m, best]):.1f}); best VAROPT "
            f"{schedule_label(result.schedules[best_family])} {float(mean[m, best_family]):.1f} ± "
            f"{float(stderr[m, best_family]):.1f} vs best other {schedule_label(result.schedules[best_other])} "
            f"{float(mean[m, best_other]):.1f} ± {float(stderr[m, best_other]):.1f} → {verdicts[-1]}"
        )
    verdict = verdicts[0] if len(set(verdicts)) == 1 else "mixed"
    n = result.ess.shape[3]
    text = (
        f"At K = {largest:,} with M = {result.config.n_chains} chains ({n} run(s) per schedule; ESS of "
        f"{result.config.n_chains} at most): " + "; ".join(parts) + "."
    )
    if n < 2:
        text += " One run per schedule gives no error bar, so no verdict is decisive."
    return Finding(
        part="varopt",
        claim=f"VAROPT (plain or decelerated) has the highest ESS at the largest K ({largest:,})",
        verdict=verdict,
        text=text,
    )
