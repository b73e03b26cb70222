"""Pieces every subcommand shares: common options, model loading, and how results are printed.

Names become objects here and in the subcommand modules only (docs/architecture.md, "Layout"): the
library is called with plain names and values, and it validates them, so a bad name is one
readable line from the library's own message.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from boltzlab.cli.choices import (
    ALPHABETS,
    DEFAULT_IDENTITY,
    DEFAULT_SEQUENCE_TEST_FRACTION,
    OPERATORS,
    SEQUENCE_SPLITS,
)
from boltzlab.cli.config import config_option
from boltzlab.errors import ValidationError

# Light on purpose: every command's option declarations import this module, and `--help` must
# not wait for torch (docs/architecture.md, "Start-up"). The few functions that need torch or
# the library import it inside, when a command runs.
if TYPE_CHECKING:
    from torch import nn

    from boltzlab import data as datasets

__all__ = [
    "MAX_EXACT_UNITS",
    "SEED",
    "THREADS_KEY",
    "Device",
    "FiniteFloat",
    "command_options",
    "format_seconds",
    "format_table",
    "load_model_file",
    "operator_params",
    "printable",
    "report_written",
    "set_threads",
]

# Where the --debug flag and --threads are remembered; ctx.meta is shared by a command and its group.
DEBUG_KEY = "boltzlab.debug"
THREADS_KEY = "boltzlab.threads"
# Below this many weights a second thread only adds synchronisation, and on a busy machine
# OpenMP's waiting threads slowed the demo's 64×16 RBM from 700 to 17 updates per second.
_SMALL_MODEL_WEIGHTS = 65_536
# Exact log Z enumerates 2^min(layer sizes) states; above this it takes too long to offer.
MAX_EXACT_UNITS = 25


class FiniteFloat(click.FloatRange):
    """A float option whose NaN and ±inf are refused: click's ``FloatRange`` lets NaN through
    every bound (each comparison with NaN is false), and ``--pixel-max nan`` then failed deep
    in the data reader as "x contains NaN"."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if number is not None and not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class Device(click.ParamType):
    """A ``--device`` option: a device this machine has, checked by :func:`boltzlab.validation.check_device`.

    ``--device cuda`` on a machine without CUDA went on to fail deep inside torch ("Torch not
    compiled with CUDA enabled", an unexpected AssertionError); this is one line at once, naming
    what the machine has and the fix (the usual ``error: ...``, exit status 1).
    """

    name = "device"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from boltzlab.validation import check_device  # at parse time, not for --help: torch

        flag = param.opts[0] if param is not None and param.opts else "--device"
        return str(check_device(value, flag))


#: Seeds are 64-bit: a larger one overflowed inside torch ("Overflow when unpacking long long").
SEED = click.IntRange(0, 2**63 - 1)
#: Characters of an untrusted string (model metadata, a path, a data name) the text output shows.
PRINTED_CHARACTERS = 200


