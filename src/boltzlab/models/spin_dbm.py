"""A deep Boltzmann machine whose visible layer is ±1 spins.

The DBM of :mod:`boltzlab.models.dbm` with the visible layer read as ``s = 2v − 1``
(:mod:`boltzlab.models.spin`; docs/algorithms.md §1.7): its energy is

    E(s, h¹, …) = −sᵀW¹h¹ − Σ_{l≥2} h^{l−1}ᵀW^l h^l − b⁰·s − Σ_{l≥1} b^l·h^l,

and the DBM's own code reads the visible layer through :meth:`SpinDBM.visible_values`, so the
energy, the odd-summed :class:`~boltzlab.models.base.MarginalTerms`, the mean-field posterior,
per-example AIS and the samplers are the DBM's. What this class adds:

- the visible log-odds of ``s_i = +1``, ``2β(b⁰ + W¹h¹)_i + (1 − β)·b^A_i``;
- exact ``log Z(β)`` and ``log f_β(v)`` from the equal binary DBM (``W¹' = 2W¹``, ``b⁰' = 2b⁰``,
  ``b¹' = b¹ − W¹ᵀ1``; :meth:`SpinDBM.binary_dbm`), less ``β·Σ_i b⁰_i``;
- data and chains read from ±1 (or 0/1 with 0 for −1).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

from boltzlab import gemm
from boltzlab.chains import Chains
from boltzlab.io import register_model_kind
from boltzlab.models.base import all_ones
from boltzlab.models.dbm import DBM
from boltzlab.models.dbm_enumeration import DBMParameters64, enumerate_parity_log_f, visible_log_f
from boltzlab.models.files import dbm_kind
from boltzlab.models.spin import SpinVisible, binary_coupling

__all__ = ["SpinDBM"]


class SpinDBM(SpinVisible, DBM):
    """A DBM with ±1 visible units and ``L ≥ 2`` binary hidden layers.

    Parameters are those of :class:`~boltzlab.models.dbm.DBM`; ``weights[0]`` and ``biases[0]``
    are the spin energy's ``W¹`` and ``b⁰``.

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> dbm = bl.models.SpinDBM(layer_sizes=[5, 3, 2], generator=0)
    >>> dbm = dbm.set_base_rate(torch.tensor([[1, -1, 1, 1, -1], [-1, -1, 1, 1, 1]]))
    >>> abs(bl.exact_log_z(dbm) - (bl.exact_log_z(dbm.binary_dbm()) - float(dbm.spin_offset()))) < 1e-9
    True
    """

    _article = "a"

    def extra_repr(self) -> str:
        return super().extra_repr() + ", visible=±1"

    def _spin_bias(self) -> Tensor:
        return self.biases[0]

    # ------------------------------------------------------------------ the binary DBM it equals
    def _binary_parameters64(self) -> DBMParameters64:
        """The equal 0/1 DBM's parameters in float64 (module docstring)."""
        parameters = self._parameters64()
        first, visible, next_bias = binary_coupling(self.weights[0], self.biases[0], self.biases[1])
        return DBMParameters64(
            weights=(first, *parameters.weights[1:]),
            biases=(visible, next_bias, *parameters.biases[2:]),
            base_logits=parameters.base_logits,
        )

    def binary_dbm(self, *, dtype: torch.dtype = torch.float64) -> DBM:
        """The 0/1 DBM with the same distribution; ``log Z_binary(β) = log Z(β) + β·Σ_i b⁰_i``.

        Its base is this model's. A new model, detached from this one.
        """
        parameters = self._binary_parameters64()
        model = DBM(
            weights=list(parameters.weights), biases=list(parameters.biases), dtype=dtype, device=self.device
        )
        with torch.no_grad():
            model.base_logits.copy_(self.base_logits.to(dtype))
        model.base_fitted = self.base_fitted
        return model

    # ------------------------------------------------------------------ densities
    def free_energy(self, layers: tuple[Tensor | None, ...] | Any, beta: Tensor | float = 1.0) -> Tensor:
        """As :meth:`DBM.free_energy`; a bare ``v`` may be ±1 spins or 0/1 rows."""
        if isinstance(layers, (tuple, list)):  # layers, as DBM.free_energy takes them
            return super().free_energy(tuple(layers), beta)
        v = self.validate_data(layers, "v").to(torch.float64)
        beta = float(beta)
        return -(visible_log_f(self._binary_parameters64(), v, beta) - beta * self.spin_offset())

    def enumerate_log_f(
        self, beta: float = 1.0, *, chunk_states: int | None = None, enumerated: str = "auto"
    ) -> Iterator[Tensor]:
        """As :meth:`DBM.enumerate_log_f`: the equal binary DBM's chunks less ``β·Σ_i b⁰_i``."""
        beta = float(beta)
        shift = beta * self.spin_offset()
        for chunk in enumerate_parity_log_f(
            self._binary_parameters64(), beta, chunk_states=chunk_states, enumerated=enumerated
        ):
            yield chunk - shift

    # ------------------------------------------------------------------ sampling
    def conditional_logits(self, index: int, layers: tuple[Tensor | None, ...], beta: Tensor) -> Tensor:
        """As :meth:`DBM.conditional_logits`; the visible layer's are the log-odds of ``s_i = +1``,
        ``2β·(b⁰ + W¹h¹) + (1 − β)·b^A``."""
        if index != 0:
            return super().conditional_logits(index, layers, beta)
        with torch.no_grad():
            if all_ones(beta):
                return gemm.addmm(self.biases[0], layers[1], self.weights[0].t()).mul_(2.0)
            shifted = self.biases[0] - 0.5 * self.base_logits
            logits = gemm.addmm(shifted, layers[1], self.weights[0].t()).mul_(2.0 * beta[:, None])
            return logits.add_(self.base_logits) if self.base_fitted else logits

    def chains_from(
        self, v: Any, *, generator: torch.Generator | int | None = None, beta: float = 1.0
    ) -> Chains:
        """As :meth:`DBM.chains_from`, from ±1 spins (or 0/1 rows)."""
        return super().chains_from(self.validate_data(v, "data"), generator=generator, beta=beta)


register_model_kind(dbm_kind(SpinDBM, name="spin-dbm"))
