"""``boltzlab reproduce``: the papers' reproductions, found as plugins of the command line.

The reproductions (two-node, flip-the-state, rts-tracking, rts-vs-ais, estimators-vs-k,
varopt, cast, front-end) live outside the library, in the ``experiments/`` folder of a
checkout, as the package ``boltzlab-experiments``. It declares one click command per
reproduction in the entry-point group :data:`_ENTRY_POINT_GROUP`; this group lists and loads
them from there, lazily, so ``boltzlab --help`` never imports them. ``boltzlab reproduce
--help`` does not import them either: it reads each one's help line from the plugin's
top-level package (:data:`HELP_ATTRIBUTE`), which is light, where the reproductions import
torch and their studies (docs/architecture.md, "Start-up"); only a plugin without that table
is loaded to ask its command. The library itself never imports the experiments
(docs/architecture.md, "Layout").

Without the package, every ``boltzlab reproduce ...`` but ``--help`` stops with one line that
says how to install it.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any, Protocol

import click

from boltzlab.cli.common import alone_on_rank_zero
from boltzlab.errors import BoltzlabError

__all__ = [
    "HELP_ATTRIBUTE",
    "INSTALL_HINT",
    "SPLITS_ATTRIBUTE",
    "NotInstalledError",
    "ReproduceGroup",
    "discover",
    "reproduce",
]

_ENTRY_POINT_GROUP = "boltzlab.reproduce"
#: A reproduction whose click command has this attribute set true splits its own work over
#: torchrun's processes; every other one runs whole on rank 0 (docs/architecture.md).
SPLITS_ATTRIBUTE = "splits_over_ranks"
#: A plugin's top-level package may hold a dict of this name, command name → its help line, so
#: that ``boltzlab reproduce --help`` lists the commands without importing them (the package
#: must stay light to import; boltzlab_experiments/__init__.py holds the reproductions' table).
HELP_ATTRIBUTE = "REPRODUCE_HELP"
INSTALL_HINT = (
    "the paper reproductions are not installed; from a checkout run "
    "'pip install -e experiments' (or 'make install')"
)


class NotInstalledError(BoltzlabError):
    """``boltzlab reproduce`` was run without the ``boltzlab-experiments`` package."""


class _Loadable(Protocol):
    """What an entry point offers here: a ``load()`` returning the click command."""

    def load(self) -> Any: ...


def discover() -> dict[str, _Loadable]:
    """The installed reproductions: command name → entry point, in the :data:`_ENTRY_POINT_GROUP` group."""
    return {point.name: point for point in entry_points(group=_ENTRY_POINT_GROUP)}


def listed_help(name: str, point: _Loadable) -> str | None:
    """The help line of the plugin ``name`` from its top-level package's :data:`HELP_ATTRIBUTE`
    table, without importing the plugin's own module; ``None`` when the package has no line for it
    (or ``point`` names no module, as a test double may not)."""
    module = getattr(point, "module", None)
    if not isinstance(module, str) or not module:
        return None
    table = getattr(importlib.import_module(module.partition(".")[0]), HELP_ATTRIBUTE, None)
    line = table.get(name) if isinstance(table, Mapping) else None
    return line if isinstance(line, str) else None


class ReproduceGroup(click.Group):
    """A group whose subcommands come from :func:`discover` (looked up at each use)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(discover()) | set(super().list_commands(ctx)))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = discover().get(cmd_name)
        if found is None:
            return super().get_command(ctx, cmd_name)
        command = found.load()
        if not isinstance(command, click.Command):
            raise BoltzlabError(
                f"the {_ENTRY_POINT_GROUP} plugin {cmd_name!r} is not a click command "
                f"(got {type(command).__name__})"
            )
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # click's own version asks every subcommand for its help line, which imports every
        # reproduction (torch and the studies: seconds); the plugins' tables answer without them.
        found = discover()
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max((len(name) for name in names), default=0)
        rows = []
        for name in names:
            line = listed_help(name, found[name]) if name in found else None
            if line is None:
                command = self.get_command(ctx, name)
                if command is None or command.hidden:
                    continue
                line = command.get_short_help_str(limit)
            rows.append((name, line))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        help_asked = any(arg in ctx.help_option_names for arg in args)
        if not help_asked and not discover() and not super().list_commands(ctx):
            raise NotInstalledError(INSTALL_HINT)
        return super().parse_args(ctx, args)


@click.group(
    "reproduce",
    cls=ReproduceGroup,
    short_help="Reproduce a figure or table of a paper.",
    epilog="""\b
Example:
  boltzlab reproduce two-node --out results/two-node
  boltzlab reproduce flip-the-state --out results/flip --data-root /path/to/data
  boltzlab reproduce flip-the-state --parts slem --full --out results/slem-full

\b
The reproductions come from the boltzlab-experiments package in the experiments/ folder of a
checkout: 'pip install -e experiments' (or 'make install') installs them.""",
)
def reproduce() -> None:
    """Re-run a paper's demonstration or study and write its figures, tables and summary."""
    context = click.get_current_context()
    name, group = context.invoked_subcommand, context.command
    command = group.get_command(context, name) if name and isinstance(group, click.Group) else None
    if getattr(command, SPLITS_ATTRIBUTE, False):
        return  # it splits its repeats over the ranks itself and lets rank 0 write
    if not alone_on_rank_zero():
        # Under torchrun rank 0 runs the study whole, alone; the others skip the subcommand.
        context.exit(0)
