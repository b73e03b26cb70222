"""``evaluate``'s cap on what one method may spend, so that a large model gets a verdict in minutes.

The estimators' defaults are set for accuracy on the models they were calibrated on (784×20
and smaller): AIS's chain budget may grow to 1,600 chains × 14,500 temperatures, RAISE anneals
100 examples × 10 chains back from each. On a 784×500 RBM that is 7.6 minutes of AIS and
4 minutes of RAISE on 2 cores (docs/performance.md, "evaluate at 784×500"). The cap is a
number of chain-sweeps per method, scaled to the model so that it is the same amount of
arithmetic at every size: :data:`DEFAULT_METHOD_WORK` multiply-adds over the weights a sweep
touches. It binds only on large models (784×500: 2.6 M chain-sweeps; 784×20: 64 M, above
every default) and is a count, not a clock, so the same command gives the same numbers on
every machine. Where it binds, the command says what it cut; the verdicts judge what ran.

How each method is held to it:
- AIS's chain budget (``n_chains`` unset): ``max_chains`` = cap / K in whole rounds of
  :data:`~boltzlab.estimators.annealing.chain_budget.DEFAULT_CHAINS`, at least one;
- RAISE: fewer held-out examples (at least :data:`MIN_RAISE_EXAMPLES`), counting its
  schedule check's quarter-length rerun;
- the others keep their defaults (anchored AIS's fixed 100 chains and the tempered budget's
  sweep cap stay below the cap at 784×500).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from torch import nn

from boltzlab.estimators.annealing.chain_budget import DEFAULT_CHAINS, DEFAULT_MAX_CHAINS, budget_runs
from boltzlab.estimators.annealing.options import RAISEOptions
from boltzlab.estimators.annealing.raise_ import SCHEDULE_CHECK_STRIDE
from boltzlab.estimators.annealing.schedules import DEFAULT_N_TEMPERATURES

__all__ = [
    "DEFAULT_METHOD_WORK",
    "MIN_RAISE_EXAMPLES",
    "NO_CAP",
    "CostCap",
    "default_cap",
    "weights_per_sweep",
]

#: Multiply-adds one method may spend by default: chain-sweeps × the weights a sweep touches.
#: About a minute of AIS on 2 cores (measured 2.0e10 per second at 784×500, the float32 path).
DEFAULT_METHOD_WORK = 1.0e12
#: RAISE keeps at least this many held-out examples under the cap: its error bar is their spread.
MIN_RAISE_EXAMPLES = 10


def weights_per_sweep(model: nn.Module) -> int:
    """Weights one sweep of one chain multiplies through: ``Σ n_l·n_{l+1}`` over adjacent layers."""
    sizes = [int(size) for size in model.layer_sizes]
    return sum(first * second for first, second in itertools.pairwise(sizes))


def default_cap(model: nn.Module) -> int:
    """Chain-sweeps per method that :data:`DEFAULT_METHOD_WORK` buys on ``model``."""
    return max(1, math.floor(DEFAULT_METHOD_WORK / max(1, weights_per_sweep(model))))


@dataclass(frozen=True)
class CostCap:
    """At most ``chain_sweeps`` single-chain sweeps per method (``None``: no cap)."""

    chain_sweeps: int | None

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
            chains = max(DEFAULT_CHAINS, cap // temperatures // DEFAULT_CHAINS * DEFAULT_CHAINS)
            if chains < DEFAULT_MAX_CHAINS:
                return {**options, "max_chains": chains}, (
                    f"ais: chain budget capped at {chains:,} chains (of {DEFAULT_MAX_CHAINS:,}) × {temperatures:,} "
                    "temperatures"
                )
        if method == "raise" and not examples_given and options.get("data") is not None:
            data = options["data"]
            per_example = int(options.get("n_chains") or RAISEOptions.n_chains) * temperatures
            if options.get("schedule_check", True):
                per_example += per_example // SCHEDULE_CHECK_STRIDE
            examples = max(MIN_RAISE_EXAMPLES, cap // per_example)
            if examples < data.shape[0]:
                return {**options, "data": data[:examples]}, (
                    f"raise: {examples} of the {data.shape[0]} held-out examples"
                )
        return options, ""


#: No cap: every method's own defaults.
NO_CAP = CostCap(None)
