"""``estimate_log_z(model, method=...)``: one door to every partition-function estimator.

An estimator is a function ``(model, *, generator, **options) -> LogZEstimate`` filed with its
record (:mod:`boltzlab.estimators.record`); the door reads the record to decide what runs
around it: the verdict's witness before it where its budget grows, the rows that count as data,
the trajectory route, and the verdict after it (:mod:`boltzlab.estimators.verdict.judge`).
"""

from __future__ import annotations

from typing import Any

import torch

from boltzlab import progress as progress_events
from boltzlab.estimators.record import get_record, methods, register_estimator
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.routes import with_trajectory_route
from boltzlab.estimators.verdict.judge import judge
from boltzlab.estimators.verdict.lower_bound import certified_lower_bound, supports_lower_bound
from boltzlab.models.base import TemperedModel
from boltzlab.rng import fork, resolve_generator
from boltzlab.validation import check_finite_model

#: Chains of the verdict's lower-bound witness (docs/trust.md, "The certified lower bound").
WITNESS_CHAINS = 1000
# The rng.fork stream of a witness run before the estimate.
WITNESS_STREAM = 0x5717

__all__ = ["estimate_log_z", "methods", "register_estimator"]


def estimate_log_z(
    model: TemperedModel,
    method: str = "ais",
    *,
    generator: torch.Generator | int | None = None,
    progress: progress_events.ProgressHook | None = None,
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
    progress : callable, optional
        Called with every :mod:`boltzlab.progress` event of this call, in order: chain-sweeps
        done, the stage that starts (``"witness"``, the method, ``"checks"``) and each round a
        growing budget adds. Only for this call; it changes no result.
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
        With ``reliable`` and ``warnings`` filled by :func:`boltzlab.estimators.verdict.judge.judge`.

    Examples
    --------
    >>> import boltzlab as bl
    >>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    >>> exact = bl.estimate_log_z(model, method="exact")
    >>> ais = bl.estimate_log_z(model, method="ais", generator=0)
    >>> abs(ais.log_z - exact.log_z) < 5 * ais.stderr + 1e-3
    True
    """
    with progress_events.reporting(progress):
        return _estimate(model, method, generator, options)


def _estimate(
    model: TemperedModel, method: str, generator: torch.Generator | int | None, options: dict[str, Any]
) -> LogZEstimate:
    """:func:`estimate_log_z` once its progress hook is in place."""
    check_finite_model(model, "estimate_log_z")
    record = get_record(method)
    if record.family == "exact":
        progress_events.emit(progress_events.Stage(record.name))
        return record.run(model, **options)
    method = record.name  # the name the record is filed under: "RTS", "ti_rb" too
    if record.trajectory_route is not None and "trajectory" in options:
        trajectory = options.pop("trajectory")
        generator = resolve_generator(generator, model.device)
        return with_trajectory_route(
            estimate_log_z,
            model,
            method,
            record.trajectory_route,
            trajectory=trajectory,
            generator=generator,
            options=options,
        )
    check_data = options.pop("check_data", None)
    if check_data is None and record.data_option is not None:
        # Its own rows are data: RAISE's held-out examples, anchored AIS's anchor rows.
        check_data = options.get(record.data_option)
    data_label = "data"
    if check_data is None:
        # The rows the model kept when its base was fitted (docs/trust.md, "The witness rows"):
        # without them the witness starts from the base and the verdict says "unchecked".
        check_data, data_label = getattr(model, "witness", None), "witness rows"
    if record.anchors_on_check_data and check_data is not None and options.get(record.data_option) is None:
        # The rows that start the verdict's witness are the ones that anchor the estimate.
        options[record.data_option] = check_data
    lower_bound_sweeps = options.pop("lower_bound_sweeps", 200)
    generator = resolve_generator(generator, model.device)
    bound = None
    if (
        record.grows is not None
        and record.grows(options)
        and options.get("lower_bound") is None
        and lower_bound_sweeps > 0
        and supports_lower_bound(model)
    ):
        # AIS's chain budget and the tempered budget grow while the estimate sits below the
        # certified bound too (docs/trust.md, "AIS's chain budget", "Tempered estimators"), so
        # the verdict's witness runs first and is handed to both. It draws from a fork, so the
        # estimator's own draws are those of a run without it.
        progress_events.emit(progress_events.Stage("witness"))
        bound = certified_lower_bound(
            model,
            data=check_data,
            n_chains=WITNESS_CHAINS,
            n_sweeps=lower_bound_sweeps,
            generator=fork(generator, WITNESS_STREAM),
            data_label=data_label,
        )
        options["lower_bound"] = bound
    progress_events.emit(progress_events.Stage(method))
    estimate = record.run(model, generator=generator, **options)
    progress_events.emit(progress_events.Stage("checks"))
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
