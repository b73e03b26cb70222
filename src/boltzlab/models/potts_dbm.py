"""A deep Boltzmann machine whose visible layer is categorical (Potts) sites.

The DBM of :mod:`boltzlab.models.dbm` with its visible layer held one-hot, ``L`` sites of
``q`` states (:mod:`boltzlab.models.categorical`; docs/algorithms.md §1.2, §1.5). The energy,
the mean-field posterior (the visible layer is given), the odd-summed
:class:`~boltzlab.models.base.MarginalTerms` and the samplers are the DBM's; what changes is

- the base: the profile of the (weighted) sequences on the sites, every hidden layer uniform,
  and at β a site's logits ``β(g_i + (W¹h¹)_i) + (1 − β) b^A_i`` (a softmax per site gives its
  conditional; the operators draw it with their categorical rule);
- exact ``log Z(β)``: the odd layers are enumerated and the even ones summed out, each site by
  a log-sum-exp over its states (:mod:`boltzlab.models.dbm_enumeration`); the exact
  ``log p(v)`` enumerates the smaller parity of hidden layers per sequence, as for a binary DBM;
- the zero-sum gauge of the fields and of ``W¹``, kept after every training update.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.data.sequences import Alphabet
from boltzlab.io import register_model_kind
from boltzlab.models.categorical import (
    CategoricalVisible,
    alphabet_record,
    categorical_shape,
    gauge_visible_coupling_,
)
from boltzlab.models.dbm import DBM
from boltzlab.models.dbm_enumeration import DBMParameters64, visible_log_f
from boltzlab.models.files import potts_dbm_kind
from boltzlab.validation import require

__all__ = ["PottsDBM"]


class PottsDBM(CategoricalVisible, DBM):
    """A DBM with ``L`` categorical visible sites of ``q`` states and ``L ≥ 2`` binary hidden layers.

    Parameters
    ----------
    n_sites, n_states : int, optional
        ``L`` and ``q``, when no ``weights`` are given (``q`` may come from ``alphabet``).
    hidden_sizes : sequence of int, optional
        Sizes of the hidden layers (at least two).
    weights : sequence of Tensor, optional
        ``weights[0]`` of shape ``(L, q, n_1)`` or ``(L·q, n_1)`` (then give ``n_states``),
        then ``(n_l, n_{l+1})``.
    biases : sequence of Tensor, optional
        ``biases[0]`` the fields, shape ``(L, q)`` or ``(L·q,)``; then one per hidden layer.
    alphabet : str or Alphabet, optional
    dtype, device, generator, weight_std
        As for :class:`~boltzlab.models.dbm.DBM`.

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> model = bl.models.PottsDBM(n_sites=3, n_states=4, hidden_sizes=[3, 2], generator=0)
    >>> model = model.set_base_rate(torch.tensor([[0, 1, 3], [2, 2, 0]]))
    >>> model.layer_sizes
    (12, 3, 2)
    """

    _article = "a"

    def __init__(
        self,
        n_sites: int | None = None,
        n_states: int | None = None,
        hidden_sizes: Sequence[int] | None = None,
        *,
        weights: Sequence[Tensor] | None = None,
        biases: Sequence[Tensor] | None = None,
        alphabet: str | Alphabet | None = None,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
        generator: torch.Generator | int | None = None,
        weight_std: float = 0.01,
    ) -> None:
        first = None if weights is None else weights[0]
        n_sites, n_states, first, symbols = categorical_shape(
            n_sites, n_states, first, alphabet, model="PottsDBM"
        )
        if weights is not None:
            weights = [first, *weights[1:]]
        if biases is not None:
            biases = [torch.as_tensor(biases[0]).reshape(-1), *biases[1:]]
        layer_sizes = None
        if weights is None:
            require(
                hidden_sizes is not None and len(hidden_sizes) >= 2,
                "a PottsDBM needs hidden_sizes with at least two hidden layers (one is a PottsRBM)",
            )
            layer_sizes = [n_sites * n_states, *hidden_sizes]
        super().__init__(
            layer_sizes,
            weights=weights,
            biases=biases,
            dtype=dtype,
            device=device,
            generator=generator,
            weight_std=weight_std,
        )
        self.n_states = n_states
        if symbols is not None:
            self.metadata["alphabet"] = alphabet_record(symbols)
        if weights is None:
            self.apply_gauge_()

    @property
    def layer_kinds(self) -> tuple[str, ...]:  # type: ignore[override]
        """``("categorical", "binary", …)``: how the layerwise operators update each layer."""
        return ("categorical", *("binary",) * (len(self.layer_sizes) - 1))

    def extra_repr(self) -> str:
        base = "profile" if self.base_fitted else "uniform"
        hidden = ", ".join(map(str, self.layer_sizes[1:]))
        return f"n_sites={self.n_sites}, n_states={self.n_states}, hidden=({hidden}), dtype={self.dtype}, base={base}"

    def _parameters64(self) -> DBMParameters64:
        parameters = super()._parameters64()
        return DBMParameters64(
            weights=parameters.weights,
            biases=parameters.biases,
            base_logits=parameters.base_logits,
            visible_states=self.n_states,
        )

    def _fields(self) -> Tensor:
        return self.biases[0]

    @torch.no_grad()
    def apply_gauge_(self) -> PottsDBM:
        """The zero-sum gauge of the fields and of ``W¹`` (compensated in ``b¹``); returns ``self``."""
        gauge_visible_coupling_(self.weights[0], self.biases[0], self.biases[1], self.n_states)
        return self

    def free_energy(self, layers: tuple[Tensor | None, ...] | Any, beta: Tensor | float = 1.0) -> Tensor:
        """As :meth:`DBM.free_energy`; a bare ``v`` may be sequences (indices, one-hot or an Alignment)."""
        if isinstance(layers, tuple):
            return super().free_energy(layers, beta)
        v = self.validate_data(layers, "v").to(torch.float64)
        return -visible_log_f(self._parameters64(), v, float(beta))

    def chains_from(
        self, v: Any, *, generator: torch.Generator | int | None = None, beta: float = 1.0
    ) -> Chains:
        """As :meth:`DBM.chains_from`, from sequences (indices, one-hot or an Alignment)."""
        return super().chains_from(self.validate_data(v, "data"), generator=generator, beta=beta)


register_model_kind(potts_dbm_kind(PottsDBM))
