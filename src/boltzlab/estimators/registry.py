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
from boltzlab.estimators.routes import TRAJECTORY_ROUTES, with_trajectory_route
from boltzlab.models.base import TemperedModel
from boltzlab.registry import Registry
from boltzlab.rng import fork, resolve_generator

#: Chains of the verdict's lower-bound witness (docs/trust.md, "The certified lower bound").
WITNESS_CHAINS = 1000
# The rng.fork stream of a witness run before the estimate.
WITNESS_STREAM = 0x5717

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
        ``operator``. Two more are the verdict's (docs/trust.md): ``check_data`` (rows where
        the lower-bound witness starts its chains, by default the witness rows the model kept
        when its base was fitted, ``model.witness``; ``"anchored-ais"`` also anchors on them
        when given no ``anchor_data``) and ``lower_bound_sweeps`` (default 200; 0 skips the
        witness). Where neither gives rows, or the model has no certified bound, the verdict
        is ``"unchecked"`` (``reliable=False``), never ``"reliable"``.
        Where the estimate's budget can grow (AIS with ``n_chains`` unset or ``max_chains``
        given; RTS, TS, TI, TI-RB and MBAR unless ``n_sweeps`` alone fixes it) the witness runs
        first, from a fork of ``generator`` that leaves the estimator's draws unchanged, and
        its bound goes to the budget as ``lower_bound`` and to the verdict; a ``lower_bound``
        the caller gives goes to the budget instead. ``"rts"`` and ``"mbar"`` also take
        ``trajectory`` (the snapshots saved while training an RBM): where the temperature
        route's verdict fails, the method runs along the trajectory too, and the route whose
        verdict passes is reported (:mod:`boltzlab.estimators.routes`).

    Returns
    -------
    LogZEstimate
        With ``reliable`` and ``warnings`` filled by :func:`boltzlab.estimators.verdicts.judge`.

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
    method = method.lower().replace("_", "-")  # the name the registry found: "RTS", "ti_rb" too
    if method in TRAJECTORY_ROUTES and "trajectory" in options:
        trajectory = options.pop("trajectory")
        generator = resolve_generator(generator, model.device)
        return with_trajectory_route(
            estimate_log_z, model, method, trajectory=trajectory, generator=generator, options=options
        )
    check_data = options.pop("check_data", None)
    if check_data is None and method in ("raise", "anchored-ais"):
        # Their own rows are data: RAISE's held-out examples, anchored AIS's anchor rows.
        check_data = options.get("data" if method == "raise" else "anchor_data")
    data_label = "data"
    if check_data is None:
        # The rows the model kept when its base was fitted (docs/trust.md, "The witness rows"):
        # without them the witness starts from the base and the verdict says "unchecked".
        check_data, data_label = getattr(model, "witness", None), "witness rows"
    if method == "anchored-ais" and check_data is not None and options.get("anchor_data") is None:
        # The rows that start the verdict's witness are the ones that anchor the estimate.
        options["anchor_data"] = check_data
    lower_bound_sweeps = options.pop("lower_bound_sweeps", 200)
    generator = resolve_generator(generator, model.device)
    # Imported here: the verdict recomputes tempered estimators, whose modules import this one.
    from boltzlab.estimators import ais_budget, tempered_budget
    from boltzlab.estimators.budget import TEMPERED_METHODS
    from boltzlab.estimators.lower_bound import certified_lower_bound, supports_lower_bound
    from boltzlab.estimators.verdicts import judge

    bound = None
    grows = (method == "ais" and ais_budget.budget_runs(options)) or (
        method in TEMPERED_METHODS and tempered_budget.budget_runs(options)
    )
    if (
        grows
        and options.get("lower_bound") is None
        and lower_bound_sweeps > 0
        and supports_lower_bound(model)
    ):
        # AIS's chain budget and the tempered budget grow while the estimate sits below the
        # certified bound too (docs/trust.md, "AIS's chain budget", "Tempered estimators"), so
        # the verdict's witness runs first and is handed to both. It draws from a fork, so the
        # estimator's own draws are those of a run without it.
        bound = certified_lower_bound(
            model,
            data=check_data,
            n_chains=WITNESS_CHAINS,
            n_sweeps=lower_bound_sweeps,
            generator=fork(generator, WITNESS_STREAM),
            data_label=data_label,
        )
        options["lower_bound"] = bound
    estimate = function(model, generator=generator, **options)
    return judge(
        model,
        estimate,
        check_data=check_data,
        lower_bound_chains=WITNESS_CHAINS,
        lower_bound_sweeps=lower_bound_sweeps,
        generator=generator,
        bound=bound,
        data_label=data_label,
    )
