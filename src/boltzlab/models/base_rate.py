"""The base of the binary models' tempered family: base-rate visible units, uniform hidden ones.

An RBM and a DBM share one normalised base (docs/algorithms.md §1.3; Salakhutdinov & Murray
2008): independent Bernoulli visible units with log-odds ``b^A`` and every hidden unit
uniform,

    log p1(v, h) = b^A·v − Σ_i softplus(b^A_i) − J·log 2,        J = number of hidden units.

``b^A`` is fitted to the smoothed data marginals (:meth:`BaseRateModel.set_base_rate`) or
zero (:meth:`BaseRateModel.set_uniform_base`: plain energy scaling). At β the visible
log-odds are ``β·(input) + (1 − β)·b^A``. This module holds the base, its normaliser, its
exact draws and those visible log-odds once; :class:`UniformHiddenBase` also serves the
Gaussian-binary RBM, whose hidden units are uniform under its own base too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Self

import torch
from torch import Tensor

from boltzlab import gemm
from boltzlab.chains import Chains
from boltzlab.models.base import all_ones, chains_at, tempered_log_f
from boltzlab.models.witness import DEFAULT_WITNESS_ROWS, WitnessRows
from boltzlab.numerics import softplus
from boltzlab.rng import resolve_generator, sample_bernoulli
from boltzlab.validation import as_binary_tensor, check_positive_int, check_sample_weights, require

__all__ = ["BaseRateModel", "UniformHiddenBase"]


def _base_rate_logits(
    data: Any,
    n_visible: int,
    *,
    smoothing: float,
    device: torch.device,
    sample_weights: Any = None,
) -> Tensor:
    """``logit(p̄)`` with ``p̄ = (1 − smoothing)·mean(data) + smoothing/2``; float64, ``(n_visible,)``.

    The smoothing keeps every marginal inside (0, 1), so every logit is finite; it changes the
    variance of estimators, never their target. With ``sample_weights`` the mean is the
    weighted one, ``Σ_n w_n v_n / Σ_n w_n``.

    Parameters
    ----------
    data : Tensor, shape (n_examples, n_visible), values 0/1
    n_visible : int
    smoothing : float in (0, 1]
    device : torch.device
    sample_weights : Tensor of shape (n_examples,), optional
        Non-negative, with a positive sum (:func:`~boltzlab.validation.check_sample_weights`).
    """
    require(0.0 < smoothing <= 1.0, f"smoothing must be in (0, 1], got {smoothing}")
    data = as_binary_tensor(data, "data", n_units=n_visible, dtype=torch.float64, device=device)
    if sample_weights is None:
        mean = data.mean(0)
    else:
        weights = check_sample_weights(sample_weights, data.shape[0], device=device)
        mean = (weights @ data) / weights.sum()
    return torch.logit((1.0 - smoothing) * mean + 0.5 * smoothing)


def base_rate_log_norm(base_logits: Tensor, n_uniform: int) -> Tensor:
    """``Σ_i softplus(b^A_i) + n_uniform·log 2``: ``log p1(x) = b^A·v − this``; 0-dim float64.

    Kept a tensor on ``base_logits``' device: converting it to a Python float would
    synchronise an accelerator on every call (AIS calls it once per temperature).

    Parameters
    ----------
    base_logits : Tensor, shape (n_visible,)
        ``b^A``.
    n_uniform : int
        Number of uniform (hidden) units in the base.
    """
    return softplus(base_logits.detach().to(torch.float64)).sum() + n_uniform * math.log(2.0)


class UniformHiddenBase:
    """Mixin: :meth:`init_chains` for a model whose base has every hidden layer uniform.

    The model provides ``_base_visible(n_chains, generator)`` (exact draws of ``v`` from its
    visible base, shape ``(n_chains, n_visible)``), ``layer_sizes`` (visible first),
    ``dtype`` and ``device``. Serves the RBM, the DBM and the Gaussian-binary RBM alike.
    """

    layer_sizes: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    _base_visible: Callable[[int, torch.Generator], Tensor]

    def init_chains(
        self, n_chains: int, *, generator: torch.Generator | int | None = None, beta: float = 0.0
    ) -> Chains:
        """``n_chains`` exact samples from the base: ``v`` from the visible base, hidden uniform.

        Each hidden layer is drawn in order after ``v``. ``beta`` only labels the chains;
        the states are exact at β = 0.
        """
        n_chains = check_positive_int(n_chains, "n_chains")
        generator = resolve_generator(generator, self.device)
        with torch.no_grad():
            v = self._base_visible(n_chains, generator)
            hidden = tuple(
                sample_bernoulli(
                    torch.full((n_chains, size), 0.5, dtype=self.dtype, device=self.device),
                    generator=generator,
                )
                for size in self.layer_sizes[1:]
            )
        return chains_at((v, *hidden), beta)


class BaseRateModel(UniformHiddenBase):
    """Mixin for a binary model whose base is base-rate on ``v`` and uniform on every hidden layer.

    The model provides the ``base_logits`` buffer (shape ``(n_visible,)``), the ``base_fitted``
    flag, ``layer_sizes`` (visible first), ``dtype``, ``device`` and ``energy``; it gets
    :meth:`set_base_rate`, :meth:`set_uniform_base`, :meth:`log_f` and the base's pieces. A
    model that also mixes in :class:`~boltzlab.models.witness.WitnessRows` (the RBM, whose log Z
    verdict has a certified bound to start from data) keeps witness rows of the data its base
    is fitted to.
    """

    base_logits: Tensor
    base_fitted: bool
    layer_sizes: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    energy: Callable[[tuple[Tensor, ...]], Tensor]

    def set_base_rate(
        self,
        data: Tensor,
        *,
        smoothing: float = 0.05,
        sample_weights: Tensor | None = None,
        witness_rows: int = DEFAULT_WITNESS_ROWS,
    ) -> Self:
        """Fit the base-rate base to ``data``'s marginals and keep witness rows of it; returns ``self``.

        ``p̄ = (1 − smoothing)·mean(data) + smoothing/2`` keeps every marginal inside (0, 1);
        the smoothing changes the variance of estimators, never their target.

        Parameters
        ----------
        data : Tensor, shape (n_examples, n_visible), values 0/1
        smoothing : float in (0, 1], default 0.05
        sample_weights : Tensor of shape (n_examples,), optional
            Per-example weights (non-negative, positive sum): the marginals are the weighted
            means ``Σ_n w_n v_n / Σ_n w_n``, as for training with the same weights. Uniform if absent.
        witness_rows : int, default 1000
            Rows of ``data`` a model with witness rows (an RBM) keeps and saves for the
            verdict's missing-mass witness (``set_witness``, docs/trust.md); 0 keeps none, and
            estimates without ``check_data`` then say ``"unchecked"``. A model with no
            certified bound (a DBM) keeps none: nothing would use them.
        """
        logits = _base_rate_logits(
            data, self.layer_sizes[0], smoothing=smoothing, device=self.device, sample_weights=sample_weights
        )
        if isinstance(self, WitnessRows):
            self.set_witness(data, n_rows=witness_rows)
        with torch.no_grad():
            self.base_logits.copy_(logits.to(self.dtype))
        self.base_fitted = True
        return self

    @staticmethod
    def visible_values(v: Tensor) -> Tensor:
        """What the energy reads of visible rows as chains hold them: ``v`` itself for 0/1 and
        one-hot units; ``2v − 1`` for ±1 spins (:class:`~boltzlab.models.spin.SpinVisible`)."""
        return v

    def set_uniform_base(self) -> Self:
        """Use the uniform base (plain energy scaling); returns ``self``."""
        with torch.no_grad():
            self.base_logits.zero_()
        self.base_fitted = False
        return self

    def _base_log_norm(self) -> Tensor:
        """:func:`base_rate_log_norm` with every hidden unit uniform; 0-dim float64."""
        return base_rate_log_norm(self.base_logits, sum(self.layer_sizes[1:]))

    def _base_log_p1(self, v: Tensor) -> Tensor:
        """``log p1`` of visible states ``v`` (shape ``(n, n_visible)``), hidden units included; float64."""
        return v.to(torch.float64) @ self.base_logits.to(torch.float64) - self._base_log_norm()

    def _base_visible(self, n_chains: int, generator: torch.Generator) -> Tensor:
        """``n_chains`` exact draws of ``v`` from the base-rate model; shape ``(n_chains, n_visible)``."""
        p_visible = torch.sigmoid(self.base_logits).expand(n_chains, -1)
        return sample_bernoulli(p_visible.contiguous(), generator=generator)

    def _visible_logits(self, bias: Tensor, hidden: Tensor, weights: Tensor, beta: Tensor) -> Tensor:
        """``β·(bias + hidden·weightsᵀ) + (1 − β)·b^A`` at per-chain ``beta``; shape ``(n, n_visible)``.

        ``weights`` couples ``v`` to ``hidden``, shape ``(n_visible, n_hidden)``. At β = 1
        the base drops out, and with the uniform base ``b^A = 0`` it adds nothing, so
        neither case pays for it.
        """
        if all_ones(beta):
            return gemm.addmm(bias, hidden, weights.t())
        logits = gemm.addmm(bias - self.base_logits, hidden, weights.t()).mul_(beta[:, None])
        return logits.add_(self.base_logits) if self.base_fitted else logits

    def log_f(self, layers: tuple[Tensor, ...], beta: Tensor | float) -> Tensor:
        """Joint tempered log density ``−βE(x) + (1−β) log p1(x)``; float64, shape ``(n,)``."""
        return tempered_log_f(self.energy(layers), self._base_log_p1(layers[0]), beta)
