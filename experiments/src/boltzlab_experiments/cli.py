"""Pieces the reproduction commands share: presets, threads, the data-root option and progress.

The computations live in each study's own modules; these helpers only choose their preset,
set the threads and show their progress (docs/architecture.md, "Layout"). Tables and files are in
:mod:`boltzlab_experiments.tables`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import torch

from boltzlab.cli.common import THREADS_KEY
from boltzlab.cli.progress_display import bar_size, show_progress
from boltzlab.errors import ValidationError

__all__ = ["Progress", "choose_preset", "data_root_option", "default_to_one_thread", "progress_bar"]

Progress = Callable[[int, int, str], None]
"""A progress callback ``progress(done, total, label)``."""


def choose_preset(config_class: Any, full: bool, tiny: bool) -> Any:
    """``config_class.full()``, ``.tiny()`` or ``.scaled()`` from the --full / --tiny flags."""
    if full and tiny:
        raise ValidationError("give --full or --tiny, not both")
    return config_class.full() if full else config_class.tiny() if tiny else config_class.scaled()


def default_to_one_thread(*, full: bool = False) -> None:
    """One torch thread unless --threads was given or the run is --full.

    The scaled and tiny presets use small models, where a second thread mostly adds
    synchronisation and, on a shared machine, makes timings erratic.
    """
    if click.get_current_context().meta.get(THREADS_KEY) is None and not full:
        torch.set_num_threads(1)


def data_root_option(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The ``--data-root DIR`` option; its help says where ``what`` is looked for."""
    return click.option(
        "--data-root",
        type=click.Path(path_type=Path),
        metavar="DIR",
        help=f"Where to look for {what} (else BOLTZLAB_DATA).",
    )


@contextlib.contextmanager
def progress_bar(description: str, *, unit: str = "run") -> Iterator[Progress]:
    """A ``progress(done, total, label)`` callback drawing a tqdm bar, opened at its first call.

    The bar shows what runs (``label``), how far it is and the time elapsed and left; like every
    command's progress it appears only on a terminal
    (:func:`boltzlab.cli.progress_display.show_progress`), and the callback does nothing elsewhere.
    """
    from tqdm.auto import tqdm

    bar: Any = None
    shown = show_progress()

    def update(done: int, total: int, label: str) -> None:
        nonlocal bar
        if not shown:
            return
        if bar is None:
            bar = tqdm(total=total, desc=description, unit=unit, **bar_size())
        bar.n = done
        bar.set_postfix_str(label, refresh=False)
        bar.refresh()

    try:
        yield update
    finally:
        if bar is not None:
            bar.close()