def _remember_debug(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.meta[DEBUG_KEY] = True


def set_threads(ctx: click.Context, _param: click.Parameter, value: int | None) -> None:
    """Callback of ``--threads``, before the subcommand (the group's) or after it (each command's):
    ctx.meta is shared between them, so :func:`choose_threads` sees either."""
    if value is not None:
        import torch  # here, not at the top: `boltzlab --help` must not wait for torch

        ctx.meta[THREADS_KEY] = value
        torch.set_num_threads(value)


def command_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--config``, ``--debug`` and ``--threads``, accepted after the subcommand as well as before it."""
    function = click.option(
        "--threads",
        type=click.IntRange(min=1),
        callback=set_threads,
        expose_value=False,
        help="CPU threads for torch (default: 1 for models under 65,536 weights, else torch's choice).",
    )(function)
    function = click.option(
        "--debug",
        is_flag=True,
        is_eager=True,
        expose_value=False,
        callback=_remember_debug,
        help="On an error, show the full traceback instead of one line.",
    )(function)
    return config_option(function)


# How --data is read; the same flags on every command that takes --data (docs/data.md, "Files").
_DATA_FILE_OPTIONS = (
    "data_key",
    "binarize",
    "pixel_max",
    "test_fraction",
    "validation_fraction",
    "alphabet",
    "identity",
    "weighted",
    "split",
    "unknown",
)
# The flags that only aligned FASTA takes, and those that only binary data files take.
SEQUENCE_OPTIONS = ("alphabet", "identity", "weighted", "split", "unknown")
_BINARY_FILE_OPTIONS = ("data_key", "binarize", "pixel_max")
# What a flag is called on the command line, where its option is named otherwise.
_FLAG_NAMES = {"weighted": "--sequence-weights/--no-sequence-weights", "unknown": "--unknown-as-gap"}


def flag_name(option: str) -> str:
    """``--flag`` of the option called ``option`` in the command's keyword arguments."""
    return _FLAG_NAMES.get(option, "--" + option.replace("_", "-"))


def data_file_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--data-key``, ``--binarize``, ``--pixel-max``, ``--test-fraction``, ``--validation-fraction``,
    and for aligned FASTA ``--alphabet``, ``--identity``, ``--sequence-weights/--no-sequence-weights``,
    ``--split`` and ``--unknown-as-gap``.

    The command receives them as keyword arguments named as in :data:`_DATA_FILE_OPTIONS` and
    passes them on with :func:`load_data`.
    """
    fraction = FiniteFloat(min=0.0, max=1.0, max_open=True)
    options = [
        click.option(
            "--data-key",
            metavar="KEY",
            help="HDF5: the dataset holding the examples (default: x_train, data, or the only 2-D one).",
        ),
        click.option(
            "--binarize",
            type=click.Choice(("threshold", "stochastic")),
            help="Binarise grey levels: threshold (>= half of --pixel-max) or stochastic (Bernoulli draws).",
        ),
        click.option(
            "--pixel-max",
            type=FiniteFloat(min=0.0, min_open=True),
            metavar="MAX",
            help="With --binarize: the value meaning fully on (default 255 for integer arrays, 1 otherwise).",
        ),
        click.option(
            "--test-fraction",
            type=fraction,
            help="Hold out this share of the training examples as the test split (seed 0: the same every run; "
            f"FASTA: default {DEFAULT_SEQUENCE_TEST_FRACTION}, see --split).",
        ),
        click.option(
            "--validation-fraction",
            type=fraction,
            help="Hold out this share of the training examples as the validation split.",
        ),
        click.option(
            "--alphabet",
            metavar="NAME",
            help=f"FASTA: the symbols, {', '.join(ALPHABETS)} or custom:SYMBOLS (e.g. custom:ABC-); "
            "default protein, or the model's.",
        ),
        click.option(
            "--identity",
            type=FiniteFloat(min=0.0, min_open=True, max=1.0),
            help="FASTA: sequences sharing at least this fraction of columns are neighbours: weights are "
            f"1/(neighbours) and a homology split keeps them together (default {DEFAULT_IDENTITY}).",
        ),
        click.option(
            "--sequence-weights/--no-sequence-weights",
            "weighted",
            default=None,
            help="FASTA: weight each sequence by 1/(neighbours within --identity); N_eff is their sum "
            "(default on).",
        ),
        click.option(
            "--split",
            type=click.Choice(SEQUENCE_SPLITS),
            help="FASTA: how held-out sequences are chosen: homology (whole groups of neighbours, so no "
            "held-out sequence has a close homologue in training; the default) or random.",
        ),
        click.option(
            "--unknown-as-gap",
            "unknown",
            flag_value="gap",
            default=None,
            help="FASTA: read symbols outside --alphabet (X, B, Z, ...) as gaps instead of refusing the file.",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def is_sequence_file(name_or_path: str) -> bool:
    """Whether ``--data`` names an aligned FASTA file (by its name, as the library reads it)."""
    from boltzlab.data.from_path import format_from_name  # here: the data readers import torch

    path = Path(name_or_path).expanduser()
    return path.is_file() and format_from_name(path) == "fasta"


def load_data(
    name_or_path: str,
    *,
    root: Path | None,
    seed: int,
    options: Mapping[str, Any],
    recorded: Mapping[str, Any] | None = None,
) -> datasets.Dataset:
    """``--data`` read by :func:`boltzlab.data.load` with the :func:`data_file_options` given in ``options``.

    Options left at ``None`` are not passed, so a named dataset that does not take one is
    only refused when the flag was actually given. ``recorded``: for aligned FASTA, the
    reading options a model file recorded when it was trained (alphabet, identity, weights,
    split and its fractions), used where no flag is given, so that ``evaluate`` holds out the
    sequences ``train`` held out.
    """
    from boltzlab import data as datasets  # here: the data readers import torch

    given = {name: options[name] for name in _DATA_FILE_OPTIONS if options.get(name) is not None}
    if "pixel_max" in given and "binarize" not in given:
        raise ValidationError("--pixel-max applies with --binarize threshold|stochastic; pass both")
    _check_data_path(name_or_path)
    if is_sequence_file(name_or_path):
        wrong = [flag_name(name) for name in _BINARY_FILE_OPTIONS if name in given]
        if wrong:
            raise ValidationError(
                f"{', '.join(wrong)} {'reads' if len(wrong) == 1 else 'read'} binary data files; "
                f"--data {name_or_path} is aligned FASTA (see --alphabet, --identity, --split)"
            )
        if "test_fraction" in given or "validation_fraction" in given:
            recorded = {
                key: value
                for key, value in (recorded or {}).items()
                if key not in ("test_fraction", "validation_fraction")
            }
        for key, value in (recorded or {}).items():
            given.setdefault(key, value)
    else:
        wrong = [flag_name(name) for name in SEQUENCE_OPTIONS if name in given]
        if wrong:
            raise ValidationError(
                f"{', '.join(wrong)} {'applies' if len(wrong) == 1 else 'apply'} to aligned FASTA files "
                f"(.fasta, .fa, .faa, .afa, .a2m, .aln), not --data {name_or_path}"
            )
    return datasets.load(name_or_path, root=root, generator=seed, **given)


def _check_data_path(name_or_path: str) -> None:
    """Refuse, in the command line's words, a ``--data`` path the library would refuse in its own.

    The library's messages name its arguments (``format=``, ``root=``), which the command line
    spells otherwise or does not have; these two are checked here first.
    """
    from boltzlab import data as datasets  # here: the data readers import torch
    from boltzlab.data.from_path import FILE_NAMES, format_from_name

    if name_or_path.lower().replace("_", "-") in datasets.available():
        return
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        raise ValidationError(
            f"--data {name_or_path}: is a folder; pass a data file, or a dataset name (e.g. mnist) "
            f"with --data-root {name_or_path}"
        )
    if path.is_file() and format_from_name(path) is None:
        raise ValidationError(
            f"--data {name_or_path}: cannot tell the format from the file name; expected {FILE_NAMES}; "
            "rename the file to say what it holds (e.g. pixels.csv)"
        )


def refuse_data_file_options_without_data(options: Mapping[str, Any]) -> None:
    """For commands where ``--data`` is optional: its reading flags mean nothing without it."""
    given = [name for name in _DATA_FILE_OPTIONS if options.get(name) is not None]
    if given:
        flags = ", ".join(flag_name(name) for name in given)
        raise ValidationError(f"{flags} say(s) how to read --data; pass --data NAME|PATH too")


def choose_threads(model: nn.Module) -> None:
    """One torch thread for small models unless ``--threads`` was given (see _SMALL_MODEL_WEIGHTS)."""
    import torch  # here: the model exists, so torch is loaded already

    n_weights = sum(parameter.numel() for parameter in model.parameters())
    if click.get_current_context().meta.get(THREADS_KEY) is None and n_weights < _SMALL_MODEL_WEIGHTS:
        torch.set_num_threads(1)


def operator_help(what: str = "Transition operator") -> str:
    """The help of an ``--operator`` option: ``what`` and the operators' names (:data:`OPERATORS`)."""
    return f"{what}: {', '.join(OPERATORS)}."


def operator_params(operator: str, alpha: float | None) -> dict[str, Any]:
    """The operator's parameters from its flags; ``--alpha`` belongs to the mixture only."""
    if alpha is None:
        return {}
    if operator.lower() != "mixture":
        raise ValidationError(f"--alpha applies to --operator mixture only, not {operator!r}")
    return {"alpha": alpha}


def alone_on_rank_zero() -> bool:
    """Whether this process runs a command that does not split its work (demo, reproduce, report).

    Without torchrun, or with one process: yes. Under torchrun with several processes every
    process leaves the group (:func:`boltzlab.distributed.leave`); rank 0 runs the whole
    command alone, as without torchrun, and the others stop at once, successfully.
    """
    from boltzlab import distributed  # here: it imports torch.distributed

    here = distributed.topology()
    if here.world_size <= 1:
        return True
    distributed.leave()
    return here.is_main


def load_model_file(path: str | Path) -> nn.Module:
    """A model file read by :func:`boltzlab.io.load_model` (which validates everything).

    On the CPU, or under torchrun with CUDA on this process's GPU (``distributed.default_device``).
    """
    from boltzlab import distributed  # here: both import torch
    from boltzlab.io import load_model

    return load_model(Path(path), device=distributed.default_device())


def describe_model(model: nn.Module) -> str:
    """One line: class, layer sizes, dtype and base, e.g. ``RBM 64×16, float32, base-rate base``
    (a Potts RBM: ``PottsRBM 31 sites × 21 states × 100 hidden, ...``)."""
    sizes = "×".join(str(size) for size in model.layer_sizes)
    categorical = getattr(model, "n_states", None) is not None
    if categorical:  # categorical sites: say so (a Potts DBM has several hidden layers)
        hidden = "×".join(str(size) for size in model.layer_sizes[1:])
        sizes = f"{model.n_sites} sites × {model.n_states} states × {hidden} hidden"
    dtype = str(model.dtype).removeprefix("torch.")
    fitted = "profile base" if categorical else "base-rate base"
    base = fitted if getattr(model, "base_fitted", False) else "uniform base"
    return f"{type(model).__name__} {sizes}, {dtype}, {base}"


def parse_image_shape(text: str | None) -> tuple[int, int] | None:
    """``"28x28"`` → ``(28, 28)``; ``None`` stays ``None``."""
    if text is None:
        return None
    parts = text.lower().replace("×", "x").split("x")
    if len(parts) != 2 or not all(part.strip().isdigit() and int(part) > 0 for part in parts):
        raise ValidationError(f"--image-shape must look like HEIGHTxWIDTH (e.g. 28x28), got {text!r}")
    return (int(parts[0]), int(parts[1]))


def image_shape_of(model: nn.Module, given: tuple[int, int] | None = None) -> tuple[int, int] | None:
    """The image shape to draw visible states with: given, else recorded by ``train``, else guessed."""
    if given is not None:
        return given
    data = getattr(model, "metadata", {}).get("data", {})
    shape = data.get("image_shape") if isinstance(data, dict) else None
    if (
        isinstance(shape, list)
        and len(shape) == 2
        and all(isinstance(side, int) and side > 0 for side in shape)
        and shape[0] * shape[1] == model.layer_sizes[0]
    ):
        return (shape[0], shape[1])
    return None  # plotting then draws a square if n_visible is one, else a row per state


def report_written(paths: list[Path]) -> None:
    """Say where every written file is (docs/architecture.md: every command that writes says where)."""
    for path in paths:
        click.echo(f"wrote {path}")


def verdict_word(status: str) -> str:
    """How a verdict (``"reliable"``, ``"unchecked"``, ``"unreliable"``, ``"exact"``) is printed:
    ``UNRELIABLE`` in capitals, so the one that says "do not use this number" stands out."""
    return "UNRELIABLE" if status == "unreliable" else status


def format_seconds(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def format_table(header: list[str], rows: list[list[str]], *, indent: str = "  ") -> str:
    """Rows of cells as aligned text columns: the first left-aligned, the others right-aligned."""
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True)]
        return (indent + "   ".join([first, *rest])).rstrip()

    return "\n".join([line(header), *(line(row) for row in rows)])


def printable(value: object, *, limit: int = PRINTED_CHARACTERS) -> str:
    """``str(value)`` made safe for a terminal: control characters escaped, long text cut.

    Model metadata, file names and data names come from files anyone may have written. A
    terminal obeys escape sequences in them (``ESC]0;…BEL`` sets the window title, ``ESC[2J``
    clears the screen), and a 20 MB string would fill the scroll-back. So every character of
    Unicode category ``C*`` (C0 and C1 controls, DEL, format characters such as the
    bidirectional overrides, unassigned and private-use code points) is written as a Python
    escape (``\\x1b``, ``\\u202e``) and the text is cut after ``limit`` characters, saying how
    long it was. ``--json`` output is escaped by the JSON encoder instead and is not cut.
    """
    text = str(value)
    cut = len(text) > limit
    shown = text[:limit] if cut else text
    escaped = "".join(
        character.encode("unicode_escape").decode("ascii")
        if unicodedata.category(character).startswith("C")
        else character
        for character in shown
    )
    return f"{escaped}… ({len(text):,} characters, first {limit:,} shown)" if cut else escaped
