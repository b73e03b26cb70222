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
from torch import Tensor, nn

from boltzlab.chains import Chains
from boltzlab.models.base_rate import UniformHiddenBase
from boltzlab.models.files import ModelFile
from boltzlab.models.parameters import check_finite, initial_weights, parameter_vector
from boltzlab.rng import resolve_generator, sample_bernoulli
from boltzlab.validation import as_model_data

# initial_weights, parameter_vector and check_finite live in boltzlab.models.parameters;
# they stay importable from here, where they were first defined.
__all__ = ["BipartiteModel", "CouplingSizes"]


class CouplingSizes:
    """Mixin: sizes, dtype and device read off ``weights``, whose last two axes are (visible, hidden).

    Serves a model (``weights`` of shape ``(n_visible, n_hidden)``) and a stack of its
    snapshots (``(n_points, n_visible, n_hidden)``) alike.
    """

    weights: Tensor

    @property
    def n_visible(self) -> int:
        return self.weights.shape[-2]

    @property
    def n_hidden(self) -> int:
        return self.weights.shape[-1]

    @property
    def dtype(self) -> torch.dtype:
        return self.weights.dtype

    @property
    def device(self) -> torch.device:
        return self.weights.device


class BipartiteModel(CouplingSizes, UniformHiddenBase, ModelFile, abc.ABC):
    """Mixin for an ``nn.Module`` with ``weights`` of shape ``(n_visible, n_hidden)``.

    A subclass provides ``_base_visible(n_chains, generator)`` (exact draws of ``v`` from
    its base) and ``conditional_logits(1, (v, h), beta)``, and calls :meth:`_init_bipartite`
    from its constructor. It gets the sizes, dtype and device, :meth:`chains_from`,
    :meth:`init_chains` from :class:`~boltzlab.models.base_rate.UniformHiddenBase`, and
    :meth:`save` and :meth:`load` from :class:`~boltzlab.models.files.ModelFile`.
    """

    update_groups: tuple[tuple[int, ...], ...] = ((1,), (0,))

    @property
    def layer_sizes(self) -> tuple[int, ...]:
        return (self.n_visible, self.n_hidden)

    def _init_bipartite(
        self,
        n_visible: int | None,
        n_hidden: int | None,
        weights: Tensor | None,
        visible_bias: Tensor | None,
        hidden_bias: Tensor | None,
        *,
        dtype: torch.dtype,
        device: torch.device,
        generator: torch.Generator | int | None,
        weight_std: float,
        base_logits: bool = False,
    ) -> None:
        """Check and set ``weights``, ``visible_bias`` and ``hidden_bias`` as parameters.

        Sizes and weights as :func:`~boltzlab.models.parameters.initial_weights`; biases
        zero unless given. Also sets ``base_fitted = False`` and an empty ``metadata``, and with
        ``base_logits`` the zero ``base_logits`` buffer ``(n_visible,)`` (the uniform base) in
        which the binary, spin and Potts RBMs keep their base.
        """
        weights = initial_weights(
            n_visible,
            n_hidden,
            weights,
            dtype=dtype,
            device=device,
            generator=generator,
            weight_std=weight_std,
        )
        n_visible, n_hidden = weights.shape
        visible_bias = parameter_vector(visible_bias, n_visible, "visible_bias", dtype, device)
        hidden_bias = parameter_vector(hidden_bias, n_hidden, "hidden_bias", dtype, device)
        check_finite({"weights": weights, "visible_bias": visible_bias, "hidden_bias": hidden_bias})
        self.weights = nn.Parameter(weights)
        self.visible_bias = nn.Parameter(visible_bias)
        self.hidden_bias = nn.Parameter(hidden_bias)
        self.base_fitted = False
        self.metadata: dict[str, Any] = {}
        if base_logits:
            self.register_buffer("base_logits", torch.zeros(n_visible, dtype=dtype, device=device))

    # ------------------------------------------------------------------ chains
    @abc.abstractmethod
    def _base_visible(self, n_chains: int, generator: torch.Generator) -> Tensor:
        """``n_chains`` exact draws of ``v`` from the base; shape ``(n_chains, n_visible)``."""

    @abc.abstractmethod
    def conditional_logits(self, index: int, layers: tuple[Tensor, ...], beta: Tensor) -> Tensor:
        """Log-odds of layer ``index`` given the others at per-chain ``beta`` (the model's own)."""

    def chains_from(
        self, v: Any, *, generator: torch.Generator | int | None = None, beta: float = 1.0
    ) -> Chains:
        """Chains started at visible states ``v`` (shape ``(n, D)``) with ``h ~ p_β(h | v)``."""
        v = as_model_data(self, v, "v")
        generator = resolve_generator(generator, self.device)
        beta_t = torch.full((v.shape[0],), float(beta), dtype=self.dtype, device=self.device)
        probability = torch.sigmoid(self.conditional_logits(1, (v, None), beta_t))  # type: ignore[arg-type]
        return Chains(layers=(v, sample_bernoulli(probability, generator=generator)), beta=beta_t)
