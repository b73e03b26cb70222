"""Binary restricted Boltzmann machine on its tempered family.

Energy ``E(v, h) = −vᵀWh − bᵀv − cᵀh`` with ``v ∈ {0,1}^D``, ``h ∈ {0,1}^J``
(docs/algorithms.md §1.1). The tempered family (§1.3) runs from a normalised base
``p1(v, h) = Π_i Bernoulli(v_i; σ(b^A_i)) · 2^{−J}`` at β = 0 to the RBM at β = 1:

    log f_β(v, h) = −βE(v, h) + (1 − β)·log p1(v, h).

At β the tempered model is itself an RBM with parameters ``(βW, βb + (1−β)b^A, βc)``, so
block Gibbs and flip-the-state work unchanged. With the hidden units summed out

    log f_β(v) = (1 − β)·log p1(v) − (1−β)·J log 2 + β bᵀv + Σ_j softplus(β a_j),  a = c + vᵀW

— note ``softplus(β a)``, not ``β softplus(a)``.

The base is the *base-rate* model of Salakhutdinov & Murray (2008) (``set_base_rate``: the
smoothed data marginals), or uniform (``b^A = 0``: plain energy scaling).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor, nn

from boltzlab import gemm
from boltzlab.errors import ValidationError
from boltzlab.io import register_model_kind
from boltzlab.models.base import MarginalTerms, all_ones, log_f_marginal
from boltzlab.models.base_rate import BaseRateModel
from boltzlab.models.bipartite import BipartiteModel
from boltzlab.models.files import rbm_kind
from boltzlab.models.parameters import check_dtype
from boltzlab.models.witness import WitnessRows
from boltzlab.numerics import softplus
from boltzlab.validation import check_device, require

__all__ = ["RBM", "all_binary_states", "enumerate_rbm_log_f", "enumeration_chunk_terms"]


def all_binary_states(
    n_units: int,
    *,
    start: int = 0,
    stop: int | None = None,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device = "cpu",
) -> Tensor:
    """Rows ``start..stop-1`` of the ``2^n_units`` binary states, unit 0 the least significant bit.

    Shape ``(stop − start, n_units)``.
    """
    stop = 2**n_units if stop is None else stop
    codes = torch.arange(start, stop, device=device, dtype=torch.int64)
    shifts = torch.arange(n_units, device=device, dtype=torch.int64)
    return ((codes[:, None] >> shifts[None, :]) & 1).to(dtype)


def enumeration_chunk_terms(device: torch.device) -> int:
    """Softplus terms per chunk of the enumeration: 2^20 (8 MB of float64) on the CPU, where a
    larger chunk falls out of the caches (a 64×20 RBM: 0.88 s at 2^20 against 1.84 s at 2^22,
    one thread; 784×20 and 20×500 took the same at either), 2^22 on a GPU, where fewer, larger
    kernels are what count."""
    return 1 << (20 if device.type == "cpu" else 22)


def enumerate_softplus_sums(
    coupling: Tensor, offset: Tensor, linear: Tensor, constant: float, *, chunk_states: int | None
) -> Iterator[Tensor]:
    """Yield ``constant + s·linear + Σ_k softplus(offset_k + (s @ coupling)_k)`` over all ``s``.

    ``s`` runs over the ``2^n`` binary states (``n = coupling.shape[0]``) in the order of
    :func:`all_binary_states`. The states are split into low and high bits: the products of
    the ``2^low`` low patterns are computed once, and each chunk adds one high pattern's row
    to them, so the matrix product costs one addition per element instead of ``n`` FMAs.
    The softplus, which cannot be shared, is what remains.
    """
    n_enum, n_other = coupling.shape
    require(n_enum <= 40, f"exact enumeration needs min(n_visible, n_hidden) <= 40, got {n_enum}")
    if chunk_states is None:
        chunk_states = max(1, enumeration_chunk_terms(coupling.device) // max(n_other, 1))
    n_low = min(n_enum, max(0, int(chunk_states).bit_length() - 1))
    low_states = all_binary_states(n_low, dtype=coupling.dtype, device=coupling.device)
    low_inputs = torch.addmm(offset, low_states, coupling[:n_low])
    low_linear = low_states @ linear[:n_low] + constant
    high_coupling, high_linear = coupling[n_low:], linear[n_low:]
    for high in range(2 ** (n_enum - n_low)):
        if n_enum == n_low:
            inputs, shift = low_inputs, 0.0
        else:
            bits = all_binary_states(
                n_enum - n_low, start=high, stop=high + 1, dtype=coupling.dtype, device=coupling.device
            )[0]
            inputs = low_inputs + bits @ high_coupling
            shift = bits @ high_linear
        yield softplus(inputs).sum(1) + low_linear + shift


def enumerate_rbm_log_f(
    weights: Tensor,
    visible_bias: Tensor,
    hidden_bias: Tensor,
    base_logits: Tensor,
    base_log_norm: float,
    beta: float,
    *,
    constant: float = 0.0,
    chunk_states: int | None = None,
) -> Iterator[Tensor]:
    """``log f_β`` of every state of a binary RBM's smaller layer, plus ``constant`` (float64 chunks).

    The parameters are float64 ``W (D, J)``, ``b (D,)``, ``c (J,)`` and the base's log-odds
    ``b^A (D,)`` with its log normaliser; see :meth:`RBM.enumerate_log_f`.
    """
    if hidden_bias.shape[0] <= visible_bias.shape[0]:
        coupling, offset, linear = (
            beta * weights.t(),
            beta * visible_bias + (1.0 - beta) * base_logits,
            beta * hidden_bias,
        )
    else:
        coupling, offset, linear = (
            beta * weights,
            beta * hidden_bias,
            beta * visible_bias + (1.0 - beta) * base_logits,
        )
    yield from enumerate_softplus_sums(
        coupling, offset, linear, constant - (1.0 - beta) * base_log_norm, chunk_states=chunk_states
    )


class RBM(WitnessRows, BaseRateModel, BipartiteModel, nn.Module):
    """A binary-binary RBM; parameters only, so ``torch.optim`` and ``state_dict`` work.

    Parameters
    ----------
    n_visible, n_hidden : int, optional
        Layer sizes, when no ``weights`` are given. Weights are drawn from N(0, ``weight_std``²)
        with ``generator``; biases start at zero.
    weights : Tensor, shape (n_visible, n_hidden), optional
    visible_bias : Tensor, shape (n_visible,), optional
    hidden_bias : Tensor, shape (n_hidden,), optional
    dtype : torch.dtype, default float32
    device : str or torch.device, default "cpu"
    generator : torch.Generator or int, optional
        Randomness for the initial weights (a seed is accepted too).
    weight_std : float, default 0.01

    Attributes
    ----------
    weights : Parameter, shape (n_visible, n_hidden)
    visible_bias : Parameter, shape (n_visible,)
    hidden_bias : Parameter, shape (n_hidden,)
    base_logits : buffer, shape (n_visible,)
        ``b^A``, the log-odds of the base-rate model (zeros: uniform base).
    base_fitted : bool
        Whether ``base_logits`` was fitted to data (``set_base_rate``).
    witness : Tensor or None, shape (n_rows, n_visible)
        Rows of the data the base was fitted to, kept (and saved) for the log Z verdict's
        missing-mass witness (:class:`~boltzlab.models.witness.WitnessRows`, docs/trust.md).

    Examples
    --------
    >>> import boltzlab as bl
    >>> model = bl.RBM(n_visible=6, n_hidden=3, generator=0)
    >>> round(bl.exact_log_z(model), 3) > 0
    True
    """

    _article = "an"

    def __init__(
        self,
        n_visible: int | None = None,
        n_hidden: int | None = None,
        *,
        weights: Tensor | None = None,
        visible_bias: Tensor | None = None,
        hidden_bias: Tensor | None = None,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
        generator: torch.Generator | int | None = None,
        weight_std: float = 0.01,
    ) -> None:
        super().__init__()
        self._init_bipartite(
            n_visible,
            n_hidden,
            weights,
            visible_bias,
            hidden_bias,
            dtype=check_dtype(dtype),
            device=check_device(device),
            generator=generator,
            weight_std=weight_std,
            base_logits=True,
        )

    def extra_repr(self) -> str:
        base = "base-rate" if self.base_fitted else "uniform"
        return f"n_visible={self.n_visible}, n_hidden={self.n_hidden}, dtype={self.dtype}, base={base}"

    # ------------------------------------------------------------------ densities
    def energy(self, layers: tuple[Tensor, ...]) -> Tensor:
        """``E(v, h)`` per chain; float64, shape ``(n,)``."""
        v, h = (layer.to(torch.float64) for layer in layers[:2])
        weights = self.weights.detach().to(torch.float64)
        return -(
            ((v @ weights) * h).sum(1)
            + v @ self.visible_bias.detach().to(torch.float64)
            + h @ self.hidden_bias.detach().to(torch.float64)
        )

    def marginal_terms(self, layers: tuple[Tensor, ...] | Tensor) -> MarginalTerms:
        """Summed-out pieces for visible states (``layers`` or just ``v``, shape ``(n, D)``)."""
        v = layers[0] if isinstance(layers, tuple) else layers
        with torch.no_grad():
            preactivation = gemm.addmm(self.hidden_bias, v, self.weights)
            base = self._base_log_p1(v)
            linear = v.to(torch.float64) @ self.visible_bias.to(torch.float64)
        return MarginalTerms(base=base, linear=linear, preactivation=preactivation)

    def free_energy(self, v: Tensor, beta: Tensor | float = 1.0) -> Tensor:
        """``−log f_β(v)`` with the hidden units summed out; float64, shape ``(n,)``.

        At β = 1 this is the usual ``−bᵀv − Σ_j softplus(c_j + (vᵀW)_j)``.
        """
        return -log_f_marginal(self.marginal_terms(v), beta)

    # ------------------------------------------------------------------ sampling
    def conditional_logits(self, index: int, layers: tuple[Tensor, ...], beta: Tensor) -> Tensor:
        """Log-odds of layer ``index`` (0 visible, 1 hidden) given the other, at per-chain β.

        Hidden: ``β·(c + vW)``. Visible: ``β·(b + Wh) + (1 − β)·b^A``. Shape ``(n, size)``.
        """
        with torch.no_grad():
            if index == 1:
                logits = gemm.addmm(self.hidden_bias, layers[0], self.weights)
                return logits if all_ones(beta) else logits.mul_(beta[:, None])
            if index == 0:
                return self._visible_logits(self.visible_bias, layers[1], self.weights, beta)
        raise ValidationError(f"an RBM has layers 0 and 1, got index {index}")

    # ------------------------------------------------------------------ enumeration
    def enumerate_log_f(self, beta: float = 1.0, *, chunk_states: int | None = None) -> Iterator[Tensor]:
        """Yield ``log f_β`` of every state of the smaller layer, the other layer summed out.

        Float64 throughout. With ``h`` enumerated (``J ≤ D``)::

            log f_β(h) = β c·h − (1−β)·log_norm + Σ_i softplus(β(b + Wh)_i + (1−β) b^A_i)

        and symmetrically with ``v`` enumerated. States come in chunks of ``chunk_states``
        (default: about 8 MB of work space on the CPU, 32 MB on a GPU), ordered as :func:`all_binary_states`, so
        ``2^24`` states never hold more than one chunk in memory.
        """
        yield from enumerate_rbm_log_f(
            self.weights.detach().to(torch.float64),
            self.visible_bias.detach().to(torch.float64),
            self.hidden_bias.detach().to(torch.float64),
            self.base_logits.detach().to(torch.float64),
            float(self._base_log_norm()),
            float(beta),
            chunk_states=chunk_states,
        )

    # ------------------------------------------------------------------ construction helpers
    @classmethod
    def from_sklearn(
        cls,
        estimator: Any,
        *,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
    ) -> RBM:
        """Import a fitted scikit-learn ``BernoulliRBM``.

        scikit-learn stores ``components_`` as (n_hidden, n_visible) and uses the same energy
        ``−vᵀWh − bᵀv − cᵀh``, so ``W = components_ᵀ``, ``b = intercept_visible_``,
        ``c = intercept_hidden_``. The model has not seen data: call ``set_base_rate(data)``
        before AIS for much better estimates.
        """
        for attribute in ("components_", "intercept_visible_", "intercept_hidden_"):
            if not hasattr(estimator, attribute):
                raise ValidationError(
                    f"expected a fitted sklearn.neural_network.BernoulliRBM (missing {attribute}); call fit() first"
                )
        model = cls(
            weights=torch.as_tensor(estimator.components_, dtype=torch.float64).t(),
            visible_bias=torch.as_tensor(estimator.intercept_visible_, dtype=torch.float64),
            hidden_bias=torch.as_tensor(estimator.intercept_hidden_, dtype=torch.float64),
            dtype=dtype,
            device=device,
        )
        model.metadata["source"] = "sklearn.neural_network.BernoulliRBM"
        return model


register_model_kind(rbm_kind(RBM))
