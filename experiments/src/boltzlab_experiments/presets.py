"""The studies' sizes as TOML presets shipped with the package, read into frozen config dataclasses.

Each study keeps its sizes in ``<study>/presets/<name>.toml``: ``tiny`` (seconds, to check the
pipeline; the numbers mean nothing), ``scaled`` (minutes on a laptop, the commands' default)
and ``full`` (the paper's sizes, hours or days). A preset is data, so it can be read, compared
and changed without reading code.

A TOML table maps onto a dataclass by field name; a field the table leaves out keeps its
default, and an unknown key is refused. Values are converted by the field's type:
``float`` accepts integers, ``tuple[X, ...]`` takes an array (or, for ``tuple[tuple[str, X],
...]``, a table read as its ``(key, value)`` pairs in order), a nested dataclass takes a
table, a mapping takes a table, and an optional field takes the string ``"none"`` for
``None`` (TOML has no null). A config with a ``label`` field gets the preset's name unless
the file sets one.
"""

from __future__ import annotations

import tomllib
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import fields, is_dataclass
from importlib import resources
from typing import Any, TypeVar, Union

from boltzlab.errors import ValidationError

__all__ = ["available_presets", "build", "load_preset", "read_preset"]

Config = TypeVar("Config")
NONE = "none"


def available_presets(package: str) -> tuple[str, ...]:
    """Names of the presets shipped in ``package`` (its ``presets/*.toml``), sorted."""
    folder = resources.files(package) / "presets"
    if not folder.is_dir():
        return ()
    return tuple(
        sorted(entry.name.removesuffix(".toml") for entry in folder.iterdir() if entry.name.endswith(".toml"))
    )


def read_preset(package: str, name: str) -> dict[str, Any]:
    """The parsed ``presets/<name>.toml`` of ``package`` (e.g. ``"boltzlab_experiments.front_end"``)."""
    resource = resources.files(package) / "presets" / f"{name}.toml"
    if not resource.is_file():
        known = ", ".join(available_presets(package)) or "none"
        raise ValidationError(f"no preset {name!r} in {package}; the presets are: {known}")
    try:
        return tomllib.loads(resource.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise ValidationError(f"preset {name!r} of {package} is not valid TOML: {error}") from None


def load_preset(
    config_class: type[Config],
    package: str,
    name: str,
    *,
    section: str | None = None,
    shared: Sequence[str] = (),
) -> Config:
    """Build ``config_class`` from the preset ``name`` of ``package``.

    Parameters
    ----------
    config_class : dataclass type
    package : str
        The study's package, holding ``presets/<name>.toml``.
    name : str
        ``"tiny"``, ``"scaled"``, ``"full"``, ...
    section : str, optional
        Read this table of the file instead of its top level (one file for several configs).
    shared : sequence of str
        Top-level tables copied into ``section`` unless it sets them itself (settings several
        sections share, such as the benchmark models' training).
    """
    table = read_preset(package, name)
    if section is not None:
        if not isinstance(table.get(section), dict):
            raise ValidationError(f"preset {name!r} of {package} has no [{section}] table")
        body = dict(table[section])
        for key in shared:
            if key in table:
                body.setdefault(key, table[key])
    else:
        body = dict(table)
    if "label" in {item.name for item in fields(config_class)}:  # type: ignore[arg-type]
        body.setdefault("label", name)
    where = f"preset {name!r} of {package}" + (f" [{section}]" if section else "")
    return build(config_class, body, where=where)


def build(config_class: type[Config], table: Mapping[str, Any], *, where: str = "preset") -> Config:
    """An instance of the dataclass ``config_class`` from a TOML table (module docstring)."""
    if not is_dataclass(config_class):
        raise ValidationError(f"{config_class!r} is not a dataclass")
    hints = typing.get_type_hints(config_class)
    names = [item.name for item in fields(config_class)]
    unknown = [key for key in table if key not in names]
    if unknown:
        raise ValidationError(
            f"{where}: unknown setting(s) {', '.join(unknown)} for {config_class.__name__}; "
            f"its settings are {', '.join(names)}"
        )
    values = {key: _convert(hints[key], value, f"{where}: {key}") for key, value in table.items()}
    return config_class(**values)


def _convert(annotation: Any, value: Any, where: str) -> Any:
    """``value`` read from TOML, as the type ``annotation`` asks (module docstring)."""
    origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is Any:
        return value
    if is_dataclass(annotation) and isinstance(annotation, type):
        if not isinstance(value, dict):
            raise ValidationError(f"{where} must be a table, got {value!r}")
        return build(annotation, value, where=where)
    if origin in (Union, types.UnionType):
        options = [option for option in arguments if option is not type(None)]
        if value == NONE and len(options) < len(arguments):
            return None
        return _convert(options[0], value, where) if len(options) == 1 else value
    if origin is tuple:
        return _convert_tuple(arguments, value, where)
    if origin in (Mapping, dict) or annotation in (Mapping, dict):
        if not isinstance(value, dict):
            raise ValidationError(f"{where} must be a table, got {value!r}")
        return dict(value)
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValidationError(f"{where} must be a number, got {value!r}")
        return float(value)
    wrong_type = annotation in (int, str, bool) and not isinstance(value, annotation)
    if wrong_type or (annotation is int and isinstance(value, bool)):
        raise ValidationError(f"{where} must be of type {annotation.__name__}, got {value!r}")
    return value


def _convert_tuple(arguments: tuple[Any, ...], value: Any, where: str) -> tuple[Any, ...]:
    variadic = len(arguments) == 2 and arguments[1] is Ellipsis
    if isinstance(value, dict) and variadic:
        value = list(value.items())  # a table of settings: its (key, value) pairs, in order
    if not isinstance(value, (list, tuple)):
        raise ValidationError(f"{where} must be an array, got {value!r}")
    if variadic:
        return tuple(_convert(arguments[0], item, f"{where}[{index}]") for index, item in enumerate(value))
    if len(value) != len(arguments):
        raise ValidationError(f"{where} must hold {len(arguments)} values, got {value!r}")
    return tuple(
        _convert(kind, item, f"{where}[{index}]")
        for index, (kind, item) in enumerate(zip(arguments, value, strict=True))
    )
