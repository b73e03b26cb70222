"""What the two-layer models share: construction checks, sizes and the chains from the base.

:class:`~boltzlab.models.rbm.RBM` and :class:`~boltzlab.models.gaussian_rbm.GaussianRBM`
both have one visible and one hidden layer coupled by ``weights`` of shape
``(n_visible, n_hidden)``, a base ``p1(v, h) = p1(v) · 2^{−J}`` with uniform hidden units
(docs/algorithms.md §1.3), and hidden units that are Bernoulli given ``v`` with log-odds
``conditional_logits(1, ...)``. Only the visible layer and its base differ; this module holds
the rest once.
"""

from __future__ import annotations

import abc
from typing import Any

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.models.files import ModelFile
from boltzlab.rng import resolve_generator, sample_bernoulli
from boltzlab.validation import as_model_data, check_positive_int, require

__all__ = ["BipartiteModel", "check_finite", "initial_weights", "parameter_vector"]


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

    ``weights`` checked against the sizes given, or, without it, draws from
    N(0, ``weight_std``²) made in float64 with ``generator``.
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
    draws = torch.randn(n_visible, n_hidden, generator=gen, device=device, dtype=torch.float64)
    return (draws * float(weight_std)).to(dtype)


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


class BipartiteModel(ModelFile, abc.ABC):
    """Mixin for an ``nn.Module`` with ``weights`` of shape ``(n_visible, n_hidden)``.

    A subclass provides ``_base_visible(n_chains, generator)`` (exact draws of ``v`` from
    its base) and ``conditional_logits(1, (v, h), beta)``; it gets the sizes, dtype and
    device, :meth:`init_chains` and :meth:`chains_from`, and from
    :class:`~boltzlab.models.files.ModelFile` :meth:`save` and :meth:`load`.
    """

    update_groups: tuple[tuple[int, ...], ...] = ((1,), (0,))
    weights: Tensor

    # ------------------------------------------------------------------ properties
    @property
    def n_visible(self) -> int:
        return self.weights.shape[0]

    @property
    def n_hidden(self) -> int:
        return self.weights.shape[1]

    @property
    def layer_sizes(self) -> tuple[int, ...]:
        return (self.n_visible, self.n_hidden)

    @property
    def dtype(self) -> torch.dtype:
        return self.weights.dtype

    @property
    def device(self) -> torch.device:
        return self.weights.device

    # ------------------------------------------------------------------ chains
    @abc.abstractmethod
    def _base_visible(self, n_chains: int, generator: torch.Generator) -> Tensor:
        """``n_chains`` exact draws of ``v`` from the base; shape ``(n_chains, n_visible)``."""

    @abc.abstractmethod
    def conditional_logits(self, index: int, layers: tuple[Tensor, ...], beta: Tensor) -> Tensor:
        """Log-odds of layer ``index`` given the others at per-chain ``beta`` (the model's own)."""

    def init_chains(
        self, n_chains: int, *, generator: torch.Generator | int | None = None, beta: float = 0.0
    ) -> Chains:
        """``n_chains`` exact samples from the base (``v`` from the visible base, ``h`` uniform).

        ``beta`` only labels the chains; the states are exact at β = 0.
        """
        n_chains = check_positive_int(n_chains, "n_chains")
        generator = resolve_generator(generator, self.device)
        with torch.no_grad():
            v = self._base_visible(n_chains, generator)
            h = sample_bernoulli(
                torch.full((n_chains, self.n_hidden), 0.5, dtype=self.dtype, device=self.device),
                generator=generator,
            )
        beta_t = torch.full((n_chains,), float(beta), dtype=self.dtype, device=self.device)
        return Chains(layers=(v, h), beta=beta_t)

    def chains_from(
        self, v: Any, *, generator: torch.Generator | int | None = None, beta: float = 1.0
    ) -> Chains:
        """Chains started at visible states ``v`` (shape ``(n, D)``) with ``h ~ p_β(h | v)``."""
        v = as_model_data(self, v, "v")
        generator = resolve_generator(generator, self.device)
        beta_t = torch.full((v.shape[0],), float(beta), dtype=self.dtype, device=self.device)
        probability = torch.sigmoid(self.conditional_logits(1, (v, None), beta_t))  # type: ignore[arg-type]
        h = sample_bernoulli(probability, generator=generator)
        return Chains(layers=(v, h), beta=beta_t)
