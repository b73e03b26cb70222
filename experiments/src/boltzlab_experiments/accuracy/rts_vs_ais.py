"""RTS against AIS and RAISE at matched sweeps (Carlson et al. 2016, Fig. 3).

Carlson, Stinson, Pakman & Paninski (2016, ICML), Fig. 3 and docs/algorithms.md §4.3 "Headline
figures": bias and RMSE of RTS (K = 100 temperatures), AIS and RAISE against the number of
Gibbs sweeps per chain, 100 chains each, AIS and RAISE given as many temperatures as RTS's
total sweeps. The paper's claim: RTS at 1,000 sweeps beats AIS at 10,000. The paper's "truth"
was a long-run average; ours is the exact value on the 784×20 benchmark RBMs, and on a model the
user supplies (the paper's 784×500) a reference ``log Z`` with its standard error.

Every repeat of every method runs with its own seed (:func:`repeat_seeds`), so that
:func:`run_rts_vs_ais` can run any subset of the repeats — a process's share under torchrun —
and :func:`merge_rts_vs_ais` puts the shares back together into exactly the table one process
computes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from boltzlab import distributed, estimate_log_z
from boltzlab.errors import ValidationError
from boltzlab.estimators import ais, raise_log_likelihood
from boltzlab.estimators.tempered.budget import tempered_budget
from boltzlab.validation import as_binary_tensor
from boltzlab_experiments.accuracy.models import BenchmarkModel, TrainingConfig
from boltzlab_experiments.accuracy.table import (
    EstimateTable,
    closest,
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
    "RTS_LADDERS",
    "RTSvsAISConfig",
    "RTSvsAISResult",
    "merge_rts_vs_ais",
    "rts_vs_ais_finding",
    "run_rts_vs_ais",
]

#: RTS's ladders: the paper's linear ladder from ``Ẑ = 1``, or the library's default, placed at
#: equal thermodynamic length from a pilot annealing run that also gives the starting ``log Ẑ``.
RTS_LADDERS = ("linear", "adaptive")


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
        RTS's K.
    raise_examples, raise_chains : int
        RAISE runs ``raise_chains`` reverse chains from each of ``raise_examples`` held-out
        examples (a fresh random subset per repeat); their product is its chain count.
    n_repeats : int
        Independent estimates per method and budget.
    schedule : str
        Schedule of AIS and RAISE (the library's default, the SM08 shape scaled to K).
    claim_rts_sweeps, claim_ais_sweeps : int
        The paper's claim compares RTS at the first with AIS at the second (1,000 vs 10,000).
    rts_ladder : {"linear", "adaptive"}
        RTS's ladder (:data:`RTS_LADDERS`): the paper's linear one, or the library's default
        adaptive one, whose pilot (a tenth of the budget) counts in RTS's sweeps. On a
        784×500 PCD-1 MNIST RBM the linear K = 100 ladder was measured 76 nats high with no round
        trip, so the ``paper`` preset takes the adaptive one.
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
    rts_ladder: str = "linear"

    def __post_init__(self) -> None:
        if self.rts_ladder not in RTS_LADDERS:
            raise ValidationError(
                f"rts_ladder must be one of {', '.join(RTS_LADDERS)}, got {self.rts_ladder!r}"
            )

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

    @classmethod
    def paper(cls) -> RTSvsAISConfig:
        """The paper's sizes with the library's adaptive ladder, for its 784×500 RBM (``presets/paper.toml``; about an hour of one core)."""
        return cls.preset("paper")


@dataclass(frozen=True)
class RTSvsAISResult:
    """What :func:`run_rts_vs_ais` measured: methods ``("rts", "ais", "raise")`` × budgets × repeats.

    ``repeats`` names the repeats the table holds when it holds only some (a process's share:
    the other columns are NaN, their costs 0); ``None`` when it holds all.
    """

    config: RTSvsAISConfig
    model_name: str
    model_label: str
    table: EstimateTable
    repeats: tuple[int, ...] | None = None


def repeat_seeds(seed: int, budget_index: int, repeat: int) -> dict[str, int]:
    """Seeds of one repeat at one budget: ``"ais"``, ``"raise"`` and ``"rts"``.

    RTS's seeds are what they always were. AIS and RAISE used to run all repeats as one batch
    from one seed per budget, which a process running only some repeats cannot reproduce; since
    each repeat got its own seed (for torchrun), their numbers differ from those earlier runs.
    """
    return {
        "ais": derive_seed(seed, 1, budget_index, repeat),
        "raise": derive_seed(seed, 3, budget_index, repeat),
        "rts": derive_seed(seed, 4, budget_index, repeat),
    }


def raise_picks(n_examples: int, config: RTSvsAISConfig, seed: int, budget_index: int) -> Tensor:
    """RAISE's held-out examples of every repeat at one budget, shape (n_repeats, raise_examples).

    A fresh random subset per repeat, all drawn from one seed per budget: cheap, so every
    process draws them all and takes its repeats' rows.
    """
    generator = torch.Generator().manual_seed(derive_seed(seed, 2, budget_index))
    return torch.stack(
        [
            torch.randperm(n_examples, generator=generator)[: config.raise_examples]
            for _ in range(config.n_repeats)
        ]
    )


def run_rts_vs_ais(
    config: RTSvsAISConfig,
    benchmark: BenchmarkModel,
    held_out: Tensor,
    *,
    seed: int = 0,
    repeats: Sequence[int] | None = None,
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
    repeats : sequence of int, optional
        Run only these repeats (a process's share); the others' columns stay NaN. Default all.
    progress : callable ``(done, total, label)``, optional

    Returns
    -------
    RTSvsAISResult
        ``table.seconds`` is this run's time per method and budget divided by ``n_repeats``,
        so that the shares' times add up (:func:`merge_rts_vs_ais`).

    Notes
    -----
    Each repeat's AIS, RAISE and RTS run alone, from their own seeds (:func:`repeat_seeds`), and
    never shard their chains over processes (``distributed.local``): under torchrun the split
    is by repeats, made by the caller.
    """
    model = benchmark.model
    held_out = as_binary_tensor(held_out, "held_out", n_units=model.n_visible, dtype=model.dtype)
    if held_out.shape[0] < config.raise_examples:
        raise ValidationError(
            f"RAISE needs {config.raise_examples} held-out examples per repeat, got {held_out.shape[0]}"
        )
    methods = ("rts", "ais", "raise")
    n_budgets, n_repeats = len(config.budgets), config.n_repeats
    mine = repeat_indices(repeats, n_repeats)
    out = empty_columns(len(methods), n_budgets, n_repeats)
    total, done = n_budgets * 3 * len(mine), 0
    rts, ais_row, raise_row = (methods.index(name) for name in ("rts", "ais", "raise"))
    # The paper's linear ladder is named; the library's default (adaptive) is left to it.
    ladder = {"ladder": "linear"} if config.rts_ladder == "linear" else {}
    with distributed.local():
        for b, budget in enumerate(config.budgets):
            seeds = {r: repeat_seeds(seed, b, r) for r in mine}
            started = time.perf_counter()
            for r in mine:
                estimate = ais(
                    model,
                    n_chains=config.n_chains,
                    n_temperatures=budget,
                    schedule=config.schedule,
                    generator=seeds[r]["ais"],
                    record_ess=False,
                )
                out["log_z"][ais_row, b, r], out["stderr"][ais_row, b, r] = estimate.log_z, estimate.stderr
                out["cost_sweeps"][ais_row, b, r] = config.n_chains * (budget - 1)
                done += 1
                progress(done, total, f"AIS K={budget}")
            out["seconds"][ais_row, b] = (time.perf_counter() - started) / n_repeats

            started = time.perf_counter()
            picks = raise_picks(held_out.shape[0], config, seed, b)
            for r in mine:
                result = raise_log_likelihood(
                    model,
                    held_out[picks[r]],
                    n_chains=config.raise_chains,
                    n_temperatures=budget,
                    schedule=config.schedule,
                    generator=seeds[r]["raise"],
                    schedule_check=False,  # the paper's RAISE: its cost is the sweeps of the figure's x-axis
                )
                per_example = result.log_z_per_example
                out["log_z"][raise_row, b, r] = per_example.mean()
                out["stderr"][raise_row, b, r] = (
                    per_example.std() / math.sqrt(config.raise_examples)
                    if config.raise_examples > 1
                    else result.stderrs.reshape(())
                )
                out["cost_sweeps"][raise_row, b, r] = config.raise_examples * config.raise_chains * budget
                done += 1
                progress(done, total, f"RAISE K={budget}")
            out["seconds"][raise_row, b] = (time.perf_counter() - started) / n_repeats

            started = time.perf_counter()
            for r in mine:
                estimate = estimate_log_z(
                    model,
                    method="rts",
                    n_chains=config.n_chains,
                    n_temperatures=config.rts_levels,
                    generator=seeds[r]["rts"],
                    # The verdict's missing-mass witness (1,000 chains × 200 sweeps after the
                    # estimate) changes no number here and would outweigh RTS at small budgets.
                    lower_bound_sweeps=0,
                    **ladder,
                    **tempered_budget(budget),
                )
                out["log_z"][rts, b, r], out["stderr"][rts, b, r] = estimate.log_z, estimate.stderr
                out["cost_sweeps"][rts, b, r] = estimate.cost_sweeps
                done += 1
                progress(done, total, f"RTS {budget} sweeps")
            out["seconds"][rts, b] = (time.perf_counter() - started) / n_repeats
    table = EstimateTable(
        methods,
        tuple(config.budgets),
        benchmark.exact_log_z,
        **out,
        reference_stderr=benchmark.reference_stderr,
    )
    return RTSvsAISResult(config, benchmark.name, benchmark.label, table, None if repeats is None else mine)


