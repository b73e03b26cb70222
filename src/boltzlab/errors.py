"""Typed errors that carry what they know.

Every error boltzlab raises on purpose derives from :class:`BoltzlabError`, so the command
line can print one readable line for it (and a traceback only with ``--debug``). Each message
says what was wrong and how to fix it.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BoltzlabError",
    "DataError",
    "DistributedError",
    "DivergenceError",
    "ModelFileError",
    "ValidationError",
]


class BoltzlabError(Exception):
    """Base class of every error boltzlab raises deliberately."""


class ValidationError(BoltzlabError, ValueError):
    """A public function got an argument of the wrong shape, dtype, range or kind."""


class DataError(BoltzlabError, ValueError):
    """A dataset is missing, malformed, or not binary where binary data is required."""


class DistributedError(BoltzlabError, RuntimeError):
    """Processes of one run could not work together: a rank died, timed out or disagreed."""


class ModelFileError(BoltzlabError, ValueError):
    """A model or checkpoint file is unreadable, inconsistent, or not a boltzlab file."""


class DivergenceError(BoltzlabError, RuntimeError):
    """A run produced NaN or infinite values.

    Attributes
    ----------
    step : int
        The update (or sweep) at which the non-finite value was seen.
    partial : Any
        Whatever was computed before the failure (e.g. the last good result), or ``None``.
    """

    def __init__(self, message: str, *, step: int = -1, partial: Any = None) -> None:
        super().__init__(message)
        self.step = step
        self.partial = partial
