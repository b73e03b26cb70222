"""What a long command shows while it works: a ``tqdm`` bar on a terminal, nothing elsewhere.

The library reports typed events to a hook (:mod:`boltzlab.progress`); :class:`EstimateDisplay`
is such a hook. It draws one line per estimate on stderr, redrawn as it runs: which method
(``[2/5] rts``), the chain-sweeps done, the time elapsed, the round a growing budget has
reached and what runs now (the verdict's witness, the estimate, its checks). The total is not
known in advance where a budget grows, so the line counts up rather than filling a bar.

When to show (:func:`show_progress`): only on rank 0 of a ``torchrun`` group, never with
``--json``, and only when both stdout and stderr are terminals. A piped stdout is a script
reading the results, and a redirected stderr is a log file, where a bar would be a wall of
carriage returns; both get the results and the error lines alone. ``train``, ``sample``,
``demo`` and the reproductions (``boltzlab_experiments.cli.progress_bar``) follow the same rule.

A terminal that reports a size of zero (``script``, some containers and IDE consoles) made
``tqdm`` draw nothing at all (it took the terminal for one of -1 rows, too short for any bar),
so the size falls back to ``$COLUMNS`` × ``$LINES`` or 80 × 24 (:func:`bar_size`).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from boltzlab import distributed
from boltzlab.progress import ProgressEvent, ProgressHook, RoundStarted, Stage, Sweeps

__all__ = ["EstimateDisplay", "bar_size", "method_progress", "on_terminal", "show_progress"]

# What each stage is called in the bar's tail (any other stage is the method itself).
_STAGES = {"witness": "lower-bound witness", "checks": "verdict checks"}
# "[1/3] ais: 1.2M chain-sweeps in 00:17, round 2: +400 chains, estimating": what runs, how far,
# for how long, and where; short enough for 80 columns (tqdm cuts what does not fit).
_FORMAT = "{desc}: {n_fmt} chain-sweeps in {elapsed}{postfix}"


def on_terminal() -> bool:
    """Whether stdout and stderr both go to a terminal (a person is watching)."""
    return sys.stdout.isatty() and sys.stderr.isatty()


def show_progress(*, quiet: bool = False) -> bool:
    """Whether a command shows progress: not ``quiet`` (``--json``), rank 0, on a terminal."""
    return not quiet and distributed.topology().is_main and on_terminal()


def bar_size() -> dict[str, int]:
    """``tqdm``'s ``ncols`` and ``nrows``: the terminal's size, else ``$COLUMNS`` × ``$LINES``,
    else 80 × 24 (never 0, which made tqdm draw nothing)."""
    size = shutil.get_terminal_size(fallback=(80, 24))
    return {"ncols": size.columns, "nrows": size.lines}


class EstimateDisplay:
    """A progress hook drawing one estimate as a bar on stderr (module docstring).

    Parameters
    ----------
    label : str
        What runs, e.g. ``"[1/3] ais"``.
    """

    def __init__(self, label: str) -> None:
        from tqdm.auto import tqdm

        self._bar: Any = tqdm(
            desc=label, unit_scale=True, file=sys.stderr, leave=True, bar_format=_FORMAT, **bar_size()
        )
        self._stage = ""
        self._round = ""

    def __call__(self, event: ProgressEvent) -> None:
        if isinstance(event, Sweeps):
            self._bar.update(event.chain_sweeps)
            return
        if isinstance(event, Stage):
            self._stage = _STAGES.get(event.name, "estimating")
        elif isinstance(event, RoundStarted):
            if event.long_run_sweeps is None:  # AIS: a round adds chains on the same schedule
                self._round = f"round {event.number}: +{event.n_chains:,} chains"
            else:
                self._round = (
                    f"round {event.number}: {event.n_chains:,} chains × {event.long_run_sweeps:,} sweeps"
                )
        self._show()

    def _show(self) -> None:
        # The round first: it is what a long wait is about, and what a narrow terminal keeps.
        self._bar.set_postfix_str(", ".join(part for part in (self._round, self._stage) if part))

    def close(self, *, finished: bool) -> None:
        """End the bar, leaving its last line (``done`` when the estimate finished)."""
        if finished:
            self._stage = "done"
            self._show()
        self._bar.close()


@contextmanager
def method_progress(method: str, position: int, total: int, *, show: bool) -> Iterator[ProgressHook | None]:
    """The hook showing ``method`` (the ``position``-th of ``total``) while the block runs.

    Yields ``None`` when ``show`` is false: the estimate then runs without a hook.
    """
    if not show:
        yield None
        return
    display = EstimateDisplay(f"[{position}/{total}] {method}" if total > 1 else method)
    finished = False
    try:
        yield display
        finished = True
    finally:
        display.close(finished=finished)
