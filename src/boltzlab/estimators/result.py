"""The one result type every partition-function estimator returns."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["LogZEstimate"]


@dataclass(frozen=True, slots=True)
class LogZEstimate:
    """An estimate of ``log Z`` (nats) with its standard error and diagnostics.

    Attributes
    ----------
    log_z : float
        The estimate of ``log Z`` of the model at β = 1, in nats.
    stderr : float
        Standard error of ``log_z`` (0 for exact enumeration; ``inf`` when unknown).
    method : str
        ``"exact"``, ``"ais"``, ...
    cost_sweeps : int
        Total number of single-chain sweeps spent (chains × sweeps per chain); 0 for exact.
    bound : {"lower", "upper", None}
        Direction of the estimator's bias in ``log Z``: AIS is unbiased in Z, so by Jensen
        ``E[log Ẑ] ≤ log Z`` (``"lower"``); RAISE-derived estimates are biased up.
    info : Any
        Method-specific diagnostics (a dataclass), e.g. the AIS log-weights and ESS.
    reliable : bool
        The verdict: ``False`` when a diagnostic the estimator could compute says that
        ``log_z ± stderr`` cannot be trusted (see ``docs/trust.md``). Exact results are
        always reliable.
    warnings : tuple of str
        One sentence per failed (or skipped) check, naming the diagnostic, its value and the
        threshold, e.g. ``"effective sample size 3.1 of 100 chains is below 10"``.
    lower_bound : LowerBound or None
        The certified lower bound the verdict compared ``log_z`` with, when one was computed.
    """

    log_z: float
    stderr: float
    method: str
    cost_sweeps: int = 0
    bound: Literal["lower", "upper"] | None = None
    info: Any = field(default=None, repr=False)
    reliable: bool = True
    warnings: tuple[str, ...] = ()
    lower_bound: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # Normalise a list given by a caller so the result stays hashable and immutable.
        if not isinstance(self.warnings, tuple):
            object.__setattr__(self, "warnings", tuple(self.warnings))

    @property
    def verdict(self) -> str:
        """``"reliable"``, or ``"UNRELIABLE: <first reason>"`` (all reasons in ``warnings``)."""
        if self.reliable:
            return "reliable"
        reason = self.warnings[0] if self.warnings else "no reason recorded"
        return f"UNRELIABLE: {reason}"

    def interval(self, z: float = 2.0) -> tuple[float, float]:
        """``log_z ± z·stderr``."""
        return (self.log_z - z * self.stderr, self.log_z + z * self.stderr)

    def z_score(self, truth: float) -> float:
        """``(log_z − truth) / stderr``; how many error bars the estimate is from ``truth``."""
        if self.stderr == 0.0:
            return 0.0 if self.log_z == truth else math.copysign(math.inf, self.log_z - truth)
        return (self.log_z - truth) / self.stderr

    def __str__(self) -> str:
        if self.method == "exact":
            error = "exact"
        elif self.stderr == 0.0:
            error = "± 0 (no error bar)"
        else:
            error = f"± {self.stderr:.4f}"
        text = f"log Z = {self.log_z:.4f} {error} ({self.method}, {self.cost_sweeps} chain-sweeps)"
        return text if self.reliable else f"{text} {self.verdict}"
