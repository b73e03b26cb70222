"""The ``boltzlab`` command: a click group, its subcommands, and how errors reach the user.

Every deliberate error (:class:`~boltzlab.errors.BoltzlabError`: bad data, a corrupt model
file, a bad option or config file), a missing or unreadable file, and any unexpected
exception become one line ``error: ...`` on stderr and exit status 1; click's own usage
errors keep their exit status 2; Ctrl-C prints one line and exits with 130 (128 + SIGINT).
``--debug`` (before or after the subcommand) lets the exception through with its traceback.
Warnings print as ``warning: ...`` lines without the source location. Both speak the command
line's language: where a library message names an argument together with its flag
(``pixel_max= (--pixel-max)``), the line names the flag alone (:func:`in_cli_terms`).
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import warnings
from typing import IO, Any

import click

from boltzlab import __version__
from boltzlab.cli.common import DEBUG_KEY, set_threads
from boltzlab.errors import BoltzlabError

__all__ = ["CommandError", "cli", "in_cli_terms", "main"]

_EXIT_ERROR = 1
_EXIT_INTERRUPTED = 130
_EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE


class CommandError(click.ClickException):
    """A failure shown as one ``error: ...`` line on stderr (click's default says ``Error:``)."""

    def __init__(self, message: str, *, exit_code: int = _EXIT_ERROR) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self.format_message()}", file=file or sys.stderr)


def _one_line(text: str) -> str:
    return " ".join(text.split())


# The library names an argument that the command line spells as a flag as "name= (--flag)" or
# "name (--flag)" (e.g. "pass pixel_max= (--pixel-max) the value meaning fully on"); the name is
# an identifier with an underscore or followed by "=", so prose such as "rows (--data)" is left.
_ARGUMENT_AND_FLAG = re.compile(r"\b(?:[a-z][a-z0-9]*_[a-z0-9_]*=?|[a-z][a-z0-9_]*=) \((--[a-z][a-z0-9-]*)\)")


def in_cli_terms(text: str) -> str:
    """A library message as the command line says it: ``name= (--flag)`` becomes ``--flag``."""
    return _ARGUMENT_AND_FLAG.sub(r"\1", text)


def _message(error: BaseException) -> str:
    """A readable one-line description of ``error``."""
    if isinstance(error, BoltzlabError):
        return in_cli_terms(_one_line(str(error)))
    if isinstance(error, OSError) and error.strerror:
        # "[Errno 2] No such file or directory: 'x'" reads better as "x: No such file or directory".
        where = f"{error.filename}: " if error.filename is not None else ""
        return _one_line(f"{where}{error.strerror}")
    if isinstance(error, MemoryError):
        return "out of memory; use fewer chains, a smaller model or a smaller batch"
    detail = _one_line(str(error)) or "(no message)"
    return (
        f"unexpected {type(error).__name__}: {detail} "
        "(run again with --debug for the traceback, and please report it)"
    )


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: IO[str] | None = None,
    line: str | None = None,
) -> None:
    click.echo(f"warning: {in_cli_terms(_one_line(str(message)))}", err=True)


#: Each subcommand: the module that declares it (imported only when the subcommand runs or
#: shows its own help: the library behind it imports torch and scipy, seconds on a laptop) and
#: the line ``boltzlab --help`` lists it with (tests/cli/test_startup.py keeps the two equal).
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": (
        "boltzlab.cli.commands.demo",
        "Train an RBM on a built-in dataset and show what boltzlab measures.",
    ),
    "train": ("boltzlab.cli.commands.train", "Train an RBM or a DBM and write a run folder."),
    "logz": (
        "boltzlab.cli.commands.logz",
        "Estimate log Z of a saved model, with an error bar and a verdict.",
    ),
    "evaluate": ("boltzlab.cli.commands.evaluate", "Compare log Z estimators and log-likelihoods."),
    "sample": ("boltzlab.cli.commands.sample", "Draw samples from a saved model."),
    "info": ("boltzlab.cli.commands.info", "Describe a model file: kind, sizes, parameters, exact log Z."),
    "report": ("boltzlab.cli.report", "Write RUN_DIR/report.html: the whole run on one page."),
    # Its subcommands are plugins of the boltzlab-experiments package (boltzlab.cli.reproduce).
    "reproduce": ("boltzlab.cli.reproduce", "Reproduce a figure or table of a paper."),
}

#: The variables a launcher such as torchrun sets (boltzlab.distributed, which imports
#: torch.distributed, is loaded only when they are all there).
LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


