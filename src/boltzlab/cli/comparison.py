"""What ``evaluate`` says about its rows together: pairs that disagree, and the AIS/RAISE sandwich."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = []


def disagreement_lines(rows: Sequence[Any], *, max_z: float = 4.0) -> list[str]:
    """One line per pair of methods whose estimates differ by more than ``max_z`` combined errors.

    Two right answers differ by less than a few ``sqrt(s1² + s2²)``; a larger gap means at least
    one of them is wrong, whatever their verdicts say.
    """
    lines = []
    for index, first in enumerate(rows):
        for second in rows[index + 1 :]:
            combined = math.hypot(first.stderr, second.stderr)
            gap = abs(first.log_z - second.log_z)
            if gap <= 1e-9:
                continue
            z = math.inf if combined == 0 else gap / combined
            if z > max_z:
                lines.append(
                    f"disagree: {first.method} and {second.method} differ by {gap:.4f} nats "
                    f"({'∞' if math.isinf(z) else f'{z:.1f}'} combined standard errors): at least one is wrong"
                )
    return lines


def sandwich_line(rows: Sequence[Any]) -> str | None:
    """``AIS ≲ log Z ≲ RAISE`` with the implied test log-likelihood range, when both ran; else None."""
    by_method = {row.method: row for row in rows}
    if "ais" not in by_method or "raise" not in by_method:
        return None
    lower, upper = by_method["ais"], by_method["raise"]
    if lower.log_z > upper.log_z or not (lower.reliable and upper.reliable):
        # RAISE started from held-out data, not from model samples, bounds nothing by itself;
        # only a pair that brackets, both judged reliable, is called a sandwich.
        why = "they cross" if lower.log_z > upper.log_z else "they are not both reliable"
        return (
            f"no sandwich: AIS {lower.log_z:.4f} and RAISE {upper.log_z:.4f} do not bracket log Z ({why}); "
            "RAISE from held-out data is a diagnostic here, not an upper bound"
        )
    line = (
        f"sandwich: {lower.log_z:.4f} (AIS, lower bound) ≲ log Z ≲ {upper.log_z:.4f} (RAISE, upper bound "
        f"in expectation when its chains start near the model), width {upper.log_z - lower.log_z:.4f} nats"
    )
    if math.isfinite(lower.test_log_likelihood):
        line += f"; test log-likelihood between {upper.test_log_likelihood:.4f} and {lower.test_log_likelihood:.4f}"
    if "exact" in by_method:
        exact = by_method["exact"].log_z
        inside = lower.log_z <= exact <= upper.log_z
        line += f"; exact log Z {exact:.4f} is {'inside' if inside else 'outside'}"
    return line
