"""Estimators against the number of temperatures (Carlson et al. 2016, Fig. 4).

The RMSE against the number of temperatures K of RTS, TS, TI, TI-RB and MBAR, all computed
from the same tempered samples (one sampler run per K and repeat, a fixed budget of sweeps);
docs/algorithms.md §4.3. The paper bootstrapped one 3-million-sample run; we repeat independent
runs and compare with the exact ``log Z`` of the 784×20 benchmark RBMs, or, on a model the user
supplies (the paper's 784×500), with a reference ``log Z`` and its standard error.

The sampler's ladder is :func:`~boltzlab.estimators.collect_tempered_samples`'s default, linear
in β from ``Ẑ = 1`` (the paper's), or the library's adaptive ladder placed from a pilot
annealing run (``ladder="adaptive"``, the ``paper`` preset: on a 784×500 MNIST RBM a linear
ladder from ``Ẑ = 1`` does not mix). Each (K, repeat) run has its own seed, so any subset of
the repeats can run apart (a process's share under torchrun) and be merged
(:func:`merge_estimators_vs_k`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from boltzlab import distributed
from boltzlab.errors import ValidationError
from boltzlab.estimators import collect_tempered_samples
from boltzlab.estimators.tempered.ladders import adaptive_ladder
from boltzlab.estimators.tempered.mbar import mbar_from_samples
from boltzlab.estimators.tempered.rts import rts_from_samples
from boltzlab.estimators.tempered.samples import TemperedSamples
from boltzlab.estimators.tempered.ti import ti_from_samples, ti_rb_from_samples
from boltzlab.rng import make_generator
from boltzlab_experiments.accuracy.models import BenchmarkModel, TrainingConfig
from boltzlab_experiments.accuracy.table import (
    Z_DECISIVE,
    EstimateTable,
    derive_seed,
    empty_columns,
    merge_repeats,
    quiet,
    repeat_indices,
)
from boltzlab_experiments.cli import Progress
from boltzlab_experiments.findings import Finding
from boltzlab_experiments.presets import load_preset

__all__ = [
    "ESTIMATORS_FROM_SAMPLES",
    "SAMPLER_LADDERS",
    "EstimatorsVsKConfig",
    "EstimatorsVsKResult",
    "estimators_vs_k_finding",
    "merge_estimators_vs_k",
    "run_estimators_vs_k",
]

#: The sampler's ladders: linear in β from ``Ẑ = 1`` (the paper's, the sampler's default), or
#: placed at equal thermodynamic length from a pilot annealing run that also gives ``log Ẑ``.
SAMPLER_LADDERS = ("linear", "adaptive")


ESTIMATORS_FROM_SAMPLES: dict[str, Callable[[Any], Any]] = {
    "rts": lambda samples: rts_from_samples(samples),
    "ts": lambda samples: rts_from_samples(samples, statistic="counts"),
    "ti": ti_from_samples,
    "ti-rb": ti_rb_from_samples,
    "mbar": mbar_from_samples,
}


@dataclass(frozen=True)
class EstimatorsVsKConfig:
    """Sizes of the RMSE-vs-K benchmark (RTS paper, Fig. 4).

    Attributes
    ----------
    label : str
    training : TrainingConfig
    model : str
    levels : tuple of int
        Numbers of temperatures K.
    n_chains, n_sweeps : int
        Chains and long-run sweeps of each sampler run (the fixed budget; the initial
        iterations, at most 10 × 50 sweeps, and an adaptive ladder's pilot come on top).
    n_repeats : int
    max_log_densities : int
        MBAR's cap on kept ``N × K`` log-densities.
    ladder : {"linear", "adaptive"}
        The sampler's ladder (:data:`SAMPLER_LADDERS`).
    pilot_temperatures : int
        Temperatures of the adaptive ladder's pilot annealing run (``n_chains`` chains of
        ``pilot_temperatures − 1`` sweeps each, counted in every method's cost); unused when linear.
    """

    label: str
    training: TrainingConfig
    model: str
    levels: tuple[int, ...]
    n_chains: int
    n_sweeps: int
    n_repeats: int
    max_log_densities: int = 1_000_000
    ladder: str = "linear"
    pilot_temperatures: int = 1000

    def __post_init__(self) -> None:
        if self.ladder not in SAMPLER_LADDERS:
            raise ValidationError(f"ladder must be one of {', '.join(SAMPLER_LADDERS)}, got {self.ladder!r}")

    @classmethod
    def preset(cls, name: str) -> EstimatorsVsKConfig:
        """The ``[estimators-vs-k]`` table of the preset ``name`` (with the shared ``[training]``)."""
        return load_preset(cls, __package__, name, section="estimators-vs-k", shared=("training",))

    @classmethod
    def scaled(cls) -> EstimatorsVsKConfig:
        """Under ten minutes on one core (``presets/scaled.toml``)."""
        return cls.preset("scaled")

    @classmethod
    def full(cls) -> EstimatorsVsKConfig:
        """Closer to the paper: more temperatures, sweeps and repeats (slow)."""
        return cls.preset("full")

    @classmethod
    def tiny(cls) -> EstimatorsVsKConfig:
        """Seconds on toy data; checks the pipeline only."""
        return cls.preset("tiny")

    @classmethod
    def paper(cls) -> EstimatorsVsKConfig:
        """The paper's sizes with the library's adaptive ladder, for its 784×500 RBM (``presets/paper.toml``; about an hour of one core)."""
        return cls.preset("paper")


@dataclass(frozen=True)
class EstimatorsVsKResult:
    """What :func:`run_estimators_vs_k` measured.

    Attributes
    ----------
    config : EstimatorsVsKConfig
    model_name, model_label : str
    table : EstimateTable
        Methods ``("rts", "ts", "ti", "ti-rb", "mbar")`` × K × repeats; ``seconds`` is each
        method's analysis time only.
    sampling_seconds : Tensor, shape (n_levels,), float64
        Mean wall-clock seconds of one sampler run (shared by all five methods).
    stopped : Tensor, shape (n_levels,), float64
        Fraction of runs whose initial iterations met the stopping rule.
    repeats : tuple of int, optional
        The repeats held when only some are (a process's share: the others' columns are NaN,
        and ``sampling_seconds`` and ``stopped`` sum over the held repeats divided by
        ``n_repeats``); ``None`` when all are.
    """

    config: EstimatorsVsKConfig
    model_name: str
    model_label: str
    table: EstimateTable
    sampling_seconds: Tensor
    stopped: Tensor
    repeats: tuple[int, ...] | None = None


def run_estimators_vs_k(
    config: EstimatorsVsKConfig,
    benchmark: BenchmarkModel,
    *,
    seed: int = 0,
    repeats: Sequence[int] | None = None,
    progress: Progress = quiet,
) -> EstimatorsVsKResult:
    """For each K and repeat: one tempered-sampler run, and all five estimates from its samples.

    Parameters
    ----------
    config : EstimatorsVsKConfig
    benchmark : BenchmarkModel
    seed : int, default 0
    repeats : sequence of int, optional
        Run only these repeats (a process's share); the others' columns stay NaN. Default all.
    progress : callable ``(done, total, label)``, optional

    Returns
    -------
    EstimatorsVsKResult
        Times and stopping fractions are sums over the repeats run divided by ``n_repeats``,
        so that shares add up (:func:`merge_estimators_vs_k`). Each run stays on this
        process (``distributed.local``): under torchrun the split is by repeats.
    """
    methods = tuple(ESTIMATORS_FROM_SAMPLES)
    n_levels, n_repeats = len(config.levels), config.n_repeats
    mine = repeat_indices(repeats, n_repeats)
    out = empty_columns(len(methods), n_levels, n_repeats)
    sampling = torch.zeros(n_levels, dtype=torch.float64)
    stopped = torch.zeros(n_levels, dtype=torch.float64)
    done = 0
    with distributed.local():
        for k_index, n_temperatures in enumerate(config.levels):
            for r in mine:
                started = time.perf_counter()
                samples = _sample(config, benchmark, n_temperatures, derive_seed(seed, 5, k_index, r))
                sampling[k_index] += (time.perf_counter() - started) / n_repeats
                stopped[k_index] += float(samples.stopped) / n_repeats
                for m, method in enumerate(methods):
                    started = time.perf_counter()
                    estimate = ESTIMATORS_FROM_SAMPLES[method](samples)
                    out["seconds"][m, k_index] += (time.perf_counter() - started) / n_repeats
                    out["log_z"][m, k_index, r] = estimate.log_z
                    out["stderr"][m, k_index, r] = estimate.stderr
                    out["cost_sweeps"][m, k_index, r] = estimate.cost_sweeps
                done += 1
                progress(done, n_levels * len(mine), f"K={n_temperatures}")
    table = EstimateTable(
        methods,
        tuple(config.levels),
        benchmark.exact_log_z,
        **out,
        reference_stderr=benchmark.reference_stderr,
    )
    return EstimatorsVsKResult(
        config,
        benchmark.name,
        benchmark.label,
        table,
        sampling,
        stopped,
        None if repeats is None else mine,
    )


def _sample(
    config: EstimatorsVsKConfig, benchmark: BenchmarkModel, n_temperatures: int, seed: int
) -> TemperedSamples:
    """One run of RTS's tempered sampler with K = ``n_temperatures`` on the configured ladder.

    The adaptive ladder's pilot draws from the run's generator first, as the library's tempered
    estimators do, and its chain-sweeps count in the samples' cost.
    """
    options: dict[str, Any] = {
        "n_chains": config.n_chains,
        "n_sweeps": config.n_sweeps,
        "record_derivatives": True,
        "record_weighted_derivatives": True,
        "record_log_densities": True,
        "max_log_densities": config.max_log_densities,
    }
    model = benchmark.model
    if config.ladder == "linear":
        # The sampler's default: K levels linear in β, from Ẑ = 1.
        return collect_tempered_samples(model, n_temperatures=n_temperatures, generator=seed, **options)
    generator = make_generator(seed, model.device)
    placed = adaptive_ladder(
        model,
        n_temperatures,
        generator=generator,
        pilot_chains=config.n_chains,
        pilot_temperatures=config.pilot_temperatures,
    )
    samples = collect_tempered_samples(
        model, ladder=placed.ladder, initial_log_z=placed.initial_log_z, generator=generator, **options
    )
    return replace(samples, earlier_cost_sweeps=samples.earlier_cost_sweeps + placed.cost_sweeps)


def merge_estimators_vs_k(parts: Sequence[EstimatorsVsKResult]) -> EstimatorsVsKResult:
    """One result from the shares of the repeats that several runs computed (e.g. one per process).

    Every part must come from the same configuration and model, and their ``repeats`` together
    must name every repeat once; estimates are then those of a single run, times and stopping
    fractions the sums of the shares'.
    """
    first = parts[0]
    if any((part.config, part.model_name) != (first.config, first.model_name) for part in parts):
        raise ValidationError("the parts to merge come from different configurations or models")
    every = tuple(range(first.config.n_repeats))
    held = [every if part.repeats is None else part.repeats for part in parts]
    return replace(
        first,
        table=merge_repeats([part.table for part in parts], held),
        sampling_seconds=torch.stack([part.sampling_seconds for part in parts]).sum(0),
        stopped=torch.stack([part.stopped for part in parts]).sum(0),
        repeats=None,
    )


def estimators_vs_k_finding(result: EstimatorsVsKResult) -> Finding:
    """The paper's Fig. 4 reading: is RTS the most accurate (within 2 s.e.) at every K?

    ``"confirmed"`` when at every K no other method's RMSE is below RTS's by more than 2
    standard errors of the difference; ``"contradicted"`` when some method is decisively
    better at some K; TI's discretisation bias at the smallest K is reported alongside.
    """
    table = result.table
    rmse, bias, bias_se = table.rmse(), table.bias(), table.bias_stderr()
    rts = table.index("rts")
    beaten = []
    for k_index, n_temperatures in enumerate(table.settings):
        for m, method in enumerate(table.methods):
            if m != rts and table.compare_rmse((m, k_index), (rts, k_index)) == "smaller":
                beaten.append(f"{method.upper()} at K = {n_temperatures}")
    verdict = "contradicted" if beaten else "confirmed"
    # Without repeats, or with an RTS column that is not finite, "nothing beat RTS" is no evidence.
    if table.n_repeats < 2 or not bool(torch.isfinite(rmse[rts]).all()):
        verdict = "inconclusive"
    best = [table.methods[int(rmse[:, k].argmin())].upper() for k in range(len(table.settings))]
    ti = table.index("ti")
    first = 0
    ti_bias, ti_se = float(bias[ti, first]), float(bias_se[ti, first])
    # Against a reference, its own error counts too: the zero line itself is uncertain.
    significant = math.isfinite(ti_se) and abs(ti_bias) > Z_DECISIVE * math.hypot(ti_se, table.reference_se)
    text = (
        "Lowest RMSE at each K: "
        + ", ".join(f"K = {k}: {name}" for k, name in zip(table.settings, best, strict=True))
        + ". "
        + (
            f"Decisively better than RTS (beyond 2 s.e.): {', '.join(beaten)}. "
            if beaten
            else "No method beats RTS by more than 2 standard errors at any K. "
        )
        + f"TI's bias at K = {table.settings[first]} is {ti_bias:+.3f} ± {ti_se:.3f} nats"
        + (" (discretisation error, beyond 2 s.e.)" if significant else " (not distinguishable from zero)")
        + f"; RTS's is {float(bias[rts, first]):+.3f} ± {float(bias_se[rts, first]):.3f}."
    )
    return Finding(
        part="estimators-vs-k",
        claim="RTS is at least as accurate as TS, TI, TI-RB and MBAR at every K; TI has discretisation error",
        verdict=verdict,
        text=text,
    )
