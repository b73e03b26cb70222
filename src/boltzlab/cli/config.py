"""Options from a TOML file (``--config run.toml``), flags winning, and the writer of ``config.toml``.

A config file is one flat TOML table whose keys are a command's option names, spelled with
dashes or underscores (``learning-rate = 0.1`` or ``learning_rate = 0.1``). The values become
click's ``default_map``, so click converts and checks them exactly as it does flags, and any
flag given on the command line wins over the file. An unknown key is an error that names it.

``config.toml`` in a run directory is written by :func:`write_config` in the same form, so
``boltzlab train --config RUN/config.toml`` repeats a run. The writer handles flat tables of
strings, integers, floats and booleans only, which is all a run's options are; that keeps
``tomli_w`` out of the dependencies (Python's ``tomllib`` only reads).
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click

from boltzlab.errors import ValidationError

__all__ = ["ConfigError", "recorded_options", "to_toml"]

# Options that describe how to run the command, not what to compute; a config file may not
# set them (a file naming another file, or turning on tracebacks, would only confuse).
_NOT_CONFIGURABLE = frozenset({"config", "debug", "help", "version"})
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")

Scalar = str | int | float | bool


class ConfigError(ValidationError):
    """A config file that cannot be read, is not TOML, or sets options the command lacks."""


def read_config(path: str | Path) -> dict[str, Any]:
    """The top-level table of the TOML file ``path``; raises :class:`ConfigError` with the reason."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist; check the path") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {path} is a directory; pass a .toml file") from None
    except OSError as error:
        raise ConfigError(f"config file {path} cannot be read ({error.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path} is not UTF-8 text; expected a TOML file") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config file {path} is not valid TOML: {error}") from None


def _defaults_from_file(command: click.Command, path: Path) -> dict[str, Any]:
    """The file's values keyed by the command's parameter names; refuses unknown keys."""
    accepted = {param.name for param in command.params if param.name and param.name not in _NOT_CONFIGURABLE}
    values: dict[str, Any] = {}
    unknown = []
    for key, value in read_config(path).items():
        name = key.replace("-", "_")
        if name not in accepted:
            unknown.append(key)
            continue
        if isinstance(value, (dict, list)):
            raise ConfigError(
                f"config file {path}: {key} must be a single value, got a TOML "
                f"{'table' if isinstance(value, dict) else 'array'}"
            )
        values[name] = value
    if unknown:
        names = ", ".join(sorted(name.replace("_", "-") for name in accepted))
        raise ConfigError(
            f"config file {path} sets unknown option(s) {', '.join(sorted(unknown))} "
            f"for 'boltzlab {command.name}'; known: {names}"
        )
    return values


def _load_into_context(ctx: click.Context, _param: click.Parameter, value: Path | None) -> None:
    if value is None:
        return
    # default_map supplies a value only where the command line gave none: flags win.
    ctx.default_map = {**(ctx.default_map or {}), **_defaults_from_file(ctx.command, value)}


def config_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--config FILE``: options from a TOML table, command-line flags winning.

    The option is eager, so the file is read before click resolves the other options.
    """
    return click.option(
        "--config",
        type=click.Path(path_type=Path),
        is_eager=True,
        expose_value=False,
        callback=_load_into_context,
        metavar="FILE.toml",
        help="Read options from a TOML table (same names, dashes or underscores); flags win.",
    )(function)


def _toml_value(value: Scalar) -> str:
    if isinstance(value, bool):  # before int: bool is an int subclass
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)  # shortest round-trip form; TOML accepts 1e-05 and 0.1 alike
    if isinstance(value, str):
        # JSON's escapes (\" \\ \n \t \u with four hex digits, ASCII only) are all valid in a TOML basic string.
        return json.dumps(value, ensure_ascii=True)
    raise ValidationError(f"config values must be str, int, float or bool, got {type(value).__name__}")


def to_toml(values: Mapping[str, Scalar | None], *, comment: str = "") -> str:
    """A flat TOML table of scalars; ``None`` values are left out (TOML has no null).

    ``comment`` (several lines allowed) is written first, each line as a ``#`` comment.
    """
    lines = [f"# {line}".rstrip() for line in comment.splitlines()]
    for key, value in values.items():
        if value is None:
            continue
        name = key if _BARE_KEY.match(key) else json.dumps(key, ensure_ascii=True)
        lines.append(f"{name} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def recorded_options(
    ctx: click.Context, values: Mapping[str, Any], *, leave_out: tuple[str, ...] = ()
) -> dict[str, Scalar | None]:
    """The command's option values in declaration order, paths as strings, for :func:`write_config`."""
    recorded: dict[str, Scalar | None] = {}
    for param in ctx.command.params:
        name = param.name
        if name is None or name in leave_out or name in _NOT_CONFIGURABLE or name not in values:
            continue
        value = values[name]
        recorded[name] = str(value) if isinstance(value, Path) else value
    return recorded


def write_config(path: str | Path, values: Mapping[str, Scalar | None], *, comment: str = "") -> Path:
    """Write :func:`to_toml` of ``values`` to ``path`` atomically; returns the path."""
    # Here, not at the top: every command's --config option imports this module, and boltzlab.io's
    # package imports torch (docs/architecture.md, "Start-up").
    from boltzlab.io import write_atomic

    return write_atomic(path, to_toml(values, comment=comment).encode("utf-8"))
