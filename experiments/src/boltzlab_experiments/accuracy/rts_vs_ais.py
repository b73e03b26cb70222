"""RTS against AIS and RAISE at matched sweeps (Carlson et al. 2016, Fig. 3).

Carlson, Stinson, Pakman & Paninski (2016, ICML), Fig. 3 and docs/algorithms.md §4.3 "Headline
figures": bias and RMSE of RTS (K = 100 temperatures), AIS and RAISE against the number of
Gibbs sweeps per chain, 100 chains each, AIS and RAISE given as many temperatures as RTS's
total sweeps. The paper's claim: RTS at 1,000 sweeps beats AIS at 10,000. The paper's "truth"
was a long-run average; ours is the exact value.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab import estimate_log_z
from boltzlab.errors import ValidationError
from boltzlab.estimators import ais, raise_log_likelihood
from boltzlab.estimators.tempered.budget import tempered_budget
from boltzlab.validation import as_binary_tensor
from boltzlab_experiments.accuracy.models import BenchmarkModel, TrainingConfig
from boltzlab_experiments.accuracy.table import (
    EstimateTable,
    closest,
    compare,
    derive_seed,
    empty_columns,
    grouped_log_z,
    quiet,
)
from boltzlab_experiments.cli import Progress
from boltzlab_experiments.findings import Finding
from boltzlab_experiments.presets import load_preset

__all__ = ["RTSvsAISConfig", "RTSvsAISResult", "rts_vs_ais_finding", "run_rts_vs_ais"]


@dataclass(frozen=True)
class RTSvsAISConfig:
    """Sizes of the RTS-vs-AIS/RAISE benchmark (RTS paper, Fig. 3).

    Attributes
    ----------
    label : str
    training : TrainingConfig
    model : str
        Which benchmark RBM (:data:`MODEL_SPECS`); the paper's was trained with CD-25.
    budgets : tuple of int
        Gibbs sweeps per chain; AIS and RAISE get that many temperatures.
    n_chains : int
        Chains of RTS and AIS, and reverse chains of RAISE in all.
    rts_levels : int
        RTS's K (linear ladder).
    raise_examples, raise_chains : int
        RAISE runs ``raise_chains`` reverse chains from each of ``raise_examples`` held-out
        examples (a fresh random subset per repeat); their product is its chain count.
    n_repeats : int
        Independent estimates per method and budget.
    schedule : str
        Schedule of AIS and RAISE (the library's default, the SM08 shape scaled to K).
    claim_rts_sweeps, claim_ais_sweeps : int
        The paper's claim compares RTS at the first with AIS at the second (1,000 vs 10,000).
    """

    label: str
    training: TrainingConfig
    model: str
    budgets: tuple[int, ...]
    n_chains: int
    rts_levels: int
    raise_examples: int
    raise_chains: int
    n_repeats: int
    schedule: str = "sm08"
    claim_rts_sweeps: int = 1000
    claim_ais_sweeps: int = 10_000

    @classmethod
    def preset(cls, name: str) -> RTSvsAISConfig:
        """The ``[rts-vs-ais]`` table of the preset ``name`` (with the shared ``[training]``)."""
        return load_preset(cls, __package__, name, section="rts-vs-ais", shared=("training",))

    @classmethod
    def scaled(cls) -> RTSvsAISConfig:
        """Under 8 minutes on a shared 2-core machine (``presets/scaled.toml``)."""
        return cls.preset("scaled")

    @classmethod
    def full(cls) -> RTSvsAISConfig:
        """Closer to the paper: longer training, more budgets and repeats (slow)."""
        return cls.preset("full")

    @classmethod
    def tiny(cls) -> RTSvsAISConfig:
        """Seconds on toy data; checks the pipeline only."""
        return cls.preset("tiny")


@dataclass(frozen=True)
class RTSvsAISResult:
    """What :func:`run_rts_vs_ais` measured: methods ``("rts", "ais", "raise")`` × budgets × repeats."""

    config: RTSvsAISConfig
    model_name: str
    model_label: str
    table: EstimateTable


def run_rts_vs_ais(
    config: RTSvsAISConfig,
    benchmark: BenchmarkModel,
    held_out: Tensor,
    *,
    seed: int = 0,
    progress: Progress = quiet,
) -> RTSvsAISResult:
    """RTS, AIS and RAISE at each budget of sweeps per chain, ``n_repeats`` times each.

    Parameters
    ----------
    config : RTSvsAISConfig
    benchmark : BenchmarkModel
    held_out : Tensor, shape (n_examples, n_visible), values 0/1
        Test examples for RAISE (at least ``raise_examples`` of them).
    seed : int, default 0
    progress : callable ``(done, total, label)``, optional
    """
    model = benchmark.model
    held_out = as_binary_tensor(held_out, "held_out", n_units=model.n_visible, dtype=model.dtype)
    if held_out.shape[0] < config.raise_examples:
        raise ValidationError(
            f"RAISE needs {config.raise_examples} held-out examples per repeat, got {held_out.shape[0]}"
        )
    methods = ("rts", "ais", "raise")
    n_budgets, n_repeats = len(config.budgets), config.n_repeats
    out = empty_columns(len(methods), n_budgets, n_repeats)
    total, done = n_budgets * (n_repeats + 2), 0
    for b, budget in enumerate(config.budgets):
        started = time.perf_counter()
        estimate = ais(
            model,
            n_chains=config.n_chains * n_repeats,
            n_temperatures=budget,
            schedule=config.schedule,
            generator=derive_seed(seed, 1, b),
            record_ess=False,
        )
        log_z, stderr, _ = grouped_log_z(estimate.info.log_weights, n_repeats)
        out["log_z"][1, b], out["stderr"][1, b] = log_z, stderr
        out["cost_sweeps"][1, b] = config.n_chains * (budget - 1)
        out["seconds"][1, b] = (time.perf_counter() - started) / n_repeats
        done += 1
        progress(done, total, f"AIS K={budget}")

        started = time.perf_counter()
        generator = torch.Generator().manual_seed(derive_seed(seed, 2, b))
        picks = torch.cat(
            [
                torch.randperm(held_out.shape[0], generator=generator)[: config.raise_examples]
                for _ in range(n_repeats)
            ]
        )
        result = raise_log_likelihood(
            model,
            held_out[picks],
            n_chains=config.raise_chains,
            n_temperatures=budget,
            schedule=config.schedule,
            generator=derive_seed(seed, 3, b),
            schedule_check=False,  # the paper's RAISE: its cost is the sweeps of the figure's x-axis
        )
        per_example = result.log_z_per_example.reshape(n_repeats, config.raise_examples)
        out["log_z"][2, b] = per_example.mean(1)
        out["stderr"][2, b] = (
            per_example.std(1) / math.sqrt(config.raise_examples)
            if config.raise_examples > 1
            else result.stderrs.reshape(n_repeats)
        )
        out["cost_sweeps"][2, b] = config.raise_examples * config.raise_chains * budget
        out["seconds"][2, b] = (time.perf_counter() - started) / n_repeats
        done += 1
        progress(done, total, f"RAISE K={budget}")

        started = time.perf_counter()
        for r in range(n_repeats):
            estimate = estimate_log_z(
                model,
                method="rts",
                n_chains=config.n_chains,
                n_temperatures=config.rts_levels,
                ladder="linear",  # the paper's ladder, as in its Fig. 3
                generator=derive_seed(seed, 4, b, r),
                **tempered_budget(budget),
            )
            out["log_z"][0, b, r], out["stderr"][0, b, r] = estimate.log_z, estimate.stderr
            out["cost_sweeps"][0, b, r] = estimate.cost_sweeps
            done += 1
            progress(done, total, f"RTS {budget} sweeps")
        out["seconds"][0, b] = (time.perf_counter() - started) / n_repeats
    table = EstimateTable(methods, tuple(config.budgets), benchmark.exact_log_z, **out)
    return RTSvsAISResult(config, benchmark.name, benchmark.label, table)


def rts_vs_ais_finding(result: RTSvsAISResult) -> Finding:
    """Does RTS at ~1,000 sweeps per chain beat AIS at ~10,000? Keyed off the RMSEs and their errors.

    ``"confirmed"`` when RTS's RMSE is below AIS's by more than 2 standard errors of the
    difference, ``"contradicted"`` when above by more, ``"inconclusive"`` otherwise (always
    with a single repeat).
    """
    table, config = result.table, result.config
    rmse, rmse_se, bias = table.rmse(), table.rmse_stderr(), table.bias()
    rts, ais_row = table.index("rts"), table.index("ais")
    b_rts = closest(table.settings, config.claim_rts_sweeps)
    b_ais = closest(table.settings, config.claim_ais_sweeps)
    r1, s1, r2, s2 = (
        float(rmse[rts, b_rts]),
        float(rmse_se[rts, b_rts]),
        float(rmse[ais_row, b_ais]),
        float(rmse_se[ais_row, b_ais]),
    )
    outcome = compare(r1, s1, r2, s2)
    verdict = {"smaller": "confirmed", "larger": "contradicted", "tie": "inconclusive"}[outcome]
    rts_sweeps = float(table.mean_cost()[rts, b_rts]) / config.n_chains
    words = {
        "confirmed": "Yes: RTS's error is smaller by more than two standard errors.",
        "contradicted": "No: AIS's error is smaller by more than two standard errors.",
        "inconclusive": "Not decided: the two RMSEs differ by less than two standard errors of the difference"
        + (" (one repeat: no error bars)." if table.n_repeats < 2 else "."),
    }[verdict]
    text = (
        f"RTS with {table.settings[b_rts]:,} sweeps per chain (K = {config.rts_levels}; "
        f"{rts_sweeps:,.0f} spent on average) has RMSE {r1:.3f} ± {s1:.3f} nats (bias "
        f"{float(bias[rts, b_rts]):+.3f}); AIS with {table.settings[b_ais]:,} temperatures has RMSE "
        f"{r2:.3f} ± {s2:.3f} (bias {float(bias[ais_row, b_ais]):+.3f}), over {table.n_repeats} repeats "
        f"against the exact log Z {table.exact_log_z:.3f}. {words}"
    )
    matching = [
        b
        for b in range(len(table.settings))
        if compare(float(rmse[ais_row, b]), float(rmse_se[ais_row, b]), r1, s1) != "larger"
    ]
    if matching:
        text += (
            f" AIS first matches that RMSE (within 2 s.e.) at {table.settings[matching[0]]:,} temperatures "
            f"({table.settings[matching[0]] / table.settings[b_rts]:.3g}× RTS's sweeps)."
        )
    else:
        text += f" AIS does not match it at any budget up to {table.settings[-1]:,} temperatures."
    return Finding(
        part="rts-vs-ais",
        claim=f"RTS at {config.claim_rts_sweeps:,} sweeps beats AIS at {config.claim_ais_sweeps:,} (RMSE)",
        verdict=verdict,
        text=text,
    )
