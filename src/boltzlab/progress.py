"""Progress of long estimates: chain-sweeps done, reported to whoever is listening.

An estimate at the papers' scale runs for minutes (AIS on a 784×500 RBM: 1.45 million
chain-sweeps per 100 chains), and a command that prints nothing for that long looks hung. The
estimators' inner loops call :func:`advance` with the chain-sweeps each step spent; by default
nobody listens and the call costs one context-variable lookup. A caller that wants to show
progress (``boltzlab evaluate``'s bar) listens for a block of code with :func:`reporting`.

Why a context variable rather than a ``progress=`` parameter: the sweeps happen four or five
calls below the public function (the estimator, its budget's rounds, the sampler, the witness
of the verdict), and a parameter threaded through every one of them would be an option every
estimator has and none uses. Progress changes no result; it is output, like a warning, and
travels the way :mod:`warnings` filters do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["advance", "reporting"]

_LISTENER: ContextVar[Callable[[int], None] | None] = ContextVar("boltzlab_progress", default=None)


def advance(chain_sweeps: int) -> None:
    """Report ``chain_sweeps`` more single-chain sweeps done (one sweep of a batch of B chains is B)."""
    listener = _LISTENER.get()
    if listener is not None:
        listener(int(chain_sweeps))


@contextmanager
def reporting(listener: Callable[[int], None]) -> Iterator[None]:
    """Within the block, every :func:`advance` calls ``listener(chain_sweeps)``.

    Examples
    --------
    >>> done = []
    >>> with reporting(done.append):
    ...     advance(100)
    >>> done
    [100]
    """
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)
