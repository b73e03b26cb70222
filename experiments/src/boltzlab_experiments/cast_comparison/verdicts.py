"""Verdicts of the CAST comparison: does CAST end higher than SAP and FPCD, and is its curve steadier?

Salakhutdinov (2010, Table 1 and Fig. 5; docs/algorithms.md §3.4). "Higher" needs the difference of
test bounds to exceed 2 standard errors of the two ``log Z`` estimates (the bound's data term
is exact given the model, and both models see the same test cases); "steadier" needs both the
largest drop and the late mean absolute change of the tracked bound to be smaller.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from boltzlab_experiments.cast_comparison.run import CASTComparisonResult

__all__ = ["Z_DECISIVE", "BaselineComparison", "compare_with_baselines", "verdicts"]

# A difference of test bounds counts when it exceeds this many standard errors.
Z_DECISIVE = 2.0
BASELINES = ("sap", "fpcd")


@dataclass(frozen=True)
class BaselineComparison:
    """CAST against one baseline algorithm.

    Attributes
    ----------
    baseline : str
        ``"sap"`` or ``"fpcd"``.
    gap, stderr : float
        CAST's test bound minus the baseline's, and the standard error of that difference
        (the two final ``log Z`` standard errors combined), nats.
    outcome : {"higher", "lower", "unresolved"}
        ``"higher"`` when ``gap > 2·stderr``, ``"lower"`` when ``gap < −2·stderr``.
    stability : {"steadier", "less steady", "mixed"}
        ``"steadier"`` when CAST's largest drop and late mean absolute change are both smaller,
        ``"less steady"`` when both are larger.
    cast_max_drop, baseline_max_drop, cast_late_change, baseline_late_change : float
        The curve statistics behind ``stability``.
    """

    baseline: str
    gap: float
    stderr: float
    outcome: str
    stability: str
    cast_max_drop: float
    baseline_max_drop: float
    cast_late_change: float
    baseline_late_change: float


def compare_with_baselines(result: CASTComparisonResult) -> tuple[BaselineComparison, ...]:
    """One :class:`BaselineComparison` per baseline that ran beside CAST (none without CAST)."""
    runs = {run.algorithm: run for run in result.runs}
    if "cast" not in runs:
        return ()
    cast = runs["cast"]
    comparisons = []
    for name in BASELINES:
        if name not in runs:
            continue
        other = runs[name]
        gap = cast.test_bound - other.test_bound
        stderr = math.hypot(cast.final_log_z_stderr, other.final_log_z_stderr)
        outcome = (
            "higher" if gap > Z_DECISIVE * stderr else "lower" if gap < -Z_DECISIVE * stderr else "unresolved"
        )
        steadier = cast.max_drop < other.max_drop and cast.late_mean_abs_change < other.late_mean_abs_change
        shakier = cast.max_drop > other.max_drop and cast.late_mean_abs_change > other.late_mean_abs_change
        comparisons.append(
            BaselineComparison(
                baseline=name,
                gap=gap,
                stderr=stderr,
                outcome=outcome,
                stability="steadier" if steadier else "less steady" if shakier else "mixed",
                cast_max_drop=cast.max_drop,
                baseline_max_drop=other.max_drop,
                cast_late_change=cast.late_mean_abs_change,
                baseline_late_change=other.late_mean_abs_change,
            )
        )
    return tuple(comparisons)


_OUTCOME_WORDS = {
    "higher": "CAST ends higher",
    "lower": "CAST ends lower",
    "unresolved": "no resolved difference",
}
_STABILITY_WORDS = {
    "steadier": "steadier",
    "less steady": "less steady",
    "mixed": "mixed (one statistic each way)",
}


def verdicts(result: CASTComparisonResult) -> list[str]:
    """:func:`compare_with_baselines` in plain sentences, one per baseline."""
    comparisons = compare_with_baselines(result)
    if not any(run.algorithm == "cast" for run in result.runs):
        return ["no CAST run: nothing to compare"]
    return [
        f"CAST vs {c.baseline.upper()}: test bound {c.gap:+.2f} ± {c.stderr:.2f} nats ({_OUTCOME_WORDS[c.outcome]}); "
        f"curve {_STABILITY_WORDS[c.stability]} (largest drop {c.cast_max_drop:.2f} vs {c.baseline_max_drop:.2f}, "
        f"late mean |change| {c.cast_late_change:.2f} vs {c.baseline_late_change:.2f})"
        for c in comparisons
    ]
