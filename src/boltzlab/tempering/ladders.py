"""Temperature ladders: the inverse temperatures a tempered sampler moves between.

Canonical order everywhere in boltzlab: **ascending**, ``β_0 < β_1 < … < β_{K−1} = 1``, so
index ``K − 1`` is the target (the RTS paper's order). The CAST/Wang-Landau paper writes its
ladder descending (``β_1 = 1 > … > β_K = 0.9``); code that follows it converts at the door.
Ladders are float64.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.validation import check_positive_int

__all__ = ["Ladder", "explicit", "geometric", "resolve", "uniform"]


@dataclass(frozen=True)
class Ladder:
    """An ascending ladder of inverse temperatures ending at 1.

    Attributes
    ----------
    betas : Tensor, shape (K,), float64
        Strictly increasing, finite, in [0, 1], last entry exactly 1.
    """

    betas: Tensor

    def __post_init__(self) -> None:
        betas = self.betas
        if not isinstance(betas, Tensor) or betas.dim() != 1 or betas.numel() < 1:
            raise ValidationError("a ladder needs a 1-D tensor of at least one inverse temperature")
        if betas.dtype != torch.float64:
            raise ValidationError(f"ladder betas must be float64, got {betas.dtype}")
        if not bool(torch.isfinite(betas).all()):
            raise ValidationError("ladder betas must be finite")
        if float(betas[-1]) != 1.0:
            raise ValidationError(f"a ladder must end at beta = 1 (the target), got {float(betas[-1])}")
        if float(betas[0]) < 0.0:
            raise ValidationError(f"inverse temperatures must be >= 0, got {float(betas[0])}")
        if betas.numel() > 1 and not bool((betas[1:] > betas[:-1]).all()):
            raise ValidationError("ladder betas must be strictly increasing (ascending order, target last)")

    @property
    def size(self) -> int:
        """Number of levels K."""
        return self.betas.numel()

    def to(self, device: str | torch.device) -> Ladder:
        return Ladder(self.betas.to(device))

    def __len__(self) -> int:
        return self.size


def uniform(n_levels: int, *, low: float = 0.0) -> Ladder:
    """``n_levels`` inverse temperatures equally spaced from ``low`` to 1."""
    n_levels = check_positive_int(n_levels, "n_levels")
    _check_low(low)
    if n_levels == 1:
        return Ladder(torch.ones(1, dtype=torch.float64))
    betas = torch.linspace(low, 1.0, n_levels, dtype=torch.float64)
    betas[-1] = 1.0
    return Ladder(betas)


def geometric(n_levels: int, *, low: float = 0.01) -> Ladder:
    """``n_levels`` inverse temperatures in geometric progression from ``low`` (> 0) to 1.

    Equal ratios ``β_{k+1}/β_k``: the usual choice when the energy scale is large, since
    swap acceptance between neighbours then stays roughly constant along the ladder.
    """
    n_levels = check_positive_int(n_levels, "n_levels")
    _check_low(low)
    if low <= 0.0:
        raise ValidationError(f"a geometric ladder needs low > 0, got {low}")
    if n_levels == 1:
        return Ladder(torch.ones(1, dtype=torch.float64))
    betas = torch.logspace(math.log10(low), 0.0, n_levels, dtype=torch.float64)
    betas[-1] = 1.0
    return Ladder(betas)


def explicit(betas: Sequence[float] | Tensor) -> Ladder:
    """A ladder from given values (validated: strictly increasing, in [0, 1], ending at 1).

    A descending list such as the CAST paper's ``[1.0, 0.995, …, 0.9]`` is refused rather
    than silently reversed: reverse it yourself so the level indices stay what you meant.
    """
    tensor = torch.as_tensor(betas, dtype=torch.float64).flatten().clone()
    return Ladder(tensor)


def resolve(
    ladder: Ladder | Sequence[float] | Tensor | None,
    *,
    n_levels: int | None = None,
    default_levels: int = 10,
    low: float = 0.0,
    name: str = "ladder",
) -> Ladder:
    """The ladder a tempered sampler was given, validated, with at least two levels.

    ``None`` gives ``uniform(n_levels or default_levels, low=low)``; a :class:`Ladder` or a
    sequence of ascending values ending at 1 is used as is. ``n_levels``, when also given,
    must agree with the ladder's size.
    """
    if n_levels is not None and (isinstance(n_levels, bool) or not isinstance(n_levels, int) or n_levels < 2):
        raise ValidationError(f"n_levels must be an integer >= 2, got {n_levels!r}")
    if ladder is None:
        resolved = uniform(default_levels if n_levels is None else n_levels, low=low)
    elif isinstance(ladder, Ladder):
        resolved = ladder
    else:
        try:
            resolved = explicit(ladder)
        except ValidationError as error:
            raise ValidationError(f"{name}: {error}") from None
        except (TypeError, ValueError, RuntimeError):
            raise ValidationError(
                f"{name} must be a Ladder or a sequence of inverse temperatures, got {type(ladder).__name__}"
            ) from None
    if ladder is not None and n_levels is not None and n_levels != resolved.size:
        raise ValidationError(f"n_levels={n_levels} but the {name} has {resolved.size} levels")
    if resolved.size < 2:
        raise ValidationError(
            f"a tempered sampler needs a {name} of at least two levels, got {resolved.size}"
        )
    return resolved


def _check_low(low: float) -> None:
    if not 0.0 <= float(low) < 1.0:
        raise ValidationError(f"low must be in [0, 1), got {low}")
