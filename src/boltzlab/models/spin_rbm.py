"""An RBM with ±1 spin visible units and binary hidden units, on its tempered family.

Energy ``E(s, h) = −sᵀWh − bᵀs − cᵀh`` with ``s ∈ {−1, +1}^D``, ``h ∈ {0, 1}^J``
(docs/algorithms.md §1.7). Chains hold ``v = (s + 1)/2`` (:mod:`boltzlab.models.spin`), so the
binary operators, samplers and kernels run on it unchanged; the model reads ``s = 2v − 1``:

- hidden log-odds ``c + sW``; the log-odds of ``s_i = +1`` against ``−1``, ``2(b + Wh)_i``
  (the field enters twice: the two states differ by 2 in ``s``);
- the base at β = 0: independent spins with the data's smoothed marginals (the base-rate model,
  ``b^A`` the log-odds of ``s_i = +1``), every hidden unit uniform; at β the visible log-odds are
  ``2β(b + Wh) + (1 − β)·b^A``;
- with the hidden units summed out,

      log f_β(s) = (1 − β)·log p1(s) + β·bᵀs + Σ_j softplus(β(c + sW)_j),

  the :class:`~boltzlab.models.base.MarginalTerms` form, so AIS, RAISE, RTS, TS, TI, TI-RB and
  MBAR work unchanged;
- exact ``log Z(β)`` and the certified bound's ``log f`` come from the equal binary RBM
  (``W' = 2W``, ``b' = 2b``, ``c' = c − Wᵀ1``; :meth:`SpinRBM.binary_rbm`) with
  ``log Z(β) = log Z_binary(β) − β·Σ_i b_i``.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor, nn

from boltzlab import gemm
from boltzlab.errors import ValidationError
from boltzlab.io import register_model_kind
from boltzlab.models.base import MarginalTerms, all_ones, log_f_marginal
from boltzlab.models.base_rate import BaseRateModel
from boltzlab.models.bipartite import BipartiteModel
from boltzlab.models.files import spin_rbm_kind
from boltzlab.models.parameters import check_dtype
from boltzlab.models.rbm import RBM, enumerate_rbm_log_f
from boltzlab.models.spin import SpinVisible, binary_coupling
from boltzlab.models.witness import WitnessRows
from boltzlab.validation import check_device

__all__ = ["SpinRBM"]


class SpinRBM(SpinVisible, WitnessRows, BaseRateModel, BipartiteModel, nn.Module):
    """An RBM whose visible units are ±1 spins; parameters only, so ``torch.optim`` works.

    Parameters
    ----------
    n_visible, n_hidden : int, optional
        Layer sizes, when no ``weights`` are given. Weights are drawn from N(0, ``weight_std``²)
        with ``generator``; biases start at zero.
    weights : Tensor, shape (n_visible, n_hidden), optional
        ``W`` of the spin energy.
    visible_bias : Tensor, shape (n_visible,), optional
        ``b``, the fields of the spins.
    hidden_bias : Tensor, shape (n_hidden,), optional
    dtype, device, generator, weight_std
        As for :class:`~boltzlab.models.rbm.RBM`.

    Attributes
    ----------
    weights, visible_bias, hidden_bias : Parameter
        The spin energy's ``W``, ``b``, ``c``.
    base_logits : buffer, shape (n_visible,)
        ``b^A``, the base's log-odds of ``s_i = +1`` (zeros: the uniform base).
    witness : Tensor or None
        Rows of the data the base was fitted to, held 0/1 (0 for −1).

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> model = bl.models.SpinRBM(n_visible=6, n_hidden=3, generator=0)
    >>> spins = torch.tensor([[1, -1, 1, 1, -1, -1], [-1, -1, 1, 1, 1, -1]])
    >>> model = model.set_base_rate(spins)
    >>> binary = model.binary_rbm()
    >>> abs(bl.exact_log_z(model) - (bl.exact_log_z(binary) - float(model.spin_offset()))) < 1e-9
    True
    """

    _article = "a"

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
        return f"n_visible={self.n_visible} (±1), n_hidden={self.n_hidden}, dtype={self.dtype}, base={base}"

    def _spin_bias(self) -> Tensor:
        return self.visible_bias

    # ------------------------------------------------------------------ the binary RBM it equals
    def binary_rbm(self, *, dtype: torch.dtype = torch.float64) -> RBM:
        """The 0/1 RBM with the same distribution: ``W' = 2W``, ``b' = 2b``, ``c' = c − Wᵀ1``.

        Its base and witness rows are this model's; ``log Z_binary(β) = log Z(β) + β·Σ_i b_i``
        (:meth:`spin_offset`). A new model, detached from this one.
        """
        weights, visible_bias, hidden_bias = binary_coupling(
            self.weights, self.visible_bias, self.hidden_bias
        )
        model = RBM(
            weights=weights,
            visible_bias=visible_bias,
            hidden_bias=hidden_bias,
            dtype=dtype,
            device=self.device,
        )
        with torch.no_grad():
            model.base_logits.copy_(self.base_logits.to(dtype))
        model.base_fitted = self.base_fitted
        if self.witness_bits is not None:
            model.set_witness_bits(self.witness_bits)
        return model

    @classmethod
    def from_binary(cls, rbm: RBM) -> SpinRBM:
        """The spin model equal to a 0/1 ``rbm``: ``W = W'/2``, ``b = b'/2``, ``c = c' + Wᵀ1``.

        Its base and witness rows are the RBM's, its dtype and device too.
        """
        with torch.no_grad():
            weights = rbm.weights.detach().to(torch.float64) / 2.0
            model = cls(
                weights=weights,
                visible_bias=rbm.visible_bias.detach().to(torch.float64) / 2.0,
                hidden_bias=rbm.hidden_bias.detach().to(torch.float64) + weights.sum(0),
                dtype=rbm.dtype,
                device=rbm.device,
            )
            model.base_logits.copy_(rbm.base_logits)
        model.base_fitted = rbm.base_fitted
        if rbm.witness_bits is not None:
            model.set_witness_bits(rbm.witness_bits)
        return model

    # ------------------------------------------------------------------ densities
    def energy(self, layers: tuple[Tensor, ...]) -> Tensor:
        """``E(s, h)`` per chain of layers held as chains hold them (0/1, ``s = 2v − 1``: not ±1);
        float64, shape ``(n,)``."""
        s = self.visible_values(layers[0].to(torch.float64))
        h = layers[1].to(torch.float64)
        weights = self.weights.detach().to(torch.float64)
        return -(
            ((s @ weights) * h).sum(1)
            + s @ self.visible_bias.detach().to(torch.float64)
            + h @ self.hidden_bias.detach().to(torch.float64)
        )

    def marginal_terms(self, layers: tuple[Tensor, ...] | Tensor) -> MarginalTerms:
        """Summed-out pieces for visible rows held 0/1 as chains hold them (``layers`` or just ``v``,
        shape ``(n, D)``; ±1 data go through :meth:`validate_data` first)."""
        v = layers[0] if isinstance(layers, tuple) else layers
        with torch.no_grad():
            s = self.visible_values(v)
            preactivation = gemm.addmm(self.hidden_bias, s, self.weights)
            base = self._base_log_p1(v)
            linear = s.to(torch.float64) @ self.visible_bias.to(torch.float64)
        return MarginalTerms(base=base, linear=linear, preactivation=preactivation)

    def free_energy(self, v: Tensor, beta: Tensor | float = 1.0) -> Tensor:
        """``−log f_β(v)`` with the hidden units summed out; float64, shape ``(n,)``.

        ``v`` holds 0/1 rows as chains do, or ±1 spins. At β = 1 this is
        ``−bᵀs − Σ_j softplus(c_j + (sᵀW)_j)``.
        """
        if bool((v < 0).any()):
            v = self.validate_data(v, "v")
        return -log_f_marginal(self.marginal_terms(v), beta)

    # ------------------------------------------------------------------ sampling
    def conditional_logits(self, index: int, layers: tuple[Tensor, ...], beta: Tensor) -> Tensor:
        """Log-odds of layer ``index`` (0 visible, 1 hidden) given the other (layers held 0/1), at per-chain β.

        Hidden: ``β·(c + sW)``. Visible, of ``s_i = +1`` (``v_i = 1``):
        ``2β·(b + Wh) + (1 − β)·b^A``. Shape ``(n, size)``.
        """
        with torch.no_grad():
            if index == 1:
                logits = gemm.addmm(self.hidden_bias, self.visible_values(layers[0]), self.weights)
                return logits if all_ones(beta) else logits.mul_(beta[:, None])
            if index == 0:
                if all_ones(beta):
                    return gemm.addmm(self.visible_bias, layers[1], self.weights.t()).mul_(2.0)
                # 2β(b + Wh) + (1 − β)b^A = 2β(b − b^A/2 + Wh) + b^A
                shifted = self.visible_bias - 0.5 * self.base_logits
                logits = gemm.addmm(shifted, layers[1], self.weights.t()).mul_(2.0 * beta[:, None])
                return logits.add_(self.base_logits) if self.base_fitted else logits
        raise ValidationError(f"a SpinRBM has layers 0 and 1, got index {index}")

    # ------------------------------------------------------------------ enumeration
    def enumerate_log_f(self, beta: float = 1.0, *, chunk_states: int | None = None) -> Iterator[Tensor]:
        """Yield ``log f_β`` of every state of the smaller layer, the other summed out; float64.

        The equal binary RBM's chunks (:meth:`~boltzlab.models.rbm.RBM.enumerate_log_f`, same
        order and chunking) less ``β·Σ_i b_i``.
        """
        beta = float(beta)
        weights, visible_bias, hidden_bias = binary_coupling(
            self.weights, self.visible_bias, self.hidden_bias
        )
        yield from enumerate_rbm_log_f(
            weights,
            visible_bias,
            hidden_bias,
            self.base_logits.detach().to(torch.float64),
            float(self._base_log_norm()),
            beta,
            constant=-beta * float(self.spin_offset()),
            chunk_states=chunk_states,
        )


register_model_kind(spin_rbm_kind(SpinRBM))
