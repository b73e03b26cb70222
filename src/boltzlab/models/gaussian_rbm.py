"""Gaussian-binary RBM: real-valued visible units, binary hidden units, on its tempered family.

**Energy.** With ``v ∈ R^D``, ``h ∈ {0,1}^J`` and per-unit standard deviations ``σ_i > 0``
(Hinton 2010, *A practical guide to training restricted Boltzmann machines*, §13.2;
Krizhevsky 2009, *Learning multiple layers of features from tiny images*, §1.4)::

    E(v, h) = Σ_i (v_i − b_i)²/(2σ_i²) − Σ_ij (v_i/σ_i) W_ij h_j − Σ_j c_j h_j,

so that ``p(h_j = 1 | v) = σ(c_j + Σ_i (v_i/σ_i) W_ij)`` and
``p(v_i | h) = N(b_i + σ_i (Wh)_i, σ_i²)``. Cho, Raiko & Ilin (2011, *Improved learning of
Gaussian-Bernoulli restricted Boltzmann machines*, ICANN) couple ``v_i W'_ij h_j / σ_i²``;
theirs is this model with ``W'_ij = σ_i W_ij``. ``σ`` is fixed by default (standardise the
data and keep ``σ = 1``, as Hinton 2010 recommends); ``learn_std=True`` makes ``log σ`` a
parameter (Cho et al. 2011 learn ``log σ²``; the gradient is in
:mod:`boltzlab.training.gaussian_objective`).

**Tempered family** (docs/architecture.md; docs/algorithms.md §1.3, with a Gaussian base in place of the
base-rate model): the normalised base is ``p1(v, h) = Π_i N(v_i; μ_i, s_i²) · 2^{−J}``
(``set_base_from_data``: the data's mean and variance per unit), and

    log f_β(v, h) = −β E(v, h) + (1 − β)·log p1(v, h),        Z(0) = 1,  Z(1) = Z.

With the hidden units summed out this is exactly the :class:`~boltzlab.models.base.MarginalTerms`
form, so AIS, RTS, TI and the tempering schemes apply unchanged::

    log f_β(v) = (1 − β)·[log N(v; μ, s²) − J log 2] + β·(−Σ_i (v_i − b_i)²/(2σ_i²))
                 + Σ_j softplus(β a_j(v)),          a_j(v) = c_j + Σ_i (v_i/σ_i) W_ij.

**Conditionals at β** (per chain). ``h | v``: Bernoulli with log-odds ``β a(v)``. ``v | h``:
``log f_β`` is a quadratic in each ``v_i`` separately,
``−λ_i v_i²/2 + η_i v_i + const`` with

    λ_i = β/σ_i² + (1 − β)/s_i²,      η_i = β·(b_i/σ_i² + (Wh)_i/σ_i) + (1 − β)·μ_i/s_i²,

so ``v_i | h ~ N(η_i/λ_i, 1/λ_i)`` — at β = 1 the usual ``N(b_i + σ_i (Wh)_i, σ_i²)``, at
β = 0 the base. The layerwise operators draw this layer exactly through
:meth:`GaussianRBM.sample_conditional` (``layer_kinds = ("gaussian", "binary")``, see
:mod:`boltzlab.operators.base`); the binary hidden layer is updated by the operator's own rule.

**Exact log Z(β)** for small ``J``: for each ``h`` the integral over ``v`` is Gaussian, so
``log f_β(h)`` is a quadratic form in ``h``; :mod:`boltzlab.models.gaussian_rbm_exact` holds
it, and :meth:`GaussianRBM.enumerate_log_f` sums it over the ``2^J`` hidden states, which
makes :func:`boltzlab.exact_log_z` work.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from boltzlab.errors import ValidationError
from boltzlab.io import register_model_kind
from boltzlab.models.base import MarginalTerms, all_ones, log_f_marginal, tempered_log_f
from boltzlab.models.bipartite import BipartiteModel
from boltzlab.models.files import gaussian_rbm_kind
from boltzlab.models.gaussian_rbm_exact import (
    GaussianParameters64,
    enumerate_hidden_log_f,
    hidden_quadratic_form,
)
from boltzlab.models.parameters import check_dtype
from boltzlab.rng import randn, resolve_generator, sample_bernoulli
from boltzlab.validation import as_real_tensor, check_device, require

__all__ = ["GaussianConditional", "GaussianRBM", "as_real_tensor"]

_FLOAT_DTYPES = (torch.float32, torch.float64)
_HIDDEN_MODES = ("probability", "sample", "threshold")


@dataclass(frozen=True, slots=True)
class GaussianConditional:
    """The factorial Gaussian ``p_β(v | h)`` of a batch of chains.

    Attributes
    ----------
    mean : Tensor, shape (n, n_visible)
        ``η/λ`` (see the module docstring), in the model's dtype.
    std : Tensor, shape (n, n_visible)
        ``λ^{-1/2}``, in the model's dtype.
    """

    mean: Tensor
    std: Tensor

    def log_density(self, v: Tensor) -> Tensor:
        """``log p_β(v | h)`` summed over units; float64, shape ``(n,)``."""
        mean, std = self.mean.to(torch.float64), self.std.to(torch.float64)
        z = (v.to(torch.float64) - mean) / std
        return -(0.5 * z.square() + torch.log(std) + 0.5 * math.log(2.0 * math.pi)).sum(1)


class GaussianRBM(BipartiteModel, nn.Module):
    """A Gaussian-binary RBM; parameters only, so ``torch.optim`` and ``state_dict`` work.

    Parameters
    ----------
    n_visible, n_hidden : int, optional
        Layer sizes, when no ``weights`` are given. Weights are drawn from N(0, ``weight_std``²)
        with ``generator``; biases start at zero.
    weights : Tensor, shape (n_visible, n_hidden), optional
    visible_bias : Tensor, shape (n_visible,), optional
        ``b``, the mean of ``v`` when every hidden unit is off.
    hidden_bias : Tensor, shape (n_hidden,), optional
    std : float or Tensor of shape (n_visible,), default 1.0
        ``σ``, the per-unit standard deviations (positive). Standardise the data and keep 1.
    learn_std : bool, default False
        Make ``log σ`` a trainable parameter (else a fixed buffer; either way ``log_std``).
    dtype : torch.float32 or torch.float64, default float32
    device : str or torch.device, default "cpu"
    generator : torch.Generator or int, optional
        Randomness for the initial weights.
    weight_std : float, default 0.01

    Attributes
    ----------
    weights : Parameter, shape (n_visible, n_hidden)
    visible_bias : Parameter, shape (n_visible,)
    hidden_bias : Parameter, shape (n_hidden,)
    log_std : Parameter or buffer, shape (n_visible,)
        ``log σ``.
    base_mean, base_std : buffers, shape (n_visible,)
        ``μ`` and ``s`` of the Gaussian base. Until :meth:`set_base_from_data` they are
        ``b`` and ``σ``: the model's own visible marginal when ``W = 0``.
    base_fitted : bool
        Whether the base was fitted to data.
    layer_kinds : tuple of str
        ``("gaussian", "binary")``: how the layerwise operators update each layer.

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> model = bl.models.GaussianRBM(n_visible=5, n_hidden=3, generator=0)
    >>> data = torch.randn(40, 5, generator=torch.Generator().manual_seed(1))
    >>> model = model.set_base_from_data(data)
    >>> log_z = bl.exact_log_z(model)
    >>> bl.log_likelihood(model, data, log_z) < 0
    True
    """

    layer_kinds: tuple[str, ...] = ("gaussian", "binary")

    def __init__(
        self,
        n_visible: int | None = None,
        n_hidden: int | None = None,
        *,
        weights: Tensor | None = None,
        visible_bias: Tensor | None = None,
        hidden_bias: Tensor | None = None,
        std: float | Tensor = 1.0,
        learn_std: bool = False,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
        generator: torch.Generator | int | None = None,
        weight_std: float = 0.01,
    ) -> None:
        super().__init__()
        device = check_device(device)
        self._init_bipartite(
            n_visible,
            n_hidden,
            weights,
            visible_bias,
            hidden_bias,
            dtype=check_dtype(dtype, _FLOAT_DTYPES, described="torch.float32 or torch.float64"),
            device=device,
            generator=generator,
            weight_std=weight_std,
        )
        n_visible = self.n_visible
        std_t = torch.as_tensor(std, dtype=torch.float64)
        if std_t.dim() == 0:
            std_t = std_t.expand(n_visible)
        require(
            tuple(std_t.shape) == (n_visible,),
            f"std must be a number or have shape ({n_visible},), got shape {tuple(std_t.shape)}",
        )
        require(
            bool(torch.isfinite(std_t).all() and (std_t > 0).all()),
            "std must be positive and finite in every unit",
        )
        log_std = torch.log(std_t).to(device=device, dtype=dtype)
        if learn_std:
            self.log_std = nn.Parameter(log_std)
        else:
            self.register_buffer("log_std", log_std)
        self.register_buffer("base_mean", self.visible_bias.detach().clone())
        self.register_buffer("base_std", std_t.to(device=device, dtype=dtype).clone())

    # ------------------------------------------------------------------ properties
    @property
    def std(self) -> Tensor:
        """``σ = exp(log_std)``, shape ``(n_visible,)``, in the model's dtype (detached)."""
        return self.log_std.detach().exp()

    @property
    def learn_std(self) -> bool:
        """Whether ``log σ`` is a trainable parameter."""
        return isinstance(self.log_std, nn.Parameter)

    def extra_repr(self) -> str:
        base = "fitted" if self.base_fitted else "N(b, σ²)"
        return (
            f"n_visible={self.n_visible}, n_hidden={self.n_hidden}, dtype={self.dtype}, "
            f"learn_std={self.learn_std}, base={base}"
        )

    def _float64(self) -> GaussianParameters64:
        return GaussianParameters64(
            weights=self.weights.detach().to(torch.float64),
            visible_bias=self.visible_bias.detach().to(torch.float64),
            hidden_bias=self.hidden_bias.detach().to(torch.float64),
            std=self.log_std.detach().to(torch.float64).exp(),
            base_mean=self.base_mean.to(torch.float64),
            base_std=self.base_std.to(torch.float64),
        )

    def _scaled_weights(self) -> Tensor:
        """``W_ij / σ_i`` in the model's dtype, shape (D, J); D·J work, cheaper than scaling ``v``."""
        return self.weights.detach() * torch.exp(-self.log_std.detach())[:, None]

    # ------------------------------------------------------------------ data and base
    def validate_data(self, data: Any, name: str = "data") -> Tensor:
        """``data`` as a finite real tensor ``(n_examples, n_visible)`` in the model's dtype and device.

        The hook through which generic code (the trainer, :func:`boltzlab.log_likelihood`,
        :func:`boltzlab.sample`) accepts real-valued data for this model; binary models
        require 0/1 values instead (:func:`boltzlab.validation.as_model_data`).
        """
        return as_real_tensor(data, name, n_units=self.n_visible, dtype=self.dtype, device=self.device)

    def set_base_from_data(self, data: Any, *, min_std: float | Tensor | None = None) -> GaussianRBM:
        """Fit the Gaussian base ``N(μ, s²)`` to ``data``; returns ``self``.

        ``μ`` is the per-unit data mean and ``s² = max(data variance, min_std²)``. By default
        ``min_std = σ``: the model's visible marginal is a mixture of Gaussians of variance
        ``σ_i²``, so its variance is at least ``σ_i²``, and a narrower base (a constant pixel)
        would only make annealing from it harder. The base changes the variance of the
        estimators, never their target.

        Parameters
        ----------
        data : Tensor, shape (n_examples, n_visible), real
        min_std : float or Tensor of shape (n_visible,), optional
            Floor of ``s``; default ``σ``.
        """
        data = as_real_tensor(data, "data", n_units=self.n_visible, dtype=torch.float64, device=self.device)
        mean = data.mean(0)
        variance = data.var(0, unbiased=False)
        if min_std is None:
            floor = self._float64().std
        else:
            floor = torch.as_tensor(min_std, dtype=torch.float64, device=self.device).expand(self.n_visible)
            require(bool((floor > 0).all() and torch.isfinite(floor).all()), "min_std must be positive")
        std = torch.maximum(variance, floor.square()).sqrt()
        with torch.no_grad():
            self.base_mean.copy_(mean.to(self.dtype))
            self.base_std.copy_(std.to(self.dtype))
        self.base_fitted = True
        return self

    def set_base_rate(self, data: Any) -> GaussianRBM:
        """The trainer's base hook (``train(..., fit_base_rate=True)``): :meth:`set_base_from_data`."""
        return self.set_base_from_data(data)

    def _base_log_density(self, v64: Tensor) -> Tensor:
        """``log N(v; μ, s²)`` summed over units; float64, shape (n,)."""
        mean = self.base_mean.to(torch.float64)
        std = self.base_std.to(torch.float64)
        z = (v64 - mean) / std
        return -(0.5 * z.square()).sum(1) - (
            torch.log(std).sum() + 0.5 * self.n_visible * math.log(2.0 * math.pi)
        )

    # ------------------------------------------------------------------ densities
    def energy(self, layers: tuple[Tensor, ...]) -> Tensor:
        """``E(v, h)`` per chain; float64, shape ``(n,)``."""
        v, h = (layer.to(torch.float64) for layer in layers[:2])
        p = self._float64()
        quadratic = (((v - p.visible_bias) / p.std).square() * 0.5).sum(1)
        return quadratic - ((v @ p.scaled_weights) * h).sum(1) - h @ p.hidden_bias

    def log_f(self, layers: tuple[Tensor, ...], beta: Tensor | float) -> Tensor:
        """Joint ``−βE(v,h) + (1−β)·log p1(v,h)``; float64, shape ``(n,)``."""
        log_p1 = self._base_log_density(layers[0].to(torch.float64)) - self.n_hidden * math.log(2.0)
        return tempered_log_f(self.energy(layers), log_p1, beta)

    def marginal_terms(self, layers: tuple[Tensor, ...] | Tensor) -> MarginalTerms:
        """Summed-out pieces for visible states (``layers`` or just ``v``, shape ``(n, D)``).

        ``base = log N(v; μ, s²) − J log 2``, ``linear = −Σ_i (v_i − b_i)²/(2σ_i²)`` (float64),
        ``preactivation = c + (v/σ) W`` (model dtype).
        """
        v = layers[0] if isinstance(layers, tuple) else layers
        with torch.no_grad():
            preactivation = torch.addmm(self.hidden_bias.detach(), v, self._scaled_weights())
            v64 = v.to(torch.float64)
            base = self._base_log_density(v64) - self.n_hidden * math.log(2.0)
            # Only b and σ are needed: no float64 copy of W on this path (AIS calls it per temperature).
            visible_bias = self.visible_bias.detach().to(torch.float64)
            std = self.log_std.detach().to(torch.float64).exp()
            linear = -(((v64 - visible_bias) / std).square() * 0.5).sum(1)
        return MarginalTerms(base=base, linear=linear, preactivation=preactivation)

    def free_energy(self, v: Tensor, beta: Tensor | float = 1.0) -> Tensor:
        """``−log f_β(v)`` with the hidden units summed out; float64, shape ``(n,)``."""
        return -log_f_marginal(self.marginal_terms(v), beta)

    def hidden_log_f(self, h: Tensor, beta: float = 1.0) -> Tensor:
        """``log f_β(h) = log ∫ f_β(v, h) dv``, the visible layer integrated out; float64, shape ``(n,)``.

        At β = 1, ``hidden_log_f(h) − log Z`` is the model's exact marginal ``log p(h)``.

        Parameters
        ----------
        h : Tensor, shape (n, n_hidden), values 0/1
        beta : float in [0, 1], default 1
        """
        return hidden_quadratic_form(self._float64(), float(beta)).log_f(h.to(torch.float64))

    # ------------------------------------------------------------------ conditionals
    def conditional_logits(self, index: int, layers: tuple[Tensor, ...], beta: Tensor) -> Tensor:
        """Log-odds ``β·(c + (v/σ)W)`` of the hidden layer (``index == 1``); shape ``(n, n_hidden)``.

        The visible layer is Gaussian and has no log-odds: ``index == 0`` raises
        :class:`ValidationError`; use :meth:`sample_conditional` or :meth:`visible_conditional`.
        """
        if index == 1:
            with torch.no_grad():
                logits = torch.addmm(self.hidden_bias.detach(), layers[0], self._scaled_weights())
                return logits if all_ones(beta) else logits.mul_(beta[:, None])
        if index == 0:
            raise ValidationError(
                "the visible layer of a GaussianRBM is Gaussian: it has no log-odds; draw it with "
                "sample_conditional(0, ...) (the layerwise operators do so through layer_kinds)"
            )
        raise ValidationError(f"a GaussianRBM has layers 0 and 1, got index {index}")

    def visible_conditional(self, h: Tensor, beta: Tensor | float = 1.0) -> GaussianConditional:
        """``p_β(v | h)``: mean ``η/λ`` and standard deviation ``λ^{-1/2}`` per chain and unit.

        Parameters
        ----------
        h : Tensor, shape (n, n_hidden)
            Binary states (or probabilities, for a mean-field reconstruction).
        beta : float or Tensor of shape (n,), default 1
        """
        with torch.no_grad():
            beta_t = torch.as_tensor(beta, dtype=self.dtype, device=self.device)
            if beta_t.dim() == 0:
                beta_t = beta_t.expand(h.shape[0])
            std = self.std
            if all_ones(beta_t):
                # λ = 1/σ², η/λ = b + σ·(Wh): one GEMM with σ-scaled weights.
                mean = torch.addmm(self.visible_bias.detach(), h, (self.weights.detach() * std[:, None]).t())
                return GaussianConditional(mean=mean, std=std.expand_as(mean))
            column = beta_t[:, None]
            inverse_variance = std.reciprocal().square()
            base_precision = self.base_std.reciprocal().square()
            base_term = self.base_mean * base_precision
            precision = column * (inverse_variance - base_precision) + base_precision
            eta = torch.addmm(self.visible_bias.detach() * inverse_variance, h, self._scaled_weights().t())
            eta = eta.sub_(base_term).mul_(column).add_(base_term)
            return GaussianConditional(mean=eta.div_(precision), std=precision.rsqrt_())

    def sample_conditional(
        self, index: int, layers: tuple[Tensor, ...], beta: Tensor, *, generator: torch.Generator
    ) -> Tensor:
        """An exact draw of layer ``index`` from ``p_β(layer | other layer)``, per chain; a new tensor.

        ``index == 0``: ``v ~ N(η/λ, 1/λ)``; ``index == 1``: ``h ~ Bernoulli(σ(β a))``. Shape
        ``(n, layer_sizes[index])``, in the model's dtype.
        """
        if index == 0:
            conditional = self.visible_conditional(layers[1], beta)
            noise = randn(
                tuple(conditional.mean.shape), generator=generator, dtype=self.dtype, device=self.device
            )
            return noise.mul_(conditional.std).add_(conditional.mean)
        return sample_bernoulli(
            torch.sigmoid(self.conditional_logits(index, layers, beta)), generator=generator
        )

    def hidden_activities(
        self,
        v: Any,
        *,
        mode: str = "probability",
        generator: torch.Generator | int | None = None,
    ) -> Tensor:
        """The hidden representation of real data ``v`` at β = 1, to feed a DBM or a classifier.

        Parameters
        ----------
        v : Tensor, shape (n, n_visible), real
        mode : {"probability", "sample", "threshold"}, default "probability"
            ``p(h = 1 | v)``; a binary draw ``h ~ p(h | v)`` (with ``generator``); or the
            binary ``p(h = 1 | v) > 1/2``.
        generator : torch.Generator or int, optional
            For ``mode="sample"``.

        Returns
        -------
        Tensor, shape (n, n_hidden), the model's dtype
        """
        require(
            mode in _HIDDEN_MODES, f"mode must be one of {', '.join(map(repr, _HIDDEN_MODES))}, got {mode!r}"
        )
        v = self.validate_data(v, "v")
        with torch.no_grad():
            probability = torch.sigmoid(torch.addmm(self.hidden_bias.detach(), v, self._scaled_weights()))
            if mode == "probability":
                return probability
            if mode == "threshold":
                return (probability > 0.5).to(self.dtype)
            return sample_bernoulli(probability, generator=resolve_generator(generator, self.device))

    # ------------------------------------------------------------------ chains
    def _base_visible(self, n_chains: int, generator: torch.Generator) -> Tensor:
        """``n_chains`` exact draws ``v ~ N(μ, s²)`` from the base; shape ``(n_chains, n_visible)``."""
        noise = randn((n_chains, self.n_visible), generator=generator, dtype=self.dtype, device=self.device)
        return noise.mul_(self.base_std).add_(self.base_mean)

    # ------------------------------------------------------------------ enumeration
    def enumerate_log_f(self, beta: float = 1.0, *, chunk_states: int | None = None) -> Iterator[Tensor]:
        """Yield ``log f_β(h)`` (the visible layer integrated out) of every hidden state.

        Float64; states in the order of :func:`~boltzlab.models.rbm.all_binary_states`, in
        chunks of ``chunk_states`` (default about 32 MB of work space). The chunks'
        ``logsumexp`` is ``log Z(β)``.
        """
        yield from enumerate_hidden_log_f(self._float64(), float(beta), chunk_states=chunk_states)


register_model_kind(gaussian_rbm_kind(GaussianRBM))
