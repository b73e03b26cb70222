"""Estimators against the number of temperatures (Carlson et al. 2016, Fig. 4).

The RMSE against the number of temperatures K of RTS, TS, TI, TI-RB and MBAR, all computed
from the same tempered samples (one sampler run per K and repeat, a fixed budget of sweeps);
docs/algorithms.md §4.3. The paper bootstrapped one 3-million-sample run; we repeat independent
runs and compare with the exact ``log Z``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzlab.estimators import collect_tempered_samples
from boltzlab.estimators.tempered.mbar import mbar_from_samples
from boltzlab.estimators.tempered.rts import rts_from_samples
from boltzlab.estimators.tempered.ti import ti_from_samples, ti_rb_from_samples
from boltzlab_experiments.accuracy.models import BenchmarkModel, TrainingConfig
from boltzlab_experiments.accuracy.table import (
    Z_DECISIVE,
    EstimateTable,
    compare,
    derive_seed,
    empty_columns,
    quiet,
)
from boltzlab_experiments.cli import Progress
from boltzlab_experiments.findings import Finding
from boltzlab_experiments.presets import load_preset

__all__ = [
    "ESTIMATORS_FROM_SAMPLES",
    "EstimatorsVsKConfig",
    "EstimatorsVsKResult",
    "estimators_vs_k_finding",
    "run_estimators_vs_k",
]


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
        Numbers of temperatures K (linear ladders).
    n_chains, n_sweeps : int
        Chains and long-run sweeps of each sampler run (the fixed budget; the initial
        iterations, at most 10 × 50 sweeps, come on top).
    n_repeats : int
    max_log_densities : int
        MBAR's cap on kept ``N × K`` log-densities.
    """

    label: str
    training: TrainingConfig
    model: str
    levels: tuple[int, ...]
    n_chains: int
    n_sweeps: int
    n_repeats: int
    max_log_densities: int = 1_000_000

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
    """

    config: EstimatorsVsKConfig
    model_name: str
    model_label: str
    table: EstimateTable
    sampling_seconds: Tensor
    stopped: Tensor


def run_estimators_vs_k(
    config: EstimatorsVsKConfig, benchmark: BenchmarkModel, *, seed: int = 0, progress: Progress = quiet
) -> EstimatorsVsKResult:
    """For each K and repeat: one tempered-sampler run, and all five estimates from its samples."""
    methods = tuple(ESTIMATORS_FROM_SAMPLES)
    n_levels, n_repeats = len(config.levels), config.n_repeats
    out = empty_columns(len(methods), n_levels, n_repeats)
    sampling = torch.zeros(n_levels, dtype=torch.float64)
    stopped = torch.zeros(n_levels, dtype=torch.float64)
    done = 0
    for k_index, n_temperatures in enumerate(config.levels):
        for r in range(n_repeats):
            started = time.perf_counter()
            samples = collect_tempered_samples(
                benchmark.model,
                n_chains=config.n_chains,
                n_temperatures=n_temperatures,
                n_sweeps=config.n_sweeps,
                record_derivatives=True,
                record_weighted_derivatives=True,
                record_log_densities=True,
                max_log_densities=config.max_log_densities,
                generator=derive_seed(seed, 5, k_index, r),
            )
            sampling[k_index] += (time.perf_counter() - started) / n_repeats
            stopped[k_index] += float(samples.stopped) / n_repeats
            for m, method in enumerate(methods):
                started = time.perf_counter()
                estimate = ESTIMATORS_FROM_SAMPLES[method](samples)
                out["seconds"][m, k_index] += (time.perf_counter() - started) / n_repeats
                out["log_z"][m, k_index, r], out["stderr"][m, k_index, r] = estimate.log_z, estimate.stderr
                out["cost_sweeps"][m, k_index, r] = estimate.cost_sweeps
            done += 1
            progress(done, n_levels * n_repeats, f"K={n_temperatures}")
    table = EstimateTable(methods, tuple(config.levels), benchmark.exact_log_z, **out)
    return EstimatorsVsKResult(config, benchmark.name, benchmark.label, table, sampling, stopped)


def estimators_vs_k_finding(result: EstimatorsVsKResult) -> Finding:
    """The paper's Fig. 4 reading: is RTS the most accurate (within 2 s.e.) at every K?

    ``"confirmed"`` when at every K no other method's RMSE is below RTS's by more than 2
    standard errors of the difference; ``"contradicted"`` when some method is decisively
    better at some K; TI's discretisation bias at the smallest K is reported alongside.
    """
    table = result.table
    rmse, rmse_se, bias, bias_se = table.rmse(), table.rmse_stderr(), table.bias(), table.bias_stderr()
    rts = table.index("rts")
    beaten = []
    for k_index, n_temperatures in enumerate(table.settings):
        for m, method in enumerate(table.methods):
            if (
                m != rts
                and compare(
                    float(rmse[m, k_index]),
                    float(rmse_se[m, k_index]),
                    float(rmse[rts, k_index]),
                    float(rmse_se[rts, k_index]),
                )
                == "smaller"
            ):
                beaten.append(f"{method.upper()} at K = {n_temperatures}")
    verdict = "contradicted" if beaten else "confirmed"
    if table.n_repeats < 2:
        verdict = "inconclusive"
    best = [table.methods[int(rmse[:, k].argmin())].upper() for k in range(len(table.settings))]
    ti = table.index("ti")
    first = 0
    ti_bias, ti_se = float(bias[ti, first]), float(bias_se[ti, first])
    significant = math.isfinite(ti_se) and abs(ti_bias) > Z_DECISIVE * ti_se
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
