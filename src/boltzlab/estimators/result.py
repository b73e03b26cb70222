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
        ``True`` only when every check passed *and* the missing-mass witness reached data
        (docs/trust.md): code that reads this alone is never told to trust an estimate that
        nothing checked. Exact results are always reliable.
    warnings : tuple of str
        One sentence per failed (or skipped) check, naming the diagnostic, its value and the
        threshold, e.g. ``"effective sample size 3.1 of 100 chains is below 10"``; failures
        first, then the ``unchecked`` sentence, then notes.
    lower_bound : LowerBound or None
        The certified lower bound the verdict compared ``log_z`` with, when one was computed.
    failed : bool
        Whether a check failed (the verdict is then ``"unreliable"``, whatever else holds). The
        source of truth: an estimator may still say ``reliable=False`` when it builds a result
        (that sets ``failed``), but code that changes a judged estimate with
        ``dataclasses.replace`` sets ``failed=`` or ``unchecked=``, since ``reliable`` is
        derived from both.
    unchecked : str
        Empty when the missing-mass witness started from data; otherwise one sentence saying
        what was not checked and how to check it. A non-empty ``unchecked`` makes
        ``reliable`` ``False`` (the verdict ``"unchecked"`` unless a check also failed).
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
    failed: bool = False
    unchecked: str = ""

    def __post_init__(self) -> None:
        # Normalise a list given by a caller so the result stays hashable and immutable.
        if not isinstance(self.warnings, tuple):
            object.__setattr__(self, "warnings", tuple(self.warnings))
        # One invariant, whichever fields a caller set: ``reliable`` is True only when nothing
        # failed and the witness reached data; ``reliable=False`` alone means a check failed.
        if not math.isfinite(self.log_z):
            # Never a trusted NaN or infinity, whoever built the result: a comparison with NaN
            # is False either way, so a check downstream could pass it.
            reason = f"log Z is {self.log_z} (not finite): nothing can be read from it"
            if reason not in self.warnings:
                object.__setattr__(self, "warnings", (reason, *self.warnings))
            object.__setattr__(self, "failed", True)
        if self.failed or self.unchecked:
            object.__setattr__(self, "reliable", False)
        elif not self.reliable:
            object.__setattr__(self, "failed", True)

    @property
    def status(self) -> Literal["reliable", "unchecked", "unreliable"]:
        """The verdict in one word: a failed check wins over an unchecked witness."""
        if self.failed:
            return "unreliable"
        return "unchecked" if self.unchecked else "reliable"

    @property
    def reason(self) -> str:
        """Why the estimate is not reliable: the first failure, or what was not checked; ``""`` if reliable."""
        if self.failed:
            return self.warnings[0] if self.warnings else "no reason recorded"
        return self.unchecked

    @property
    def verdict(self) -> str:
        """``"reliable"``, ``"unchecked"``, or ``"UNRELIABLE: <first reason>"`` (all reasons in ``warnings``).

        ``"unchecked"``: every check that ran passed, but nothing looked for probability mass
        that only data reach (``unchecked`` says what and how to check it).
        """
        if self.status == "unreliable":
            return f"UNRELIABLE: {self.reason}"
        return self.status

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
        if self.status == "unchecked":
            return f"{text} unchecked: {self.unchecked}"
        return text if self.reliable else f"{text} {self.verdict}"
