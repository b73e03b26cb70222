"""Where tempering schemes file themselves, so that samplers, trainers and estimators find them.

A scheme module decorates its factory ``factory(operator, **options) -> TemperingScheme``
with :func:`register_scheme`; ``boltzlab.sampling`` then offers it as
``sample(model, sampler=name)``. The registry lives here, in the tempering layer, so a
scheme never imports from the layers above it (docs/architecture.md, "Layout").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from boltzlab.registry import Registry

__all__ = ["SchemeFactory", "get_scheme_factory", "register_scheme", "schemes"]

SchemeFactory = Callable[..., Any]
_SCHEMES: Registry[SchemeFactory] = Registry("tempering scheme")


def register_scheme(name: str) -> Callable[[SchemeFactory], SchemeFactory]:
    """Decorator for ``factory(operator, **options) -> TemperingScheme`` filed under ``name``."""
    return _SCHEMES.register(name)


def schemes() -> tuple[str, ...]:
    """Names of the registered tempering schemes."""
    return _SCHEMES.names()


def get_scheme_factory(name: str) -> SchemeFactory:
    """The factory registered as ``name`` (a clear error lists the known names)."""
    return _SCHEMES.get(name)
