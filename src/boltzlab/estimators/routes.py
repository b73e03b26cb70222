"""RTS and MBAR with a second route: along the training trajectory when temperature is flagged.

docs/trust.md ("Which route: temperature, then the trajectory"). Tempering in temperature and
tempering along the training trajectory fail on different models, and each says so when it
does: on the hard-model suite the temperature route is flagged on MNIST CD-25 (a first-order
transition near β = 0.7 that chains at equilibrium rates do not cross), where the trajectory
route is right; the trajectory route misses modes that no snapshot held on MNIST CD-1 and
Fashion-MNIST CD-1 and CD-25, where the temperature route is right, and is flagged there.

So ``estimate_log_z(model, "rts" | "mbar", trajectory=...)`` runs the temperature route and,
only when its verdict fails, the same method along the trajectory
(``trajectory-rts``/``trajectory-mbar``), and reports the one whose verdict passes, with a
note naming the other. Where both fail it reports the temperature route, flagged, with the
trajectory route's result in a note. A right answer from either route costs one run; the
second run is spent only where the first is flagged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from boltzlab.estimators.result import LogZEstimate
from boltzlab.models.base import TemperedModel
from boltzlab.models.rbm import RBM
from boltzlab.rng import fork

__all__ = ["TRAJECTORY_ROUTE_OPTIONS", "route_note", "with_trajectory_route"]

#: Options that mean the same on both routes (the rest are the temperature ladder's).
TRAJECTORY_ROUTE_OPTIONS = ("n_chains", "max_chains", "n_sweeps", "max_sweeps", "target_stderr")
# The rng.fork stream of the trajectory route's run.
ROUTE_STREAM = 0x7247
# Words of the note that a reported trajectory route carries (route_note finds it).
_HANDED_OVER = "along temperature was flagged"


def route_note(estimate: LogZEstimate) -> str | None:
    """The note saying that the trajectory route answered for a flagged temperature route, if any."""
    return next((warning for warning in estimate.warnings if _HANDED_OVER in warning), None)


def with_trajectory_route(
    estimate: Callable[..., LogZEstimate],
    model: TemperedModel,
    method: str,
    route: str,
    *,
    trajectory: Any,
    generator: torch.Generator,
    options: dict[str, Any],
) -> LogZEstimate:
    """The temperature route's estimate, or the trajectory route's where only that one passes.

    Parameters
    ----------
    estimate : callable
        ``estimate(model, method, generator=, **options)``: a judged estimate
        (:func:`~boltzlab.estimators.registry.estimate_log_z`).
    model : TemperedModel
        An RBM has a trajectory route; any other model gets the temperature route alone.
    method : str
        The temperature route's method (``"rts"``, ``"mbar"``).
    route : str
        The method of the trajectory route (its record's ``trajectory_route``, e.g.
        ``"trajectory-rts"``).
    trajectory : Trajectory, path or sequence, or None
        The snapshots saved while training ``model``; None: the temperature route alone.
    generator : torch.Generator
        The temperature route draws from it; the trajectory route from a fork of it.
    options : dict
        The method's options (``check_data`` and ``lower_bound_sweeps`` included); those in
        :data:`TRAJECTORY_ROUTE_OPTIONS` go to the trajectory route too.

    Returns
    -------
    LogZEstimate
        Its ``method`` names the route reported (e.g. ``"trajectory-rts"``) and its
        ``cost_sweeps`` counts both runs where both ran.
    """
    trajectory_route = fork(generator, ROUTE_STREAM)  # drawn before either run, same stream always
    first = estimate(model, method, generator=generator, **options)
    # "Flagged" is a failed check: an unchecked estimate (no data to start the witness from)
    # passed every check, and the other route could reach no more data than it did.
    if not first.failed or trajectory is None or not isinstance(model, RBM):
        return first
    shared = {
        key: options[key]
        for key in (*TRAJECTORY_ROUTE_OPTIONS, "check_data", "lower_bound_sweeps")
        if key in options
    }
    second = estimate(model, route, generator=trajectory_route, trajectory=trajectory, **shared)
    cost = first.cost_sweeps + second.cost_sweeps
    if not second.failed:
        note = (
            f"{method} {_HANDED_OVER} ({first.verdict.removeprefix('UNRELIABLE: ')}; "
            f"{first.log_z:.4f} ± {first.stderr:.2g}); reported: {second.method} along the training "
            "trajectory, whose checks passed"
        )
        return dataclasses.replace(second, cost_sweeps=cost, warnings=(*second.warnings, note))
    note = (
        f"the trajectory route was tried and flagged too: {second.method} gave {second.log_z:.4f} ± "
        f"{second.stderr:.2g} ({second.verdict.removeprefix('UNRELIABLE: ')})"
    )
    return dataclasses.replace(first, cost_sweeps=cost, warnings=(*first.warnings, note))
