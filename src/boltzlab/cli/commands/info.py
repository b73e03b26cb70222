"""``boltzlab info``'s declaration: its arguments, options and help, light to import.

``boltzlab info --help`` reads only this module; the work, which imports torch and the
library, is :func:`boltzlab.cli.info.run`, imported when the command runs
(docs/architecture.md, "Start-up").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from boltzlab.cli.common import command_options

__all__ = ["info"]


@click.command(
    "info",
    short_help="Describe a model file: kind, sizes, parameters, exact log Z.",
    epilog="""\b
Example:
  boltzlab info runs/digits/model.safetensors""",
)
@click.argument("model_path", metavar="MODEL", type=click.Path(path_type=Path))
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON object (kind, sizes, dtype, parameters, metadata, exact log Z, file checksum) instead.",
)
@command_options
def info(**options: Any) -> None:
    """Describe a model file: kind, shapes, dtype, base, parameters, training metadata, exact log Z.

    A training trajectory (a run's trajectory.safetensors) is described too: its snapshots.
    """
    # Imported here, not at the top: the implementation imports torch and the library, and
    # `boltzlab info --help` must not wait for them.
    from boltzlab.cli import info as implementation

    implementation.run(**options)
