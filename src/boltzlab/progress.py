"""Progress of long estimates: typed events sent to a hook the caller gives.

An estimate at the papers' scale runs for minutes (AIS on a 784×500 RBM: 1.45 million
chain-sweeps per 100 chains), and a command that prints nothing for that long looks hung. So
the library reports what it is doing as events, and whoever asked for them decides how to
show them (``boltzlab logz`` and ``evaluate`` draw a bar on a terminal,
:mod:`boltzlab.cli.progress_display`); a library caller gets them as plain objects:

* :class:`Sweeps`: more chain-sweeps done (the estimators' inner loops, every sampler sweep);
* :class:`Stage`: a part of the estimate starts (the verdict's witness, the method, its checks);
* :class:`RoundStarted`: a budget grew, and its next round starts (AIS's chain budget,
  ``estimators/annealing/chain_budget.py``; the tempered budget, ``estimators/tempered/budget.py``).

The hook is explicit: :func:`boltzlab.estimate_log_z` takes it as ``progress=``, and
:func:`reporting` gives one to every library call in a block (a reproduction's many
estimates). It is held in a context variable for exactly the duration of that call or block
and reset after it, even on an exception, so nothing carries over to the next call, and
another thread or asyncio task does not see it. Inside, the events are sent by
:func:`emit` (and :func:`advance`) from four or five calls below the public function (the
estimator, its budget's rounds, the sampler, the verdict's witness), where a parameter
threaded through every one of them would be an option every estimator has and none uses. By
default nobody listens, and an event costs one context-variable lookup. Progress changes no
result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = [
    "ProgressEvent",
    "ProgressHook",
    "RoundStarted",
    "Stage",
    "Sweeps",
    "advance",
    "emit",
    "reporting",
]


@dataclass(frozen=True, slots=True)
class Sweeps:
    """``chain_sweeps`` more single-chain sweeps done (one sweep of a batch of B chains is B)."""

    chain_sweeps: int


@dataclass(frozen=True, slots=True)
class Stage:
    """A part of an estimate starts.

    ``name`` is ``"witness"`` (the verdict's certified lower bound, run first where the budget
    grows), the method's name (``"ais"``, ``"rts"``, ...) when the estimator itself starts, or
    ``"checks"`` (the verdict's checks, which may run the witness).
    """

    name: str


@dataclass(frozen=True, slots=True)
class RoundStarted:
    """A budget grew: round ``number`` (2 for the first growth) starts.

    Attributes
    ----------
    number : int
        The round that starts, counted from 1.
    n_chains : int
        Chains of the new round (AIS: the chains it adds; the tempered budget: all of them).
    long_run_sweeps : int or None
        Long-run sweeps per chain of the new round (the tempered budget); ``None`` for AIS,
        whose rounds keep the schedule.
    reason : str
        The first check that failed and asked for the round.
    """

    number: int
    n_chains: int
    long_run_sweeps: int | None
    reason: str


ProgressEvent = Sweeps | Stage | RoundStarted
"""Every event a hook may receive."""

ProgressHook = Callable[[ProgressEvent], None]
"""What listens: called with each event, in order, on the thread that runs the estimate."""

_HOOK: ContextVar[ProgressHook | None] = ContextVar("boltzlab_progress", default=None)


def emit(event: ProgressEvent) -> None:
    """Send ``event`` to the hook of the current call or block, if there is one."""
    hook = _HOOK.get()
    if hook is not None:
        hook(event)


def advance(chain_sweeps: int) -> None:
    """Report ``chain_sweeps`` more single-chain sweeps done: :func:`emit` of a :class:`Sweeps`."""
    hook = _HOOK.get()
    if hook is not None:
        hook(Sweeps(int(chain_sweeps)))


@contextmanager
def reporting(hook: ProgressHook | None) -> Iterator[None]:
    """Within the block, every event of the library goes to ``hook``.

    ``None`` leaves whatever hook an enclosing block gave in place (so a function can pass its
    own ``progress=None`` on without silencing its caller's). The previous hook is restored when
    the block ends, however it ends.

    Examples
    --------
    >>> events = []
    >>> with reporting(events.append):
    ...     advance(100)
    >>> events
    [Sweeps(chain_sweeps=100)]
    >>> advance(5)  # nobody listens outside the block
    >>> len(events)
    1
    """
    if hook is None:
        yield
        return
    token = _HOOK.set(hook)
    try:
        yield
    finally:
        _HOOK.reset(token)
