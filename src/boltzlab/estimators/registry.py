"""``estimate_log_z(model, method=...)``: one door to every partition-function estimator.

An estimator is a function ``(model, *, generator, **options) -> LogZEstimate`` registered
under a method name. Adding one: a module in this package with a function decorated by
:func:`register_estimator`, imported in ``estimators/__init__.py``, plus one test calling
``harness.check_estimator_exact``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from boltzlab.estimators.result import LogZEstimate
from boltzlab.models.base import TemperedModel
from boltzlab.registry import Registry

__all__ = ["estimate_log_z", "methods", "register_estimator"]

EstimatorFunction = Callable[..., LogZEstimate]
_ESTIMATORS: Registry[EstimatorFunction] = Registry("method")


def register_estimator(name: str) -> Callable[[EstimatorFunction], EstimatorFunction]:
    """Function decorator: make an estimator reachable as ``estimate_log_z(model, method=name)``."""
    return _ESTIMATORS.register(name)


def methods() -> tuple[str, ...]:
    """Method names accepted by :func:`estimate_log_z`."""
    return _ESTIMATORS.names()


def estimate_log_z(
    model: TemperedModel,
    method: str = "ais",
    *,
    generator: torch.Generator | int | None = None,
    **options: Any,
) -> LogZEstimate:
    """Estimate ``log Z`` of ``model`` with ``method``; every method returns a :class:`LogZEstimate`.

    Parameters
    ----------
    model : TemperedModel
    method : str, default "ais"
        One of :func:`methods` (``"exact"``, ``"ais"``, ...).
    generator : torch.Generator or int, optional
        Randomness (a seed is accepted); ignored by ``"exact"``.
    **options
        Method options, e.g. for AIS ``n_chains``, ``n_temperatures``, ``schedule``,
        ``operator``.

    Examples
    --------
    >>> import boltzlab as bl
    >>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    >>> exact = bl.estimate_log_z(model, method="exact")
    >>> ais = bl.estimate_log_z(model, method="ais", generator=0)
    >>> abs(ais.log_z - exact.log_z) < 5 * ais.stderr + 1e-3
    True
    """
    function = _ESTIMATORS.get(method)
    if function is _ESTIMATORS.get("exact"):
        return function(model, **options)
    return function(model, generator=generator, **options)
