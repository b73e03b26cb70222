"""Construction checks every model class shares: its dtype, initial weights and bias vectors.

The RBM, the Gaussian-binary RBM, the DBM and the training trajectory all build their
parameters from the same pieces: a floating dtype, weight matrices drawn from
N(0, ``weight_std``²) in float64 (so float32 and float64 models start from the same numbers
for the same seed), bias vectors of a checked shape, and a refusal of NaN or infinities that
names the offending tensor. This module holds them once.
"""

from __future__ import annotations

import torch
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.rng import resolve_generator
from boltzlab.validation import check_positive_int, require

__all__ = ["FLOAT_DTYPES"]

#: The dtypes a model's parameters may have (the binary models accept all four).
FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def check_dtype(
    dtype: torch.dtype,
    allowed: tuple[torch.dtype, ...] = FLOAT_DTYPES,
    *,
    described: str = "a floating dtype",
) -> torch.dtype:
    """``dtype`` if it is one of ``allowed``; :class:`ValidationError` naming ``described`` otherwise."""
    require(dtype in allowed, f"dtype must be {described}, got {dtype}")
    return dtype


def normal_weights(
    rows: int,
    columns: int,
    *,
    generator: torch.Generator,
    weight_std: float,
    dtype: torch.dtype,
    device: torch.device,
) -> Tensor:
    """A ``(rows, columns)`` matrix of N(0, ``weight_std``²) draws, in ``dtype`` on ``device``.

    Drawn in float64 and then rounded, so every dtype starts from the same numbers for one
    seed; ``generator`` is advanced by ``rows·columns`` normal draws.
    """
    draws = torch.randn(rows, columns, generator=generator, device=device, dtype=torch.float64)
    return (draws * float(weight_std)).to(dtype)


def initial_weights(
    n_visible: int | None,
    n_hidden: int | None,
    weights: Tensor | None,
    *,
    dtype: torch.dtype,
    device: torch.device,
    generator: torch.Generator | int | None,
    weight_std: float,
) -> Tensor:
    """The weight matrix, shape ``(n_visible, n_hidden)``, in ``dtype`` on ``device`` (a copy).

    ``weights`` checked against the sizes given, or, without it, :func:`normal_weights` made
    with ``generator``.
    """
    if weights is not None:
        weights = torch.as_tensor(weights)
        require(
            weights.dim() == 2,
            f"weights must have shape (n_visible, n_hidden), got {tuple(weights.shape)}",
        )
        if n_visible is not None and n_visible != weights.shape[0]:
            raise ValidationError(f"n_visible={n_visible} but weights has {weights.shape[0]} rows")
        if n_hidden is not None and n_hidden != weights.shape[1]:
            raise ValidationError(f"n_hidden={n_hidden} but weights has {weights.shape[1]} columns")
        return weights.to(device=device, dtype=dtype).clone()
    if n_visible is None or n_hidden is None:
        raise ValidationError("give n_visible and n_hidden, or weights=")
    n_visible = check_positive_int(n_visible, "n_visible")
    n_hidden = check_positive_int(n_hidden, "n_hidden")
    gen = resolve_generator(generator, device)
    return normal_weights(
        n_visible, n_hidden, generator=gen, weight_std=weight_std, dtype=dtype, device=device
    )


def parameter_vector(
    value: Tensor | None, size: int, name: str, dtype: torch.dtype, device: torch.device
) -> Tensor:
    """``value`` (zeros when ``None``) checked to have shape ``(size,)``; a copy in ``dtype``."""
    if value is None:
        return torch.zeros(size, dtype=dtype, device=device)
    value = torch.as_tensor(value)
    require(tuple(value.shape) == (size,), f"{name} must have shape ({size},), got {tuple(value.shape)}")
    return value.to(device=device, dtype=dtype).clone()


def check_finite(tensors: dict[str, Tensor]) -> None:
    """Refuse, naming it, the first tensor that holds NaN or an infinity."""
    for name, tensor in tensors.items():
        require(bool(torch.isfinite(tensor).all()), f"{name} contains NaN or infinite values")