def merge_rts_vs_ais(parts: Sequence[RTSvsAISResult]) -> RTSvsAISResult:
    """One result from the shares of the repeats that several runs computed (e.g. one per process).

    Every part must come from the same configuration and model, and the parts' ``repeats``
    together must name every repeat once; the table is then the one a single run computes
    (its ``seconds`` the summed process-seconds per estimate).
    """
    first = parts[0]
    if any((part.config, part.model_name) != (first.config, first.model_name) for part in parts):
        raise ValidationError("the parts to merge come from different configurations or models")
    every = tuple(range(first.config.n_repeats))
    held = [every if part.repeats is None else part.repeats for part in parts]
    table = merge_repeats([part.table for part in parts], held)
    return replace(first, table=table, repeats=None)


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
    outcome = table.compare_rmse((rts, b_rts), (ais_row, b_ais))
    verdict = {"smaller": "confirmed", "larger": "contradicted", "tie": "inconclusive"}[outcome]
    rts_sweeps = float(table.mean_cost()[rts, b_rts]) / config.n_chains
    words = {
        "confirmed": "Yes: RTS's error is smaller by more than two standard errors.",
        "contradicted": "No: AIS's error is smaller by more than two standard errors.",
        "inconclusive": "Not decided: the two RMSEs differ by less than two standard errors of the difference"
        + (" (one repeat: no error bars)." if table.n_repeats < 2 else "."),
    }[verdict]
    text = (
        f"RTS with {table.settings[b_rts]:,} sweeps per chain (K = {config.rts_levels}, {config.rts_ladder} ladder; "
        f"{rts_sweeps:,.0f} spent on average) has RMSE {r1:.3f} ± {s1:.3f} nats (bias "
        f"{float(bias[rts, b_rts]):+.3f}); AIS with {table.settings[b_ais]:,} temperatures has RMSE "
        f"{r2:.3f} ± {s2:.3f} (bias {float(bias[ais_row, b_ais]):+.3f}), over {table.n_repeats} repeats "
        f"against the {table.reference_label()}. {words}"
    )
    matching = [
        b for b in range(len(table.settings)) if table.compare_rmse((ais_row, b), (rts, b_rts)) != "larger"
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
