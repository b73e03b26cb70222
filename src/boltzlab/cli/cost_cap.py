"""``evaluate``'s cap on what one method may spend, so that a large model gets a verdict in minutes.

The estimators' defaults are set for accuracy on the models they were calibrated on (784×20
and smaller): AIS's chain budget may grow to 1,600 chains × 14,500 temperatures, RAISE anneals
100 examples × 10 chains back from each. On a 784×500 RBM that is 7.6 minutes of AIS and
4 minutes of RAISE on 2 cores (docs/performance.md, "evaluate at 784×500"). The cap is a
number of chain-sweeps per method, scaled to the model so that it is the same amount of
arithmetic at every size: :data:`DEFAULT_METHOD_WORK` weight-sweeps (chain-sweeps × the
weights one sweep multiplies through; a Gibbs sweep is about two multiply-adds per weight,
an annealing step three). It binds only on large models (784×500: 2.6 M chain-sweeps; 784×20:
64 M, above every default) and is a count, not a clock, so the same command gives the same
numbers on every machine. Where it binds, the command says what it cut; the verdicts judge
what ran.

How each method is held to it, where the caller left the budget to the method:
- AIS's chain budget (``n_chains`` unset): ``max_chains`` = cap / (K + ⌈K/4⌉) in whole rounds
  of :data:`~boltzlab.estimators.annealing.chain_budget.DEFAULT_CHAINS`, at least one, counting
  the schedule check's coarse rerun of as many chains;
- RAISE: fewer held-out examples (at least :data:`MIN_RAISE_EXAMPLES`), counting its
  schedule check's coarse rerun;
- RTS, TS, TI, TI-RB and MBAR (their temperature route): the tempered budget keeps its first
  100 chains and grows its long run to at most cap / 100 sweeps;
- a floor above the cap (one round of AIS, ten RAISE examples, one sweep) is kept and said.
Not capped: anchored AIS (a fixed 100 chains and 200,000 anchor chain-sweeps), the trajectory
methods and the trajectory route of ``rts`` and ``mbar``, which keep their own budgets.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from torch import nn

from boltzlab.cli.choices import DEFAULT_METHOD_WORK
from boltzlab.estimators.annealing.chain_budget import DEFAULT_CHAINS, DEFAULT_MAX_CHAINS, budget_runs
from boltzlab.estimators.annealing.options import AISOptions, RAISEOptions
from boltzlab.estimators.annealing.schedule_check import SCHEDULE_CHECK_STRIDE, is_checked
from boltzlab.estimators.annealing.schedules import DEFAULT_N_TEMPERATURES
from boltzlab.estimators.record import get_record
from boltzlab.estimators.tempered.budget import DEFAULT_MAX_SWEEPS

__all__ = [
    "DEFAULT_METHOD_WORK",
    "MIN_RAISE_EXAMPLES",
    "NO_CAP",
    "CostCap",
    "default_cap",
    "weights_per_sweep",
]

#: RAISE keeps at least this many held-out examples under the cap: its error bar is their spread.
MIN_RAISE_EXAMPLES = 10
#: Chains of the tempered methods' first round (the sampler's default), kept under the cap.
_TEMPERED_CHAINS = 100


def weights_per_sweep(model: nn.Module) -> int:
    """Weights one sweep of one chain multiplies through: ``Σ n_l·n_{l+1}`` over adjacent layers."""
    sizes = [int(size) for size in model.layer_sizes]
    return sum(first * second for first, second in itertools.pairwise(sizes))


def default_cap(model: nn.Module) -> int:
    """Chain-sweeps per method that :data:`DEFAULT_METHOD_WORK` buys on ``model``."""
    return max(1, math.floor(DEFAULT_METHOD_WORK / max(1, weights_per_sweep(model))))


def _over(cost: int, cap: int) -> str:
    return f" ({cost:,} chain-sweeps, above the cap: the least it runs)" if cost > cap else ""


@dataclass(frozen=True)
class CostCap:
    """At most ``chain_sweeps`` single-chain sweeps per method (``None``: no cap)."""

    chain_sweeps: int | None

    def holds(self, method: str) -> bool:
        """Whether :meth:`apply` can cut ``method``'s budget (AIS, RAISE, the tempered methods)."""
        return self.chain_sweeps is not None and (
            method in ("ais", "raise") or get_record(method).family == "tempered"
        )

    def apply(
        self, method: str, options: dict[str, Any], *, examples_given: bool
    ) -> tuple[dict[str, Any], str]:
        """``options`` held to the cap, and a sentence saying what was cut (``""`` when nothing).

        ``examples_given``: the user chose RAISE's examples (``--examples``), which are then kept.
        """
        cap = self.chain_sweeps
        if cap is None:
            return options, ""
        temperatures = int(options.get("n_temperatures") or DEFAULT_N_TEMPERATURES)
        if method == "ais" and budget_runs(options) and options.get("max_chains") is None:
            # Whole rounds of the first round's size: a round's time is set by its K temperatures,
            # one after another, so a last round of a few chains costs nearly a full one.
            steps = temperatures + _coarse_steps(
                options.get("schedule_check", AISOptions.schedule_check), temperatures
            )
            chains = max(DEFAULT_CHAINS, cap // steps // DEFAULT_CHAINS * DEFAULT_CHAINS)
            if chains < DEFAULT_MAX_CHAINS:
                return {**options, "max_chains": chains}, (
                    f"ais: chain budget capped at {chains:,} chains (of {DEFAULT_MAX_CHAINS:,}) × "
                    f"{temperatures:,} temperatures{_over(chains * steps, cap)}"
                )
        if method == "raise" and not examples_given and options.get("data") is not None:
            data = options["data"]
            steps = temperatures + _coarse_steps(
                options.get("schedule_check", RAISEOptions.schedule_check), temperatures
            )
            per_example = int(options.get("n_chains") or RAISEOptions.n_chains) * steps
            examples = max(MIN_RAISE_EXAMPLES, cap // per_example)
            if examples < data.shape[0]:
                return {**options, "data": data[:examples]}, (
                    f"raise: {examples} of the {data.shape[0]} held-out examples"
                    f"{_over(examples * per_example, cap)}"
                )
        tempered = get_record(method).family == "tempered"
        budget_given = any(
            options.get(name) is not None for name in ("n_chains", "max_chains", "n_sweeps", "max_sweeps")
        )
        if tempered and not budget_given:
            sweeps = max(1, min(DEFAULT_MAX_SWEEPS, cap // _TEMPERED_CHAINS))
            capped = {**options, "max_chains": _TEMPERED_CHAINS, "max_sweeps": sweeps}
            return capped, (
                f"{method}: tempered budget capped at {_TEMPERED_CHAINS} chains × {sweeps:,} long-run sweeps"
                f"{_over(_TEMPERED_CHAINS * sweeps, cap)}"
            )
        return options, ""


#: No cap: every method's own defaults.
NO_CAP = CostCap(None)


def _coarse_steps(checked: bool, temperatures: int) -> int:
    """Steps per chain of a schedule check's coarse rerun, ``⌈K/stride⌉`` (0 when it does not run)."""
    return -(-temperatures // SCHEDULE_CHECK_STRIDE) if is_checked(bool(checked), temperatures) else 0