class _BoltzlabGroup(click.Group):
    """A group that turns exceptions from its subcommands into one-line errors, and loads each
    subcommand's module only when that subcommand is used (:data:`COMMANDS`)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, _ = COMMANDS[cmd_name]
        return getattr(importlib.import_module(module), cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # click's own version asks every subcommand for its help line, importing them all.
        with formatter.section("Commands"):
            formatter.write_dl([(name, line) for name, (_, line) in COMMANDS.items()])

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # Seen here, before any parsing, so --debug also covers errors raised while the
        # subcommand's own options (e.g. --config) are still being read.
        options = args[: args.index("--")] if "--" in args else args
        if "--debug" in options:
            ctx.meta[DEBUG_KEY] = True
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            try:
                return super().invoke(ctx)
            except (click.ClickException, click.exceptions.Exit, click.Abort):
                raise
            except KeyboardInterrupt:
                if ctx.meta.get(DEBUG_KEY):
                    raise
                raise CommandError("interrupted", exit_code=_EXIT_INTERRUPTED) from None
            except BrokenPipeError:
                # The reader went away (`boltzlab info M | head -3`): nothing is wrong, and there is
                # nobody to tell. Point stdout at /dev/null so that flushing it at exit raises no
                # second error, and exit as a process killed by SIGPIPE would.
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
                raise click.exceptions.Exit(_EXIT_BROKEN_PIPE) from None
            except Exception as error:
                if ctx.meta.get(DEBUG_KEY):
                    raise
                raise CommandError(_message(error)) from error


@click.group(
    cls=_BoltzlabGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="Run 'boltzlab COMMAND --help' for a command's options and an example.",
)
@click.version_option(__version__, "--version", prog_name="boltzlab")
@click.option("--debug", is_flag=True, help="On an error, show the full traceback instead of one line.")
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    callback=set_threads,
    expose_value=False,
    help="CPU threads for torch (default: 1 for models under 65,536 weights, else torch's choice).",
)
def cli(debug: bool) -> None:
    """Train, sample and measure binary restricted Boltzmann machines.

    \b
    Example:
      boltzlab demo --out demo-run
      boltzlab train --data digits --hidden 16 --algorithm pcd --epochs 50 --out runs/digits
      boltzlab logz runs/digits/model.safetensors --method ais
      boltzlab sample runs/digits/model.safetensors --out samples.png
      boltzlab info runs/digits/model.safetensors
    """
    if debug:
        click.get_current_context().meta[DEBUG_KEY] = True


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``boltzlab`` script (``pyproject.toml``).

    Under ``torchrun`` every process joins the process group first (docs/architecture.md,
    "Scaling out"); only rank 0 prints results, progress bars and warnings (errors print on
    every rank, prefixed with it) and writes files.
    """
    if not all(name in os.environ for name in LAUNCHER_VARIABLES):
        cli.main(args=argv, prog_name="boltzlab")  # exits with the command's status
        return
    from boltzlab import distributed  # torch.distributed: loaded by launched processes alone

    try:
        here = distributed.init_from_environment()
    except BoltzlabError as error:
        click.echo(f"error: {_message(error)}", err=True)
        sys.exit(_EXIT_ERROR)
    errors = sys.stderr  # where this process's error lines go, whatever the rank
    if not here.is_main:
        # Results, notes, progress bars and warnings come from rank 0 alone; the other ranks
        # keep only their error lines (prefixed with the rank).
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115  # for the life of the process
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115
        warnings.simplefilter("ignore")
    try:
        returned = cli.main(args=argv, prog_name="boltzlab", standalone_mode=not here.active)
    except click.ClickException as error:
        prefix = f"rank {here.rank}: " if not here.is_main else ""
        click.echo(f"{prefix}error: {error.format_message()}", file=errors)
        distributed.exit_now(error.exit_code)  # the group may be broken: no clean shutdown
    except click.Abort:
        click.echo("aborted", file=errors)
        distributed.exit_now(_EXIT_INTERRUPTED)
    code = returned if isinstance(returned, int) else 0
    if here.active:
        try:
            distributed.finish(code)  # does not return while in the group
        except BoltzlabError as error:  # another rank failed after this one finished its part
            click.echo(f"rank {here.rank}: error: {_message(error)}", file=errors)
            distributed.exit_now(_EXIT_ERROR)
        # The command left the group to run alone (demo, reproduce, report): gloo's threads
        # may still abort at interpreter exit, so leave without destructors, as finish does.
        distributed.exit_now(code)
    if code:
        sys.exit(code)


if __name__ == "__main__":  # python -m boltzlab.cli.main, as the installed `boltzlab` script
    main()
