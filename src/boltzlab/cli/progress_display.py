"""What a command shows while an estimate runs: a ``tqdm`` bar of chain-sweeps, or a line per method.

The estimators report chain-sweeps through :mod:`boltzlab.progress`; this module listens. On a
terminal each method gets a bar that counts chain-sweeps and their rate (the total is not
known in advance where a budget grows). Elsewhere (a log file, CI) a bar would be a wall of
carriage returns, so ``evaluate`` says one line when a method starts and one when it ends, and
``logz`` and ``evaluate --json`` say nothing.
Only rank 0 of a ``torchrun`` group shows anything.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import click
from tqdm.auto import tqdm

from boltzlab import distributed, progress
from boltzlab.cli.common import format_seconds

__all__ = ["method_progress"]


@contextmanager
def method_progress(method: str, position: int, total: int, *, lines: bool = True) -> Iterator[None]:
    """Show the progress of ``method`` (the ``position``-th of ``total``) while the block runs.

    ``lines=False``: nothing away from a terminal (a command of one estimate, whose stderr a
    script reads for its one error line).
    """
    label = f"[{position}/{total}] {method}"
    if not distributed.topology().is_main or not (lines or sys.stderr.isatty()):
        yield
        return
    if sys.stderr.isatty():
        bar = tqdm(desc=label, unit=" chain-sweeps", unit_scale=True, file=sys.stderr, leave=True)
        with bar, progress.reporting(bar.update):
            yield
        return
    done = [0]
    started = time.perf_counter()
    click.echo(f"{label}: running", err=True)
    with progress.reporting(lambda sweeps: done.__setitem__(0, done[0] + sweeps)):
        yield
    elapsed = time.perf_counter() - started
    click.echo(f"{label}: done in {format_seconds(elapsed)}, {done[0]:,} chain-sweeps", err=True)
